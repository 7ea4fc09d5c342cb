// The virtual lane a request leaves on: its SL through the port's
// SLtoVLMappingTable (shm/port_qos.h). The SL is the path's (RC/UC/XRC:
// ah_attr.sl) or the address handle's (UD); on RoCE it never reaches the
// wire, only this lookup. A path's VL is cached in its RequesterState and
// re-read only when the table's generation moved, so a message costs one
// load of a line that SMA Sets alone write.
#pragma once

#include <cstdint>

#include "shm/port_link.h"
#include "shm/port_qos.h"
#include "transport/link_pacing.h"
#include "transport/send_side.h"
#include "transport/wr_opcode_table.h"

namespace softverbs::transport {

[[gnu::noinline]] inline uint8_t refresh_path_vl(SendSide& s, uint32_t generation) {
  const shm::SegmentHeader& h = s.qp.seg->header();
  const uint8_t vl = shm::vl_of_sl(h, s.conn.ah.sl);
  s.requester.path_vl = vl;
  s.requester.path_to_port = vl == shm::kVl15 || shm::load_link(h, {}).paced;
  s.requester.path_vl_generation = generation;
  return vl;
}

// The VL of the QP's path (RC, UC, XRC). REQUIRES: side.lock held.
[[gnu::always_inline]] inline uint8_t path_vl(SendSide& s) {
  const uint32_t generation = s.qp.seg->header().qos.generation.load(std::memory_order_acquire);
  if (generation != s.requester.path_vl_generation) [[unlikely]] return refresh_path_vl(s, generation);
  return s.requester.path_vl;
}

// Whether the path's requests must go through the port's own work
// (port_turn) rather than straight to the link: an SL on VL15, or a paced
// link. REQUIRES: side.lock held.
[[gnu::always_inline]] inline bool path_to_port(SendSide& s) {
  const uint32_t generation = s.qp.seg->header().qos.generation.load(std::memory_order_acquire);
  if (generation != s.requester.path_vl_generation) [[unlikely]] refresh_path_vl(s, generation);
  return s.requester.path_to_port;
}

// The same for a WQE. A UD AH's SL changes with every WQE, so its VL is read
// from the table each time.
[[gnu::always_inline]] inline bool wqe_to_port(SendSide& s, const SendWqe& w) {
  if (s.qp.qp_type == IBV_QPT_UD) {
    const shm::SegmentHeader& h = s.qp.seg->header();
    return shm::vl_of_sl(h, w.ah->sl) == shm::kVl15 || shm::load_link(h, {}).paced;
  }
  return path_to_port(s);
}

// What the port does with a request: kGo, kLater (a paced link: its VL's
// turn has not come; CompleterState::turn_at says when to ask again,
// link_pacing.h) or kDiscard: IBA 7.6.6, a data packet whose SL maps to VL15
// is discarded by the port (PortXmitDiscards), and so is one that
// arbitration never gives a turn; the requester sees a lost packet.
Turn port_turn(SendSide& s, const SendWqe& w, const WrOpcodeInfo& op, uint32_t from_psn);

}  // namespace softverbs::transport
