// The PMA's counters, read from what the data path counts in the segment
// (the same sums `softverbs status` shows: the header's totals of gone
// processes, each live process's PortCounters, each live QP's host-fabric
// share) and shown relative to the last reset. The reset point lives in a
// small file beside the segment (<segment>.pma), so a reset is seen by every
// process and the segment layout stays as it is; the data path never
// reads it.
#pragma once

#include <string>

#include "mad/pma.h"
#include "shm/segment.h"

namespace softverbs::mad {

// The counters since the power-on of the segment.
PmaCounters raw_pma_counters(const shm::Segment& seg);
// ... since the last reset.
PmaCounters pma_counters(const shm::Segment& seg);
// Makes `raw` the new zero of the counters named by `mask` (PmaCounter bits).
void reset_pma_counters(const shm::Segment& seg, const PmaCounters& raw, const PmaMask& mask);

// The file that holds the port's reset point.
std::string pma_baseline(const shm::Segment& seg);

// The same over a reset point kept in the file `baseline` (another port's:
// the port facing the device's, mad/subnet_pma.h).
PmaCounters since_reset(const PmaCounters& raw, const std::string& baseline);
void reset_counters(const std::string& baseline, const PmaCounters& raw, const PmaMask& mask);

// The counters of the port at the other end of the device port's link:
// what one sends the other receives, packet for packet and word for word
// (the link itself loses nothing: what the fault injector drops never left
// the sender, what it corrupts is counted where it is received). Nothing
// else crosses that port, so its error counters stay 0.
PmaCounters mirror_pma_counters(const PmaCounters& local);

}  // namespace softverbs::mad
