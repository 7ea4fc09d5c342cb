#include "cm/held_disconnect.h"

#include "verbs/cq_counts.h"

namespace softverbs::cm {

using verbs::cq_consumed;
using verbs::cq_produced;

bool hold_disconnect(CmId* id, uint64_t now) {
  ibv_qp* qp = id->pub.qp;
  if (qp == nullptr) return false;
  bool unpolled = false;
  ibv_cq* cqs[2] = {qp->send_cq, qp->recv_cq};
  for (int i = 0; i < 2; ++i) {
    id->held_cq_marks[i] = cqs[i] == nullptr ? 0 : cq_produced(cqs[i]);
    if (cqs[i] != nullptr && cq_consumed(cqs[i]) < id->held_cq_marks[i]) unpolled = true;
  }
  id->disconnect_held_until_ns = unpolled ? now + kHoldLimitNs : 0;
  return unpolled;
}

bool hold_over(const CmId* id, uint64_t now) {
  const ibv_qp* qp = id->pub.qp;
  if (qp == nullptr || now >= id->disconnect_held_until_ns) return true;
  ibv_cq* cqs[2] = {qp->send_cq, qp->recv_cq};
  for (int i = 0; i < 2; ++i) {
    if (cqs[i] != nullptr && cq_consumed(cqs[i]) < id->held_cq_marks[i]) return false;
  }
  return true;
}

}  // namespace softverbs::cm
