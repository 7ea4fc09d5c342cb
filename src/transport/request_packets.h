// The requester's packets on a packet link: a send WQE as the IB request
// packets that carry it (IBA 9.7.1: one per path MTU; a READ or atomic is one
// request; UD one SEND ONLY with a DETH, 9.8.3), each opcode looked up in the
// opcode table (wire/opcode.h) from what the packet is and where it sits.
//
// Datapath: no allocation; the caller owns the buffers.
#pragma once

#include <cstdint>
#include <span>

#include "transport/iov.h"
#include "transport/send_side.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace softverbs::transport {

class RequestPackets {
 public:
  // REQUIRES: the WQE's PSNs are assigned; `local` is its resolved memory
  // and outlives this object; from_psn lies in its PSN range (a resumed READ
  // asks only for the rest; UC always starts over: nothing is resent there).
  RequestPackets(const SendSide& side, const SendWqe& wqe, const IoList& local, uint32_t from_psn);

  bool done() const { return next_ >= count_; }
  // Lays out the next packet in `buf` (wire::kMaxPacketBytes): its bytes,
  // BTH through the ICRC slot, which the link fills in. Empty when done or
  // the packet cannot be built.
  std::span<uint8_t> next(std::span<uint8_t> buf);

 private:
  const SendSide& side_;
  const SendWqe& wqe_;
  const IoList& local_;
  uint32_t next_ = 0;  // packet index within the message
  uint32_t count_ = 0; // packets of the message
  uint32_t mtu_ = 0;
  // The opcodes by position: only, first, middle, last.
  wire::Opcode only_{}, first_{}, middle_{}, last_{};
  wire::TransportHeaders h_;
};

// Long messages ask for an ACK now and then, so the window keeps moving and
// a loss is noticed before the last packet.
inline constexpr uint32_t kAckEvery = 32;

}  // namespace softverbs::transport
