// The one way a completion enters a CQ, for every role: push, overrun
// handling, and the completion event if the CQ is armed for it (IBA 11.4.2.2).
#pragma once

#include <cstdint>

#include "shm/segment.h"
#include "transport/notifier.h"

namespace softverbs::transport {

// Returns false if the CQ is gone or overran (the entry is lost; the owner
// gets IBV_EVENT_CQ_ERR).
bool post_cqe(shm::Segment& seg, uint32_t cq_slot, const shm::Cqe& cqe, Notifier& notifier);

}  // namespace softverbs::transport
