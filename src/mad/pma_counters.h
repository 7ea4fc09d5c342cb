// The PMA's counters, read from what the data path counts in the segment
// (the same sums `softverbs status` shows: the header's totals of gone
// processes, each live process's PortCounters, each live QP's host-fabric
// share) and shown relative to the last reset. The reset point lives in a
// small file beside the segment (<segment>.pma), so a reset is seen by every
// process and the segment layout stays as it is; the data path never
// reads it.
#pragma once

#include "mad/pma.h"
#include "shm/segment.h"

namespace softverbs::mad {

// The counters since the power-on of the segment.
PmaCounters raw_pma_counters(const shm::Segment& seg);
// ... since the last reset.
PmaCounters pma_counters(const shm::Segment& seg);
// Makes `raw` the new zero of the counters named by `mask` (PmaCounter bits).
void reset_pma_counters(const shm::Segment& seg, const PmaCounters& raw, uint64_t mask);

}  // namespace softverbs::mad
