// The responder's packets on a packet link: the answer to one request packet
// (IBA 9.7.5): ACKNOWLEDGE with an ACK, NAK or RNR NAK, the READ response
// packets (one per path MTU, AETH on the first and last: 9.7.5.1.3) or an
// ATOMIC ACKNOWLEDGE, each opcode looked up in the opcode table. RC only:
// UC and UD answer nothing. The host link reports the same Response to the
// completer directly instead (transport/link.h).
//
// Datapath: no allocation.
#pragma once

#include <cstdint>
#include <span>

#include "shm/segment.h"
#include "transport/notifier.h"
#include "transport/packet_request.h"
#include "transport/request.h"
#include "transport/target_memory.h"
#include "wire/packet.h"

namespace softverbs::transport {

// Where response packets go: each is BTH through the ICRC slot, which the
// sink fills in.
class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void send(std::span<uint8_t> packet) = 0;
};

// `qp` is the responding QP after respond() ran `req` (its expected PSN is
// what a sequence NAK names); `ack_req`: the request's BTH AckReq bit;
// `mtu`: the path MTU in bytes. A READ's data is read from resp.data_va
// through `mem`, the memory respond() ran against.
void answer_request(const shm::SharedQp& qp, const Request& req, const Response& resp, bool ack_req, uint32_t mtu,
                    TargetMemory& mem, PacketSink& sink);

// One request packet for this process's QP `slot`, whole: taken apart
// (request_from_packet), carried out (respond, memory through `mem`) and
// answered through `sink`; counted in the notifier's port counters. `grh`:
// for UD, the 40 bytes the receive buffer starts with, else nullptr. `mtu`:
// the path MTU in bytes (UD: the port's). Every packet link runs this.
PacketVerdict serve_request_packet(shm::Segment& seg, uint32_t slot, const wire::PacketView& packet, uint32_t mtu,
                                   const uint8_t* grh, TargetMemory& mem, Notifier& notifier, PacketSink& sink);

}  // namespace softverbs::transport
