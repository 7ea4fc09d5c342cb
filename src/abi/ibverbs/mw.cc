// Memory windows: the context ops behind verbs.h's inline ibv_alloc_mw,
// ibv_bind_mw and ibv_dealloc_mw.
#include "abi/ibverbs/abi.h"
#include "verbs/mw.h"
#include "verbs/qp.h"

using softverbs::verbs::Mw;
using softverbs::verbs::Pd;
using softverbs::verbs::Qp;

namespace softverbs::abi {

ibv_mw* op_alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (pd == nullptr) return fail<ibv_mw>(EINVAL);
  Result<Mw*> mw = verbs::allocate_mw(Pd::from(pd), type);
  if (!mw.is_ok()) return fail<ibv_mw>(mw.code());
  return &mw.value()->ibv;
}

int op_dealloc_mw(ibv_mw* mw) {
  if (mw == nullptr) return EINVAL;
  return verbs::deallocate_mw(Mw::from(mw)).code();
}

// ibv_bind_mw(3), type 1: a BIND_MW WR on the QP's send queue with the next
// key byte; mw->rkey holds the new R_Key once the WR is posted (the caller
// restores the old one if the completion reports an error).
int op_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  if (qp == nullptr || mw == nullptr || bind == nullptr || qp->context != mw->context) return EINVAL;
  if (bind->bind_info.mr != nullptr && bind->bind_info.mr->pd != qp->pd) return EPERM;
  ibv_send_wr wr{};
  wr.wr_id = bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = bind->bind_info;
  ibv_send_wr* bad = nullptr;
  const int rc = Qp::from(qp)->post_send(&wr, &bad);
  if (rc == 0) mw->rkey = wr.bind_mw.rkey;
  return rc;
}

}  // namespace softverbs::abi
