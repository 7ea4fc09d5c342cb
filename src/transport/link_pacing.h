// Paced transmit (issue 20): with SOFTVERBS_LINK_PACING=1 a request leaves
// no faster than the port's width x speed allows (shm/port_link.h), and the
// VLs share the link as the VL arbitration tables say (transport/vl_arbiter.h).
//
// One request (a whole WQE on the host link, the WQE's packets on the UDP
// link) is one turn: once its VL's lane is free (the lane's last stretch has
// passed), its bytes as IBA counts them on the wire (request_wire_bytes) and
// those of its answers (response_wire_bytes: READ data, ACKs) reserve the
// next stretch of the lane, at the rate of the VL's share, and
// leave. Until the lane is free the requester does not wait: it stops there
// and its QP's timer (CompleterState::turn_at) brings it back when the lane
// frees, or whoever drives the QP first (a post, a poll, an ACK) does. No
// thread ever sleeps for a turn, so a receive thread that takes an ACK and
// sends the next request never holds up the packets it receives (and
// forwards) for other QPs and processes: on RoCE one process receives for
// every process of the address (fabric/udp/forwarder.h).
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

// What the port does with a request now (vl.h, port_turn).
enum class Turn : uint8_t { kGo, kLater, kDiscard };

// Bytes of the request's packets from `from_psn` on, from the LRH to the
// VCRC (IBA 7.7: LRH 8, BTH 12, the extension headers, payload, ICRC 4,
// VCRC 2); *packets gets how many.
uint64_t request_wire_bytes(const SendSide& s, const SendWqe& w, const WrOpcodeInfo& op, uint32_t from_psn,
                            uint32_t* packets);

// Bytes of the responder's answers to the request from `from_psn` on, the
// same way: a READ's READ RESPONSE packets with their data, an atomic's
// ATOMIC ACKNOWLEDGE, one ACKNOWLEDGE for a SEND or WRITE (RC and XRC; UC
// and UD answer nothing); *packets gets how many. The requester's turn
// reserves them with the request (port_turn): the answers take the link's
// time on the request's VL (the QP's SL through the port's SL2VL table).
uint64_t response_wire_bytes(const SendSide& s, const SendWqe& w, const WrOpcodeInfo& op, uint32_t from_psn,
                             uint32_t* packets);

// The turn of `wire_bytes` on `vl`, now. kGo: the stretch is reserved, the
// request leaves. kLater: ask again at *retry_at (the lane's stretch ends
// then, or the VL has no share now); *waiting_since (0 on the first ask)
// keeps when the request began to wait without a share. kDiscard: the packet is to be
// discarded (PortXmitDiscards), because no arbitration table gives `vl` a
// weight or it waited past the head-of-queue lifetime (kHeadOfQueueLifeNs).
Turn try_turn(shm::SegmentHeader& h, uint8_t vl, uint64_t wire_bytes, uint32_t packets, uint32_t mtu,
              uint64_t* waiting_since, uint64_t* retry_at);

// try_turn until it is kGo, sleeping between, then until the stretch has
// passed (for tests and tools; the requester never sleeps). False: discard.
bool take_turn(shm::SegmentHeader& h, uint8_t vl, uint64_t wire_bytes, uint32_t packets, uint32_t mtu);

// Sleeps until CLOCK_MONOTONIC time `t` (ns, util/time.h's now_ns clock).
void sleep_until(uint64_t t);

// How long a request may wait for a VL that arbitration starves (a low VL
// while VLHighLimit 255 lets high priority send) before it is discarded.
inline constexpr uint64_t kHeadOfQueueLifeNs = 128'000'000;

}  // namespace softverbs::transport
