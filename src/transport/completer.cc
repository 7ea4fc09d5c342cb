#include "transport/completer.h"
#include "transport/qp_types.h"

#include <algorithm>

#include "shm/qp_pkeys.h"
#include "shm/rings.h"
#include "transport/cq_output.h"
#include "transport/local_sges.h"
#include "transport/nak_table.h"
#include "transport/requester.h"
#include "transport/round_trip.h"
#include "transport/wr_opcode_table.h"
#include "util/log.h"
#include "util/time.h"
#include "wire/psn.h"

namespace softverbs::transport {
namespace {

using wire::Psn;
using wire::psn_diff;

// Index of the sent WQE whose PSN range holds `psn`, or ~0.
uint64_t wqe_of(const SendSide& s, uint32_t psn) {
  for (uint64_t i = s.sq.done; i < s.sq.next; ++i) {
    const SendWqe& w = s.sq.at(i);
    const int32_t d = psn_diff(Psn(psn), Psn(w.psn));
    if (d >= 0 && static_cast<uint32_t>(d) < w.packets) return i;
  }
  return ~0ull;
}

void schedule(SendSide& s, uint64_t deadline) {
  CompleterState& c = s.completer;
  if (c.timer_at == 0 || deadline < c.timer_at) {
    c.timer_at = deadline;
    s.qp.timers->arm(s, deadline);
  }
}

// Sends again from WQE `index`, PSN `psn` inside it; what it had received of
// READ responses before `psn` stays. Not counted: a probe uses it too.
void resend_from(SendSide& s, uint64_t index, uint32_t psn) {
  for (uint64_t i = index; i < s.sq.next; ++i) {
    SendWqe& w = s.sq.at(i);
    if (i == index && reads_remote(w.opcode)) {
      const int32_t d = psn_diff(Psn(psn), Psn(w.psn));
      w.responses = static_cast<uint32_t>(std::max(0, d));
    } else if (i != index) {
      w.responses = 0;
    }
  }
  s.sq.next = index;
  s.requester.resume_index = index;
  s.requester.resume_psn = psn;
  rtt_abandon_sample(s);
}

// Go-back-N (IBA 9.7.5.2.1): a retry from WQE `index`, PSN `psn`.
void go_back(SendSide& s, uint64_t index, uint32_t psn) {
  resend_from(s, index, psn);
  s.qp.shared->counters.retries.fetch_add(1, std::memory_order_relaxed);
}

// The first PSN the oldest outstanding request still lacks an answer for.
uint32_t oldest_unanswered_psn(const SendSide& s) {
  const SendWqe& w = s.sq.at(s.sq.done);
  return wire::psn_add(Psn(w.psn), reads_remote(w.opcode) ? w.responses : 0).value();
}

// IBA C9-140: retry_cnt retries, then the WQE fails. Whether one was left.
bool spend_retry(SendSide& s, uint64_t index) {
  if (s.completer.retries_left == 0) {
    s.qp.shared->counters.retry_exceeded.fetch_add(1, std::memory_order_relaxed);
    complete_in_error(s, index, IBV_WC_RETRY_EXC_ERR);
    return false;
  }
  --s.completer.retries_left;
  return true;
}

// Completes, in order, every WQE that `psn` acknowledges (IBA 9.7.5.1.1: an
// ACK covers every earlier request). A READ or atomic the ACK passes without
// its response having arrived lost that response: it is asked again
// (9.7.5.1.4, an implied NAK). Returns false when that happened.
[[gnu::always_inline]] inline bool complete_through(SendSide& s, uint32_t psn) {
  while (s.sq.done != s.sq.next) {
    SendWqe& w = s.sq.at(s.sq.done);
    if (reads_remote(w.opcode)) {
      if (w.responses == w.packets) {
        complete_success(s, s.sq.done);
        continue;
      }
      if (psn_diff(Psn(psn), Psn(w.psn)) >= 0) {
        go_back(s, s.sq.done, wire::psn_add(Psn(w.psn), w.responses).value());
        return false;
      }
      return true;
    }
    const uint32_t last = wire::psn_add(Psn(w.psn), w.packets - 1).value();
    if (psn_diff(Psn(psn), Psn(last)) < 0) return true;
    complete_success(s, s.sq.done);
  }
  return true;
}

void on_rnr_nak(SendSide& s, uint64_t index, uint32_t psn, uint8_t rnr_timer) {
  s.qp.shared->counters.rnr_naks_received.fetch_add(1, std::memory_order_relaxed);
  CompleterState& c = s.completer;
  // IBA 9.7.5.2.8 / C9-153: rnr_retry 7 retries forever.
  if (s.conn.rnr_retry != 7) {
    if (c.rnr_left == 0) {
      s.qp.shared->counters.rnr_retry_exceeded.fetch_add(1, std::memory_order_relaxed);
      complete_in_error(s, index, IBV_WC_RNR_RETRY_EXC_ERR);
      return;
    }
    --c.rnr_left;
  }
  go_back(s, index, psn);
  c.probe_at = 0;
  // Nothing is sent before the delay is over; nothing after `index` is out.
  c.deadline = now_ns() + std::max<uint64_t>(1, rnr_timer_ns(rnr_timer));
  c.rnr_wait = true;
  schedule(s, c.deadline);
}

// The ACK timer of the oldest request expired: resend from what it lacks.
void on_ack_timeout(SendSide& s) {
  s.completer.deadline = 0;
  s.completer.probe_at = 0;
  if (s.sq.done == s.sq.next) return;
  s.qp.shared->counters.ack_timeouts.fetch_add(1, std::memory_order_relaxed);
  // Rare and costly (a whole timeout of waiting): worth a line at info.
  SV_LOG(kInfo, "QP %#x: local ACK timeout at PSN %#x, %u retries left", s.qp.qpn, s.sq.at(s.sq.done).psn,
         s.completer.retries_left);
  if (!spend_retry(s, s.sq.done)) return;
  go_back(s, s.sq.done, oldest_unanswered_psn(s));
}

// Tail-loss probe (packet links). When the last packets of a burst, or
// their ACK, are lost, no later packet draws a sequence NAK (IBA 9.7.5.2.1)
// and only the local ACK timer would recover them. A probe time after the
// last progress or send — a few measured round trips, well inside that
// timer — the requester sends again, at most kMaxProbes times per arming:
//   1. the last packet sent: the responder takes it if it is the one
//      missing, re-ACKs it as a duplicate if only the ACK was lost (IBA
//      9.7.5.1.5), or answers a sequence NAK if earlier packets are
//      missing, which starts go-back-N (it sends one NAK per gap, so a lost
//      NAK leaves this probe unanswered);
//   2. twice the probe time later, go-back-N from the oldest unanswered
//      PSN, as the timer would.
// A probe is not a retry (IBA C9-140): it spends no retry_cnt and leaves the
// ACK timer's deadline as it is, so a dead peer still fails the WQE after
// retry_cnt timeouts.
constexpr uint8_t kMaxProbes = 2;
constexpr uint64_t kProbeFloorNs = 1'000'000;

// The probe time from the QP's round trip; 0: no probe (never measured, or
// too close to the ACK timer to be worth one).
uint64_t probe_time_ns(const SendSide& s) {
  const RoundTrip& r = s.completer.rtt;
  if (r.srtt_ns == 0) return 0;
  const uint64_t t = std::max<uint64_t>({2ull * r.srtt_ns, uint64_t{r.srtt_ns} + 4ull * r.rttvar_ns, kProbeFloorNs});
  const uint64_t ack = local_ack_timeout_ns(s.conn.timeout);
  return ack != kForever && 4 * t > ack ? 0 : t;
}

void send_probe(SendSide& s) {
  CompleterState& c = s.completer;
  s.qp.shared->counters.tail_probes.fetch_add(1, std::memory_order_relaxed);
  SV_LOG(kInfo, "QP %#x: tail-loss probe %u (srtt %u us)", s.qp.qpn, c.probes + 1u, c.rtt.srtt_ns / 1000);
  if (c.probes++ == 0) {
    const uint64_t index = s.sq.next - 1;
    const SendWqe& w = s.sq.at(index);
    // A READ or atomic asks again for what it lacks.
    const uint32_t from = reads_remote(w.opcode) ? w.responses : w.packets - 1;
    if (from < w.packets) return resend_from(s, index, wire::psn_add(Psn(w.psn), from).value());
  }
  resend_from(s, s.sq.done, oldest_unanswered_psn(s));
}

// The probe time came: sends one, unless requests left since (its time
// counts from the last send) or none may be sent any more.
void on_probe_time(SendSide& s, uint64_t now) {
  CompleterState& c = s.completer;
  const uint64_t t = probe_time_ns(s);
  if (t == 0 || s.sq.done == s.sq.next || c.rnr_wait) {
    c.probe_at = 0;
    return;
  }
  if (c.rtt.last_sent_ns + t > now) {
    c.probe_at = c.rtt.last_sent_ns + t;
    return;
  }
  send_probe(s);
  // Backing off: an answer slower than the round trip's spread (a receiver
  // descheduled on a loaded host) is likelier than a lost probe, and the
  // second probe resends everything outstanding.
  c.probe_at = c.probes < kMaxProbes ? now + (t << c.probes) : 0;
}

constexpr uint64_t kStray = ~0ull;     // answers nothing outstanding: dropped
constexpr uint64_t kWentBack = ~1ull;  // an earlier READ or atomic lost its response: asked again

// The WQE `psn` answers, if it is a READ or atomic still waiting for that
// answer, once the response has acknowledged everything before it.
uint64_t awaiting_response(SendSide& s, uint32_t psn, bool atomic) {
  const uint64_t index = wqe_of(s, psn);
  if (index == ~0ull) return kStray;  // a duplicate or stray response
  const SendWqe& w = s.sq.at(index);
  const WrOpcodeInfo* op = wr_opcode(w.opcode);
  if (op == nullptr) return kStray;
  const bool is_atomic = op->kind == ReqKind::kCmpSwap || op->kind == ReqKind::kFetchAdd;
  // ATOMIC WRITE is answered by a READ response (IBA 1.5), with no data.
  const bool is_read = op->kind == ReqKind::kRead || op->kind == ReqKind::kAtomicWrite;
  if (atomic ? !is_atomic : !is_read) return kStray;
  // Responses come in order; one not the next expected is dropped and the
  // request repeated when the timer or a later response shows the gap.
  if (psn_diff(Psn(psn), Psn(w.psn)) != static_cast<int32_t>(w.responses)) return kStray;
  // The response also acknowledges every request before it.
  if (!complete_through(s, wire::psn_add(Psn(w.psn), -1).value())) return kWentBack;
  return index;
}

// The WQE's local memory, for a response's data; on a bad L_Key the WQE fails.
bool resolve_for_response(SendSide& s, uint64_t index, iovec* iov, IoList* list) {
  const ibv_wc_status st = resolve_local_sges(s, s.sq.at(index), true, iov, list);
  if (st == IBV_WC_SUCCESS) return true;
  complete_in_error(s, index, st);
  return false;
}

// The zero-length READ RESPONSE ONLY that answers an ATOMIC WRITE; any other
// shape is malformed and dropped, like a corrupt packet.
void on_atomic_write_response(SendSide& s, uint64_t index, bool only, uint64_t payload_bytes) {
  if (!only || payload_bytes != 0) return;
  SendWqe& w = s.sq.at(index);
  w.responses = 1;
  complete_through(s, w.psn);
  restart_ack_timer(s);
}

// SQD with en_sqd_async_notify: the owner hears when the last request is
// answered (IBA 11.3.3.3); a synchronous link is drained at once (verbs::Qp).
void note_drained(SendSide& s) {
  if (!s.completer.notify_drained || s.sq.done != s.sq.next) return;
  s.completer.notify_drained = false;
  s.qp.notifier->qp_event(s.qp.qp_slot, s.qp.self, 1ull << IBV_EVENT_SQ_DRAINED);
}

}  // namespace

uint32_t reads_in_flight(const SendSide& s) {
  uint32_t n = 0;
  for (uint64_t i = s.sq.done; i < s.sq.next; ++i) {
    const SendWqe& w = s.sq.at(i);
    if (reads_remote(w.opcode) && w.responses != w.packets) ++n;
  }
  return n;
}

// A probe pays on a burst, whose lost tail only the ACK timer would
// otherwise recover. A message of a few packets at a time keeps the ACK
// timer alone, as on hardware: arming a probe for each would wake the
// service thread once per message whenever messages are further apart than
// the probe time.
namespace {
constexpr uint32_t kMinProbePackets = 4;
bool worth_a_probe(const SendSide& s) {
  const SendWqe& oldest = s.sq.at(s.sq.done);
  return oldest.packets >= kMinProbePackets ||
         psn_diff(Psn(s.requester.next_psn), Psn(oldest.psn)) >= static_cast<int32_t>(kMinProbePackets);
}
}  // namespace

void arm_ack_timer(SendSide& s) {
  CompleterState& c = s.completer;
  const uint64_t t = local_ack_timeout_ns(s.conn.timeout);
  if (t == kForever) return;  // timeout 0: wait forever
  const uint64_t now = now_ns();
  c.deadline = now + t;
  c.probes = 0;
  c.probe_at = 0;
  if (c.rtt.srtt_ns != 0 && s.sq.done != s.sq.next && worth_a_probe(s)) [[unlikely]] {  // a packet link's burst
    const uint64_t p = probe_time_ns(s);
    if (p != 0) {
      c.probe_at = now + p;
      schedule(s, c.probe_at);
      return;
    }
  }
  schedule(s, c.deadline);
}

void flush_send_queue(SendSide& s) {
  while (s.sq.done != s.sq.posted) {
    post_send_cqe(s, s.sq.at(s.sq.done), IBV_WC_WR_FLUSH_ERR);
    ++s.sq.done;
  }
  s.sq.next = s.sq.done;
  s.completer.deadline = 0;
  s.completer.probe_at = 0;
  s.completer.rnr_wait = false;
  s.completer.notify_drained = false;
  s.requester.resume_index = ~0ull;
}

void flush_recv_queue(shm::Segment& seg, uint32_t qp_slot, Notifier& notifier) {
  shm::SharedQp& qp = seg.qp(qp_slot);
  if (qp.srq != 0) {
    // The SRQ's WQEs are the SRQ's, not this QP's: none is flushed. IBA
    // 11.6.3 / ibv_get_async_event(3): an RC QP on an SRQ that went to
    // Error reports Last WQE Reached (it takes no more WQEs); the owner
    // reports it once per entry into Error (verbs::Qp::on_remote_event).
    if (reliable_qp(qp.qp_type)) notifier.qp_event(qp_slot, qp.owner, 1ull << IBV_EVENT_QP_LAST_WQE_REACHED);
    return;
  }
  if (qp.rq.ring == 0) return;
  uint64_t wr_id = 0;
  uint32_t n = 0;
  uint64_t index = 0;
  shm::Sge sge[shm::kMaxSge];
  while (shm::rq_take(seg, qp.rq, &wr_id, sge, &n, &index)) {
    shm::Cqe cqe{};
    cqe.wr_id = wr_id;
    cqe.status = IBV_WC_WR_FLUSH_ERR;
    cqe.opcode = IBV_WC_RECV;
    cqe.qp_num = qp.qpn;
    cqe.sq_index = shm::Cqe::kRecv;
    cqe.rq_index = index;
    post_cqe(seg, qp.recv_cq, cqe, notifier);
  }
}

void complete_in_error(SendSide& s, uint64_t index, ibv_wc_status status) {
  SV_LOG(kDebug, "QP %#x: WQE %llu fails: ibv_wc_status %d", s.qp.qpn, static_cast<unsigned long long>(index),
         static_cast<int>(status));
  s.sq.done = index;
  post_send_cqe(s, s.sq.at(index), status);
  ++s.sq.done;
  s.qp.shared->state.store(IBV_QPS_ERR, std::memory_order_release);
  flush_send_queue(s);
  flush_recv_queue(*s.qp.seg, s.qp.qp_slot, *s.qp.notifier);
}

void acknowledge(SendSide& s, uint32_t psn, const wire::Aeth& aeth) {
  if (s.sq.done == s.sq.next) return;  // nothing in flight: a stale answer
  // An answer older than everything outstanding repeats one already handled.
  if (psn_diff(Psn(psn), Psn(s.sq.at(s.sq.done).psn)) < -1) return;
  switch (aeth.type()) {
    case wire::AethType::kAck:
      complete_through(s, psn);
      return restart_ack_timer(s);
    case wire::AethType::kRnrNak:
    case wire::AethType::kNak: {
      // A NAK acknowledges every request before the one it names.
      if (!complete_through(s, wire::psn_add(Psn(psn), -1).value())) return restart_ack_timer(s);
      const uint64_t index = wqe_of(s, psn);
      if (index == ~0ull) return;
      if (aeth.type() == wire::AethType::kRnrNak) return on_rnr_nak(s, index, psn, aeth.rnr_timer());
      if (aeth.nak_code() == wire::NakCode::kPsnSequenceError) {
        // IBA 9.7.5.2.1: resend from the PSN the responder expects.
        if (!spend_retry(s, index)) return;
        s.qp.shared->counters.sequence_naks_received.fetch_add(1, std::memory_order_relaxed);
        go_back(s, index, psn);
        return restart_ack_timer(s);
      }
      s.qp.shared->counters.remote_errors.fetch_add(1, std::memory_order_relaxed);
      return complete_in_error(s, index, requester_status(aeth.nak_code()));
    }
    case wire::AethType::kReserved:
      return;  // IBA 9.3.5: a reserved syndrome is discarded
  }
}

void on_read_response(SendSide& s, uint32_t psn, bool first, bool last, std::span<const uint8_t> payload) {
  const uint64_t index = awaiting_response(s, psn, false);
  if (index == kStray) return;
  if (index == kWentBack) return restart_ack_timer(s);
  SendWqe& w = s.sq.at(index);
  if (w.opcode == IBV_WR_ATOMIC_WRITE) return on_atomic_write_response(s, index, first && last, payload.size());
  const uint64_t mtu = s.conn.mtu;
  const uint64_t offset = static_cast<uint64_t>(w.responses) * mtu;
  const bool expect_last = w.responses + 1 == w.packets;
  const uint64_t expect_len = expect_last ? w.length - offset : mtu;
  // A response of the wrong shape is malformed: dropped, like a corrupt one.
  if (payload.size() != expect_len || last != expect_last || (first != (w.responses == 0) && !first)) return;
  iovec iov[shm::kMaxSge];
  IoList list;
  if (!resolve_for_response(s, index, iov, &list)) return;
  IoCursor c(list, offset);
  scatter_from(c, payload.data(), std::min<uint64_t>(payload.size(), list.bytes > offset ? list.bytes - offset : 0));
  ++w.responses;
  // Forward progress reloads the retry count: a long READ over a lossy link
  // resumes as often as it needs while each try brings data.
  s.completer.retries_left = s.conn.retry_cnt;
  if (last) complete_through(s, wire::psn_add(Psn(w.psn), w.packets - 1).value());
  restart_ack_timer(s);
}

void on_read_placed(SendSide& s, uint32_t psn) {
  // The host link's READ: the one request outstanding, answered whole.
  if (s.sq.next - s.sq.done == 1 && s.sq.at(s.sq.done).psn == psn && s.sq.at(s.sq.done).opcode == IBV_WR_RDMA_READ) {
    SendWqe& w = s.sq.at(s.sq.done);
    w.responses = w.packets;
    return retire_oldest(s);
  }
  const uint64_t index = awaiting_response(s, psn, false);
  if (index == kStray) return;
  if (index == kWentBack) return restart_ack_timer(s);
  SendWqe& w = s.sq.at(index);
  w.responses = w.packets;
  complete_through(s, wire::psn_add(Psn(w.psn), w.packets - 1).value());
  restart_ack_timer(s);
}

void on_atomic_acknowledge(SendSide& s, uint32_t psn, const wire::Aeth& aeth, uint64_t original) {
  if (aeth.type() != wire::AethType::kAck) return acknowledge(s, psn, aeth);
  const uint64_t index = awaiting_response(s, psn, true);
  if (index == kStray) return;
  if (index == kWentBack) return restart_ack_timer(s);
  iovec iov[shm::kMaxSge];
  IoList list;
  if (!resolve_for_response(s, index, iov, &list)) return;
  IoCursor c(list);
  scatter_from(c, &original, std::min<uint64_t>(8, list.bytes));
  s.sq.at(index).responses = 1;
  complete_through(s, psn);
  restart_ack_timer(s);
}

void on_response_packet(SendSide& s, const wire::PacketView& v) {
  // IBA 9.6.1.1: a response's P_Key is checked as a request's; one that does
  // not match the QP's is dropped and counted, and the ACK timer decides
  // what follows (a table change can leave answers in flight on either side).
  const uint16_t pkey = v.bth().pkey;
  if (pkey != shm::qp_pkey_fast(*s.qp.shared) && !shm::pkeys_match(pkey, shm::qp_pkey(*s.qp.shared))) [[unlikely]] {
    shm::count_pkey_violation(s.qp.seg->header());
    return;
  }
  const uint32_t psn = v.bth().psn.value();
  const wire::OpcodeInfo& info = v.info();
  if (info.any(wire::OpFlag::kAck)) {
    if (info.any(wire::OpFlag::kAtomic))
      on_atomic_acknowledge(s, psn, v.aeth(), v.atomic_ack_eth().orig);
    else
      on_acknowledge(s, psn, v.aeth());
    return note_drained(s);
  }
  if (!info.any(wire::OpFlag::kRead)) return;
  // A READ response may carry a NAK in its AETH only as an ACKNOWLEDGE
  // packet; one here with a non-ACK syndrome is discarded.
  if (v.has(wire::Header::kAeth) && v.aeth().type() != wire::AethType::kAck) return;
  on_read_response(s, psn, info.any(wire::OpFlag::kFirst), info.any(wire::OpFlag::kLast), v.payload());
  note_drained(s);
}

void on_timer(SendSide& s) {
  CompleterState& c = s.completer;
  const uint64_t now = now_ns();
  c.timer_at = 0;
  if (c.deadline != 0 && now >= c.deadline) {
    if (c.rnr_wait) {
      c.rnr_wait = false;
      c.deadline = 0;
    } else {
      on_ack_timeout(s);
    }
    progress(s);
  } else if (c.probe_at != 0 && now >= c.probe_at) {
    const uint64_t next = s.sq.next;
    on_probe_time(s, now);
    if (s.sq.next != next) progress(s);
  } else if (c.turn_at != 0 && now >= c.turn_at) {
    progress(s);  // asks for the turn again; turn_at moves on if it has not come
  }
  // Still ahead: their call.
  if (c.probe_at != 0 && c.deadline != 0) schedule(s, std::min(c.probe_at, c.deadline));
  else if (c.deadline != 0) schedule(s, c.deadline);
  if (c.turn_at != 0) schedule(s, c.turn_at);
  note_drained(s);
}

void schedule_turn(SendSide& s) { schedule(s, s.completer.turn_at); }

}  // namespace softverbs::transport
