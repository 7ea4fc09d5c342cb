// The round trip a packet link measures for one QP, for its tail-loss
// probe (completer.cc): one sample at a time, from the last packet of a
// newly sent request to the first answer at or past its PSN, smoothed as
// TCP smooths its RTT (RFC 6298). Retransmissions are never timed (Karn's
// rule): only a PSN beyond every one already sent starts a sample, and a
// go-back-N abandons the sample running. The host link never calls these,
// so its QPs keep srtt_ns 0 and never probe.
//
// REQUIRES: side.lock held, for every function.
#pragma once

#include <cstdint>

#include "transport/send_side.h"
#include "util/time.h"
#include "wire/psn.h"

namespace softverbs::transport {

// The requests through `last_psn` have just left.
inline void rtt_note_sent(SendSide& s, uint32_t last_psn) {
  RoundTrip& r = s.completer.rtt;
  const uint64_t now = now_ns();
  r.last_sent_ns = now;
  if (r.sent_any && wire::psn_diff(wire::Psn(last_psn), wire::Psn(r.sent_high)) <= 0) return;  // a resend
  r.sent_any = true;
  r.sent_high = last_psn;
  if (r.sample_sent_ns == 0) {
    r.sample_sent_ns = now;
    r.sample_psn = last_psn;
  }
}

// An answer for `psn` (ACK, NAK, READ response, ATOMIC ACKNOWLEDGE) arrived.
inline void rtt_note_answer(SendSide& s, uint32_t psn) {
  RoundTrip& r = s.completer.rtt;
  if (r.sample_sent_ns == 0 || wire::psn_diff(wire::Psn(psn), wire::Psn(r.sample_psn)) < 0) return;
  const uint64_t m = now_ns() - r.sample_sent_ns;
  r.sample_sent_ns = 0;
  const uint32_t sample = static_cast<uint32_t>(m > UINT32_MAX ? UINT32_MAX : m);
  if (r.srtt_ns == 0) {
    r.srtt_ns = sample == 0 ? 1 : sample;
    r.rttvar_ns = sample / 2;
    return;
  }
  const uint32_t err = sample > r.srtt_ns ? sample - r.srtt_ns : r.srtt_ns - sample;
  r.rttvar_ns = r.rttvar_ns - r.rttvar_ns / 4 + err / 4;
  r.srtt_ns = r.srtt_ns - r.srtt_ns / 8 + sample / 8;
  if (r.srtt_ns == 0) r.srtt_ns = 1;
}

// Requests are being sent again: whatever answers them next cannot be told
// from an answer to the first copy.
inline void rtt_abandon_sample(SendSide& s) { s.completer.rtt.sample_sent_ns = 0; }

}  // namespace softverbs::transport
