// The extended posting interface (ibv_wr_start … ibv_wr_complete): function
// pointers in ibv_qp_ex that build WQEs in place (verbs/qp.h).
#include "abi/ibverbs/abi.h"

#include <cstring>

#include "transport/send_queue.h"
#include "verbs/mw.h"
#include "verbs/qp.h"

using softverbs::transport::SendWqe;
using softverbs::verbs::Qp;

namespace softverbs::abi {
namespace {

Qp* of(ibv_qp_ex* q) { return Qp::from(&q->qp_base); }

void remote(SendWqe* w, uint32_t rkey, uint64_t addr) {
  if (w == nullptr) return;
  w->rkey = rkey;
  w->remote_addr = addr;
}

void wr_start(ibv_qp_ex* q) { of(q)->wr_start(); }
int wr_complete(ibv_qp_ex* q) { return of(q)->wr_complete(); }
void wr_abort(ibv_qp_ex* q) { of(q)->wr_abort(); }

void wr_send(ibv_qp_ex* q) { of(q)->wr_begin(IBV_WR_SEND); }
void wr_send_imm(ibv_qp_ex* q, __be32 imm) {
  if (SendWqe* w = of(q)->wr_begin(IBV_WR_SEND_WITH_IMM)) w->imm_data = imm;
}
void wr_send_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  if (SendWqe* w = of(q)->wr_begin(IBV_WR_SEND_WITH_INV)) w->imm_data = invalidate_rkey;
}
void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  SendWqe* w = of(q)->wr_begin(IBV_WR_BIND_MW);
  if (w == nullptr) return;
  if (mw == nullptr || info == nullptr || mw->context != q->qp_base.context) {
    of(q)->wr_fail(EINVAL);
    return;
  }
  verbs::fill_bind(*w, mw, rkey, *info);
}
void wr_local_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  if (SendWqe* w = of(q)->wr_begin(IBV_WR_LOCAL_INV)) w->rkey = invalidate_rkey;
}
void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) { remote(of(q)->wr_begin(IBV_WR_RDMA_WRITE), rkey, addr); }
void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
  SendWqe* w = of(q)->wr_begin(IBV_WR_RDMA_WRITE_WITH_IMM);
  remote(w, rkey, addr);
  if (w != nullptr) w->imm_data = imm;
}
void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) { remote(of(q)->wr_begin(IBV_WR_RDMA_READ), rkey, addr); }
void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  SendWqe* w = of(q)->wr_begin(IBV_WR_ATOMIC_CMP_AND_SWP);
  remote(w, rkey, addr);
  if (w == nullptr) return;
  w->compare_add = compare;
  w->swap = swap;
  w->length = 8;
}
void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
  SendWqe* w = of(q)->wr_begin(IBV_WR_ATOMIC_FETCH_AND_ADD);
  remote(w, rkey, addr);
  if (w == nullptr) return;
  w->compare_add = add;
  w->length = 8;
}
// The eight bytes are copied now (as rdma-core's rxe does): the caller's
// buffer is free once this returns.
void wr_atomic_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, const void* atomic_wr) {
  SendWqe* w = of(q)->wr_begin(IBV_WR_ATOMIC_WRITE);
  remote(w, rkey, addr);
  if (w == nullptr) return;
  if (atomic_wr == nullptr) {
    of(q)->wr_fail(EINVAL);
    return;
  }
  std::memcpy(w->inline_data(), atomic_wr, 8);
  w->inline_len = 8;
  w->num_sge = 0;
  w->send_flags |= IBV_SEND_INLINE;
  w->length = 8;
}
void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_sge sge{addr, length, lkey};
  of(q)->wr_set_sges(&sge, 1);
}
void wr_set_sge_list(ibv_qp_ex* q, size_t n, const ibv_sge* sges) { of(q)->wr_set_sges(sges, n); }
void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
  ibv_data_buf b{addr, length};
  of(q)->wr_set_inline(&b, 1);
}
void wr_set_inline_data_list(ibv_qp_ex* q, size_t n, const ibv_data_buf* bufs) { of(q)->wr_set_inline(bufs, n); }
void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  of(q)->wr_set_ud_addr(ah, remote_qpn, remote_qkey);
}
void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t remote_srqn) { of(q)->wr_set_xrc_srqn(remote_srqn); }

}  // namespace

void fill_qp_ex_ops(ibv_qp_ex* q, uint64_t ops) {
  q->comp_mask = 0;
  q->wr_start = wr_start;
  q->wr_complete = wr_complete;
  q->wr_abort = wr_abort;
  q->wr_set_sge = wr_set_sge;
  q->wr_set_sge_list = wr_set_sge_list;
  q->wr_set_inline_data = wr_set_inline_data;
  q->wr_set_inline_data_list = wr_set_inline_data_list;
  q->wr_set_ud_addr = wr_set_ud_addr;
  q->wr_set_xrc_srqn = wr_set_xrc_srqn;
  if (ops & IBV_QP_EX_WITH_SEND) q->wr_send = wr_send;
  if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM) q->wr_send_imm = wr_send_imm;
  if (ops & IBV_QP_EX_WITH_SEND_WITH_INV) q->wr_send_inv = wr_send_inv;
  if (ops & IBV_QP_EX_WITH_BIND_MW) q->wr_bind_mw = wr_bind_mw;
  if (ops & IBV_QP_EX_WITH_LOCAL_INV) q->wr_local_inv = wr_local_inv;
  if (ops & IBV_QP_EX_WITH_RDMA_WRITE) q->wr_rdma_write = wr_rdma_write;
  if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) q->wr_rdma_write_imm = wr_rdma_write_imm;
  if (ops & IBV_QP_EX_WITH_RDMA_READ) q->wr_rdma_read = wr_rdma_read;
  if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) q->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) q->wr_atomic_fetch_add = wr_atomic_fetch_add;
  if (ops & IBV_QP_EX_WITH_ATOMIC_WRITE) q->wr_atomic_write = wr_atomic_write;
}

}  // namespace softverbs::abi
