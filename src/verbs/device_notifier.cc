#include "verbs/device_notifier.h"

#include "util/futex.h"
#include "verbs/cq.h"
#include "verbs/device.h"

namespace softverbs::verbs {

shm::PortCounters& DeviceNotifier::port_counters() { return device_.seg().process(device_.self().slot).port; }

void DeviceNotifier::ring(shm::OwnerId who) {
  shm::ProcessSlot& p = device_.seg().process(who.slot);
  p.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (p.sleeping.load(std::memory_order_seq_cst) != 0) futex_wake(&p.doorbell, 1);
}

void DeviceNotifier::cq_event(uint32_t cq_slot, shm::OwnerId owner) {
  if (owner == device_.self()) {
    // Our own CQ: deliver now. Whoever posts to a CQ holds a QP that uses it,
    // so the CQ cannot be destroyed under us.
    if (Cq* cq = device_.cq_at(cq_slot)) cq->deliver_event();
    return;
  }
  device_.seg().process(owner.slot).cq_event_bits[cq_slot / 64].fetch_or(1ull << (cq_slot % 64),
                                                                          std::memory_order_release);
  ring(owner);
}

void DeviceNotifier::qp_event(uint32_t qp_slot, shm::OwnerId owner, uint64_t bits) {
  // Always through the owner's service thread, even for our own QPs: the
  // caller may hold another QP's lock, and flushing needs this QP's.
  shm::Segment& seg = device_.seg();
  seg.qp(qp_slot).pending_async.fetch_or(bits, std::memory_order_release);
  seg.process(owner.slot).qp_event_bits[qp_slot / 64].fetch_or(1ull << (qp_slot % 64), std::memory_order_release);
  ring(owner);
}

void DeviceNotifier::srq_event(uint32_t srq_slot, shm::OwnerId owner) {
  device_.seg().process(owner.slot).srq_event_bits[srq_slot / 64].fetch_or(1ull << (srq_slot % 64),
                                                                            std::memory_order_release);
  ring(owner);
}

bool DeviceNotifier::drain() {
  shm::Segment& seg = device_.seg();
  shm::ProcessSlot& proc = seg.process(device_.self().slot);
  bool any = device_.deliver_port_events();
  for (uint32_t w = 0; w < shm::kMaxCqs / 64; ++w) {
    if (proc.cq_event_bits[w].load(std::memory_order_relaxed) == 0) continue;
    device_.deliver_cq_events(w * 64, proc.cq_event_bits[w].exchange(0, std::memory_order_acquire));
    any = true;
  }
  for (uint32_t w = 0; w < shm::kMaxSrqs / 64; ++w) {
    if (proc.srq_event_bits[w].load(std::memory_order_relaxed) == 0) continue;
    uint64_t bits = proc.srq_event_bits[w].exchange(0, std::memory_order_acquire);
    for (; bits != 0; bits &= bits - 1) device_.deliver_srq_event(w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits)));
    any = true;
  }
  for (uint32_t w = 0; w < shm::kMaxQpSlots / 64; ++w) {
    if (proc.qp_event_bits[w].load(std::memory_order_relaxed) == 0) continue;
    uint64_t bits = proc.qp_event_bits[w].exchange(0, std::memory_order_acquire);
    for (; bits != 0; bits &= bits - 1) {
      const uint32_t slot = w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
      // The QP was published (release) before any peer could raise its
      // events; acquire it, so its initialization happens-before (TSan sees
      // only this process's half of that ordering).
      (void)seg.qp(slot).slot_state.load(std::memory_order_acquire);
      device_.deliver_qp_event(slot, seg.qp(slot).pending_async.exchange(0, std::memory_order_acq_rel));
      any = true;
    }
  }
  return any;
}

}  // namespace softverbs::verbs
