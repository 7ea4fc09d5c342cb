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
#include "transport/notifier.h"
#include "transport/request.h"
#include "transport/target_memory.h"

namespace softverbs::transport {

// REQUIRES: the caller is the only one running the responder of this QP.
Response respond(shm::Segment& seg, uint32_t qp_slot, const Request& req, TargetMemory& mem, Notifier& notifier);

// QP slot of a QPN, or -1 when no live QP has that number.
int qp_slot_of(const shm::Segment& seg, uint32_t qpn);

}  // namespace softverbs::transport
