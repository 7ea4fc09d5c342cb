// Paced transmit (issue 20): with SOFTVERBS_LINK_PACING=1 a request leaves
// no faster than the port's width x speed allows (shm/port_link.h), and the
// VLs share the link as the VL arbitration tables say (transport/vl_arbiter.h).
//
// One request (a whole WQE on the host link, the WQE's packets on the UDP
// link) is one turn: its bytes as IBA counts them on the wire
// (request_wire_bytes) reserve a stretch of its VL's lane, at the rate of
// the VL's share, and the requester sleeps until that stretch has passed.
// The lanes live in the segment (shm::PortLink), so every process sending on
// the port takes its turn from the same state, lock-free: a reservation is a
// CAS on the lane's end time, and what a process holds is only a time, which
// passes whether or not it lives.
//
// Off by default: the requester then pays one predictable branch (vl.h).
#pragma once

#include <cstdint>

#include "shm/objects.h"
#include "transport/send_side.h"
#include "transport/wr_opcode_table.h"

namespace softverbs::transport {

// Bytes of the request's packets from `from_psn` on, from the LRH to the
// VCRC (IBA 7.7: LRH 8, BTH 12, the extension headers, payload, ICRC 4,
// VCRC 2); *packets gets how many.
uint64_t request_wire_bytes(const SendSide& s, const SendWqe& w, const WrOpcodeInfo& op, uint32_t from_psn,
                            uint32_t* packets);

// Waits for the turn of `wire_bytes` on `vl`. False: the packet is to be
// discarded (PortXmitDiscards), because no arbitration table gives `vl` a
// weight or it waited past the head-of-queue lifetime (kHeadOfQueueLifeNs).
bool take_turn(shm::SegmentHeader& h, uint8_t vl, uint64_t wire_bytes, uint32_t packets, uint32_t mtu);

// How long a request may wait for a VL that arbitration starves (a low VL
// while VLHighLimit 255 lets high priority send) before it is discarded.
inline constexpr uint64_t kHeadOfQueueLifeNs = 128'000'000;

}  // namespace softverbs::transport
