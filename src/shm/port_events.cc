#include "shm/port_events.h"

#include "util/futex.h"

namespace softverbs::shm {

namespace {
constexpr uint8_t kActive = 4;
}  // namespace

uint64_t port_change_events(const PortSnapshot& was, const PortSnapshot& now, bool client_reregister) {
  uint64_t bits = 0;
  // The order a consumer reads them in: the link first, then addresses.
  if (was.state != kActive && now.state == kActive) bits |= 1ull << IBV_EVENT_PORT_ACTIVE;
  if (was.state == kActive && now.state != kActive) bits |= 1ull << IBV_EVENT_PORT_ERR;
  if (was.lid != now.lid) bits |= 1ull << IBV_EVENT_LID_CHANGE;
  if (was.sm_lid != now.sm_lid) bits |= 1ull << IBV_EVENT_SM_CHANGE;
  // IBA 14.2.5.6 ClientReregister: the SM asks the port's clients to
  // register their subscriptions again (multicast joins, InformInfo).
  if (client_reregister) bits |= 1ull << IBV_EVENT_CLIENT_REREGISTER;
  return bits;
}

void append_port_events(const Segment& seg, uint64_t bits, uint8_t ca) {
  if (bits == 0) return;
  PortEventLog& log = seg.header().port_events;
  uint32_t head = log.head.load(std::memory_order_relaxed);
  // PORT_ACTIVE and PORT_ERR first: a reader learns the link's state before
  // the addresses that came with it.
  constexpr ibv_event_type kOrder[] = {IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE, IBV_EVENT_LID_CHANGE,
                                       IBV_EVENT_SM_CHANGE, IBV_EVENT_PKEY_CHANGE, IBV_EVENT_CLIENT_REREGISTER};
  for (ibv_event_type t : kOrder) {
    if ((bits & (1ull << t)) == 0) continue;
    log.entry[head % kPortEventLog].store((head & 0xffff) << 16 | uint32_t{ca} << 8 | static_cast<uint32_t>(t),
                                          std::memory_order_relaxed);
    ++head;
  }
  log.head.store(head, std::memory_order_release);
  for (uint32_t i = 0; i < kMaxProcesses; ++i) {
    ProcessSlot& p = seg.process(i);
    if (p.state.load(std::memory_order_acquire) != static_cast<uint32_t>(SlotState::kLive)) continue;
    p.doorbell.fetch_add(1, std::memory_order_seq_cst);
    if (p.sleeping.load(std::memory_order_seq_cst) != 0) futex_wake(&p.doorbell, 1);
  }
}

}  // namespace softverbs::shm
