// IBA 7.6.9 VL arbitration as a share of the link: which fraction of the
// port's data rate a VL gets while the VLs in `active` have something to
// send. Paced transmit (transport/link_pacing.h) gives each VL its share as
// a rate, so over any stretch in which the same VLs stay busy the bytes they
// send divide as the spec's weighted round robin divides them; it does not
// interleave single packets.
//
// - The high- and low-priority lists are weighted round robins: a VL's
//   weight is the sum of its entries' weights (64-byte units); a VL with a
//   weight in both lists counts as high priority.
// - While both lists have a busy VL, high priority sends up to VLHighLimit x
//   4 KiB (at least one packet) and then low priority one packet: high gets
//   H / (H + P) of the link, low P / (H + P), P being one packet. 255 is
//   unlimited: low priority waits until high priority is idle.
// - A VL in neither list never gets to send (share 0).
#pragma once

#include <cstdint>

#include "shm/port_qos.h"

namespace softverbs::transport {

struct VlWeights {
  uint32_t high[shm::kVls] = {};
  uint32_t low[shm::kVls] = {};  // 0 where `high` is nonzero
};
VlWeights vl_weights(const shm::QosTables& t);

// The fraction (0..1) of the link `vl` may use; `active` has bit v set for
// every VL with traffic waiting or under way, `vl`'s own included; `packet`
// is the bytes of one packet on the wire (an MTU and its headers).
double arbitration_share(const shm::QosTables& t, const VlWeights& w, uint32_t active, uint8_t vl, uint32_t packet);

}  // namespace softverbs::transport
