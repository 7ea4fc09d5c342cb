// The virtual lane a request leaves on: its SL through the port's
// SLtoVLMappingTable (shm/port_qos.h). The SL is the path's (RC/UC/XRC:
// ah_attr.sl) or the address handle's (UD); on RoCE it never reaches the
// wire, only this lookup. Cached per QP and re-read only when the table's
// generation moved, so a message costs one load of a line that SMA Sets
// alone write.
#pragma once

#include <cstdint>

#include "shm/port_qos.h"
#include "transport/send_side.h"

namespace softverbs::transport {

[[gnu::always_inline]] inline uint8_t vl_of(SendSide& s, uint8_t sl) {
  VlCache& c = s.conn.vl_cache;
  const shm::SegmentHeader& h = s.qp.seg->header();
  const uint32_t generation = h.qos.generation.load(std::memory_order_acquire);
  if (generation != c.generation || sl != c.sl) [[unlikely]] {
    c.generation = generation;
    c.sl = sl;
    c.vl = shm::vl_of_sl(h, sl);
  }
  return c.vl;
}

// IBA 7.6.6: a data packet whose SL maps to VL15 is discarded by the port
// (PortXmitDiscards); the requester sees a lost packet.
[[gnu::always_inline]] inline bool discarded_on_vl15(SendSide& s, uint8_t sl) {
  return vl_of(s, sl) == shm::kVl15;
}

}  // namespace softverbs::transport
