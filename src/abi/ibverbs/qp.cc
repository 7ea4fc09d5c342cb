// Queue pairs.
#include "abi/ibverbs/abi.h"
#include "verbs/context.h"
#include "verbs/qp.h"

using softverbs::abi::fail;
using softverbs::verbs::Context;
using softverbs::verbs::Qp;

namespace softverbs::abi {

int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return Qp::from(qp)->post_send(wr, bad); }

int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return Qp::from(qp)->post_recv(wr, bad); }

ibv_qp* op_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
  if (ctx == nullptr || attr == nullptr) return fail<ibv_qp>(EINVAL);
  Result<Qp*> qp = Qp::create(Context::from(ctx), attr);
  if (!qp.is_ok()) return fail<ibv_qp>(qp.code());
  if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) fill_qp_ex_ops(qp.value()->ibv_ex(), attr->send_ops_flags);
  return qp.value()->ibv();
}

ibv_qp* op_open_qp(ibv_context* ctx, ibv_qp_open_attr* attr) {
  if (ctx == nullptr || attr == nullptr) return fail<ibv_qp>(EINVAL);
  Result<Qp*> qp = Qp::open(Context::from(ctx), *attr);
  if (!qp.is_ok()) return fail<ibv_qp>(qp.code());
  return qp.value()->ibv();
}

}  // namespace softverbs::abi

SV_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (pd == nullptr || init == nullptr) return fail<ibv_qp>(EINVAL);
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = init->qp_context;
  ex.send_cq = init->send_cq;
  ex.recv_cq = init->recv_cq;
  ex.srq = init->srq;
  ex.cap = init->cap;
  ex.qp_type = init->qp_type;
  ex.sq_sig_all = init->sq_sig_all;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  ibv_qp* qp = softverbs::abi::op_create_qp_ex(pd->context, &ex);
  if (qp != nullptr) init->cap = ex.cap;  // ibv_create_qp(3): the actual capabilities
  return qp;
}

SV_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if (qp == nullptr || attr == nullptr) return EINVAL;
  return Qp::from(qp)->modify(*attr, mask).code();
}

SV_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
  if (qp == nullptr) return EINVAL;
  return Qp::from(qp)->query(attr, mask, init).code();
}

SV_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  if (qp == nullptr) return EINVAL;
  return Qp::from(qp)->destroy().code();
}

SV_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  if (qp == nullptr) return nullptr;
  return Qp::from(qp)->ibv_ex();
}

SV_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return softverbs::abi::unsupported(__func__); }
SV_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return softverbs::abi::unsupported(__func__); }

SV_EXPORT int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, uint32_t flags) {
  // ibv_query_qp_data_in_order(3): 1 when the data of a message is written in
  // order; here every byte of a message lands in order.
  if (qp == nullptr || flags != 0 || op > IBV_WR_ATOMIC_FETCH_AND_ADD) return 0;
  return 1;
}

SV_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp == nullptr) return EINVAL;
  return Qp::from(qp)->attach_mcast(gid, lid).code();
}

SV_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp == nullptr) return EINVAL;
  return Qp::from(qp)->detach_mcast(gid, lid).code();
}
