// Owner side of the bounce path: the service thread carries out the memory
// accesses that peers could do no other way (see peer_memory.h).
#pragma once

#include "shm/segment.h"
#include "util/status.h"

namespace softverbs::fabric::host {

// Gives this process's bounce slots their buffers (once per process slot).
Status prepare_bounce_slots(shm::Segment& seg, shm::OwnerId self);
// Serves every request waiting in this process's bounce slots.
// Returns whether any was served.
bool serve_bounce_requests(shm::Segment& seg, shm::OwnerId self);

}  // namespace softverbs::fabric::host
