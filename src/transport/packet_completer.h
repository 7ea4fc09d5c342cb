// The completer of a packet fabric (RoCEv2/UDP): requests are in flight while
// more are sent, and answers arrive as packets — coalesced ACKs, NAKs, READ
// response packets, atomic ACKs (IBA 9.7.5: requester side).
//
// Each function REQUIRES side.lock held, updates the send queue (completions
// in posting order, go-back-N from the PSN a NAK or timeout names), and ends
// by letting the requester send what the window now allows.
#pragma once

#include <cstdint>
#include <span>

#include "transport/send_side.h"
#include "wire/aeth.h"

namespace softverbs::transport {

// ACKNOWLEDGE: an ACK, RNR NAK or NAK for `psn`.
void on_acknowledge(SendSide& side, uint32_t psn, const wire::Aeth& aeth);

// One RDMA READ response packet. `first`/`last` from its opcode; `aeth` only
// on first, last and only responses.
void on_read_response(SendSide& side, uint32_t psn, bool first, bool last, std::span<const uint8_t> payload);

// ATOMIC ACKNOWLEDGE: the original value at the target.
void on_atomic_acknowledge(SendSide& side, uint32_t psn, const wire::Aeth& aeth, uint64_t original);

// The local ACK timer (side.ack_deadline) expired: resend from the oldest
// unacknowledged PSN, or fail the oldest WQE with RETRY_EXC_ERR.
void on_packet_timeout(SendSide& side);

// Arms the local ACK timer if requests are in flight and none runs.
void start_ack_timer(SendSide& side);

// Number of READ and atomic requests sent and not yet answered.
uint32_t reads_in_flight(const SendSide& side);

}  // namespace softverbs::transport
