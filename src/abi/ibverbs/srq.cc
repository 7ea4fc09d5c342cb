// Shared receive queues: basic and XRC SRQs (tag matching fails with
// EOPNOTSUPP).
#include "abi/ibverbs/abi.h"
#include "verbs/context.h"
#include "verbs/pd.h"
#include "verbs/srq.h"

using softverbs::abi::fail;
using softverbs::verbs::Context;
using softverbs::verbs::Srq;

namespace softverbs::abi {

int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (srq == nullptr) {
    if (bad != nullptr) *bad = wr;
    return EINVAL;
  }
  return Srq::from(srq)->post_recv(wr, bad);
}

ibv_srq* op_create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr) {
  if (ctx == nullptr || attr == nullptr) return fail<ibv_srq>(EINVAL);
  Result<Srq*> srq = Srq::create(Context::from(ctx), attr);
  if (!srq.is_ok()) return fail<ibv_srq>(srq.code());
  return srq.value()->ibv();
}

int op_get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  if (srq == nullptr) return EINVAL;
  return Srq::from(srq)->number(srq_num).code();
}

}  // namespace softverbs::abi

SV_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
  if (pd == nullptr || init == nullptr) return fail<ibv_srq>(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = init->srq_context;
  ex.attr = init->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_PD;
  ex.pd = pd;
  ibv_srq* srq = softverbs::abi::op_create_srq_ex(pd->context, &ex);
  if (srq != nullptr) init->attr = ex.attr;  // ibv_create_srq(3): the actual max_wr and max_sge
  return srq;
}

SV_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (srq == nullptr || attr == nullptr) return EINVAL;
  return Srq::from(srq)->modify(*attr, mask).code();
}

SV_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  if (srq == nullptr) return EINVAL;
  return Srq::from(srq)->query(attr).code();
}

SV_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  if (srq == nullptr) return EINVAL;
  return Srq::from(srq)->destroy().code();
}
