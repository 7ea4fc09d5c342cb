// Shared receive queues: not supported yet. Every verb fails the documented way.
#include "abi/ibverbs/abi.h"

using softverbs::abi::fail;

namespace softverbs::abi {

int op_post_srq_recv(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (bad != nullptr) *bad = wr;
  return EOPNOTSUPP;
}

ibv_srq* op_create_srq_ex(ibv_context*, ibv_srq_init_attr_ex*) { return fail<ibv_srq>(EOPNOTSUPP); }

int op_get_srq_num(ibv_srq*, uint32_t*) { return EOPNOTSUPP; }

}  // namespace softverbs::abi

SV_EXPORT ibv_srq* ibv_create_srq(ibv_pd*, ibv_srq_init_attr*) { return fail<ibv_srq>(EOPNOTSUPP); }
SV_EXPORT int ibv_modify_srq(ibv_srq*, ibv_srq_attr*, int) { return EOPNOTSUPP; }
SV_EXPORT int ibv_query_srq(ibv_srq*, ibv_srq_attr*) { return EOPNOTSUPP; }
SV_EXPORT int ibv_destroy_srq(ibv_srq*) { return EOPNOTSUPP; }
