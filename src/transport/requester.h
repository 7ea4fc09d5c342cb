// The requester: turns a QP's posted send WQEs into requests on its link, in
// order, honouring fences, the READ/atomic limit (max_rd_atomic), the link's
// window and the completer's retry schedule (IBA 9.7.1, 9.7.2, 10.8.3).
// PSNs are assigned here, once per WQE; a resend keeps them.
#pragma once

#include <cstdint>

#include "transport/send_side.h"

namespace softverbs::transport {

// PSNs a SEND or WRITE of `length` bytes consumes: one per packet of at most
// `mtu` bytes, at least one (IBA 9.7.1).
inline uint32_t message_packets(uint64_t length, uint32_t mtu) {
  const uint64_t n = (length + mtu - 1) / mtu;
  return n == 0 ? 1 : static_cast<uint32_t>(n);
}

// REQUIRES: side.lock held. Sends what may be sent now; UC and UD WQEs
// complete once sent (IBA 9.8, 9.9). Ends with the local ACK timer running
// if requests are in flight.
//
// A paced request whose VL's turn has not come (link_pacing.h): with
// `may_wait` (the application's own thread, posting) the caller sleeps
// until the turn with side.lock released, so that a receive thread can
// still take the QP's answers, then goes on; otherwise progress stops there
// and the QP's timer brings it back. A receive or timer thread must never
// sleep: on RoCE one process's receive thread also forwards the other
// processes' packets (fabric/udp/forwarder.h).
void progress(SendSide& side, bool may_wait = false);

}  // namespace softverbs::transport
