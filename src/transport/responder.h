// The responder: checks and carries out one request packet against a target
// QP, for every fabric. IBA 9.7 (responder), 9.9.3 (its errors).
//
// Runs wherever the fabric runs it (objects.h invariant 3): on the host fabric
// inside the requester's process, on the UDP fabric in the owner's. Memory is
// reached through the TargetMemory the fabric passes; completions go out
// through cq_output; the owner learns of QP errors through the Notifier.
#pragma once

#include <cstdint>

#include "shm/segment.h"
#include "transport/mem_ops.h"
#include "transport/notifier.h"
#include "transport/request.h"
#include "transport/target_memory.h"

namespace softverbs::transport {

// REQUIRES: the caller is the only one running the responder of this QP.
Response respond(shm::Segment& seg, uint32_t qp_slot, const Request& req, TargetMemory& mem, Notifier& notifier);

// QP slot of a QPN, or -1 when no live QP has that number. Inline: every
// transmit and every polled receive asks.
inline int qp_slot_of(const shm::Segment& seg, uint32_t qpn) {
  const uint32_t slot = qpn & (shm::kMaxQpSlots - 1);
  if (slot < 2) return -1;
  const shm::SharedQp& qp = seg.qp(slot);
  if (qp.slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::SlotState::kLive) || qp.qpn != qpn)
    return -1;
  return static_cast<int>(slot);
}

}  // namespace softverbs::transport
