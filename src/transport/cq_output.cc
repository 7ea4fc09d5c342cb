#include "transport/cq_output.h"

#include <infiniband/verbs.h>

#include "shm/rings.h"

namespace softverbs::transport {

bool post_cqe(shm::Segment& seg, uint32_t cq_slot, const shm::Cqe& cqe, Notifier& notifier) {
  if (cq_slot >= shm::kMaxCqs) return false;
  shm::SharedCq& cq = seg.cq(cq_slot);
  if (cq.slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::SlotState::kLive)) return false;
  if (cq.overrun.load(std::memory_order_relaxed) != 0) return false;
  if (shm::cq_push(seg, cq, cqe) == shm::CqPush::kOverrun) {
    notifier.port_counters().cq_overruns.fetch_add(1, std::memory_order_relaxed);
    notifier.cq_event(cq_slot, cq.owner);
    return false;
  }
  // Pairs with the consumer's arm-then-poll: the entry must be visible before
  // we look at the arm, or a consumer arming now could miss both.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Solicited-only arming fires on a solicited entry or on any error (IBA o11-…).
  uint32_t armed = cq.armed.load(std::memory_order_seq_cst);
  if (armed == shm::kCqDisarmed) return true;
  const bool qualifies = armed == shm::kCqArmAny || cqe.solicited != 0 || cqe.status != IBV_WC_SUCCESS;
  if (qualifies && cq.armed.compare_exchange_strong(armed, shm::kCqDisarmed, std::memory_order_seq_cst))
    notifier.cq_event(cq_slot, cq.owner);
  return true;
}

}  // namespace softverbs::transport
