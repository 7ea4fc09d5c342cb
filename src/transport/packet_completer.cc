#include "transport/packet_completer.h"
#include "transport/mtu.h"

#include <algorithm>

#include "transport/completer.h"
#include "transport/local_sges.h"
#include "transport/nak_table.h"
#include "transport/requester.h"
#include "transport/wr_opcode_table.h"
#include "util/log.h"
#include "util/time.h"
#include "wire/psn.h"

namespace softverbs::transport {
namespace {

using wire::Psn;
using wire::psn_diff;


bool answered_by_response(const SendWqe& w) {
  const WrOpcodeInfo* op = wr_opcode(w.opcode);
  return op != nullptr && op->reads_remote;
}

// Index of the sent WQE whose PSN range holds `psn`, or ~0.
uint64_t wqe_of(SendSide& s, uint32_t psn) {
  for (uint64_t i = s.sq.done; i < s.sq.next; ++i) {
    const SendWqe& w = s.sq.at(i);
    const int32_t d = psn_diff(Psn(psn), Psn(w.psn));
    if (d >= 0 && static_cast<uint32_t>(d) < w.packets) return i;
  }
  return ~0ull;
}

void schedule(SendSide& s, uint64_t deadline) {
  if (s.timer_at == 0 || deadline < s.timer_at) {
    s.timer_at = deadline;
    s.timers->arm(s, deadline);
  }
}

void restart_ack_timer(SendSide& s) {
  s.ack_deadline = 0;
  start_ack_timer(s);
}

// Sends again from WQE `index`, PSN `psn` inside it; what it had received of
// READ responses before `psn` stays.
void go_back(SendSide& s, uint64_t index, uint32_t psn) {
  for (uint64_t i = index; i < s.sq.next; ++i) {
    SendWqe& w = s.sq.at(i);
    if (i == index && answered_by_response(w)) {
      const int32_t d = psn_diff(Psn(psn), Psn(w.psn));
      w.responses = static_cast<uint32_t>(std::max(0, d));
    } else if (i != index) {
      w.responses = 0;
    }
  }
  s.sq.next = index;
  s.resume_index = index;
  s.resume_psn = psn;
  s.shared->counters.retries.fetch_add(1, std::memory_order_relaxed);
}

// Completes, in order, every WQE that `psn` acknowledges (IBA 9.7.5.1.1: an
// ACK covers every earlier request). A READ or atomic the ACK passes without
// its response having arrived lost that response: it is asked again
// (9.7.5.1.4, an implied NAK). Returns false when that happened.
bool complete_through(SendSide& s, uint32_t psn) {
  while (s.sq.done != s.sq.next) {
    SendWqe& w = s.sq.at(s.sq.done);
    const uint32_t last = wire::psn_add(Psn(w.psn), w.packets - 1).value();
    if (answered_by_response(w)) {
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
    if (psn_diff(Psn(psn), Psn(last)) < 0) return true;
    complete_success(s, s.sq.done);
  }
  return true;
}

void finish(SendSide& s) {
  restart_ack_timer(s);
  progress(s);
}

}  // namespace

uint32_t reads_in_flight(const SendSide& s) {
  uint32_t n = 0;
  for (uint64_t i = s.sq.done; i < s.sq.next; ++i) {
    const SendWqe& w = const_cast<SendSide&>(s).sq.at(i);
    if (answered_by_response(w) && w.responses != w.packets) ++n;
  }
  return n;
}

void start_ack_timer(SendSide& s) {
  if (s.ack_deadline != 0 || s.sq.done == s.sq.next) return;
  const uint64_t t = local_ack_timeout_ns(s.timeout);
  if (t == kForever) return;  // timeout 0: wait forever
  s.ack_deadline = now_ns() + t;
  schedule(s, s.ack_deadline);
}

void on_acknowledge(SendSide& s, uint32_t psn, const wire::Aeth& aeth) {
  if (s.sq.done == s.sq.next) return;  // nothing in flight: a stale ACK
  // An ACK older than everything outstanding repeats one already handled.
  if (psn_diff(Psn(psn), Psn(s.sq.at(s.sq.done).psn)) < -1) return;
  switch (aeth.type()) {
    case wire::AethType::kAck:
      complete_through(s, psn);
      return finish(s);
    case wire::AethType::kRnrNak: {
      if (!complete_through(s, wire::psn_add(Psn(psn), -1).value())) return finish(s);
      const uint64_t index = wqe_of(s, psn);
      if (index == ~0ull) return;
      s.shared->counters.rnr_naks_received.fetch_add(1, std::memory_order_relaxed);
      // IBA 9.7.5.2.8 / C9-153: rnr_retry 7 retries forever.
      if (s.rnr_retry != 7) {
        if (s.rnr_left == 0) {
          s.shared->counters.rnr_retry_exceeded.fetch_add(1, std::memory_order_relaxed);
          complete_in_error(s, index, IBV_WC_RNR_RETRY_EXC_ERR);
          return;
        }
        --s.rnr_left;
      }
      go_back(s, index, psn);
      s.ack_deadline = 0;
      s.ack_timeout = false;
      s.wait_until = now_ns() + std::max<uint64_t>(1, rnr_timer_ns(aeth.rnr_timer()));
      schedule(s, s.wait_until);
      return;
    }
    case wire::AethType::kNak: {
      if (!complete_through(s, wire::psn_add(Psn(psn), -1).value())) return finish(s);
      const uint64_t index = wqe_of(s, psn);
      if (index == ~0ull) return;
      if (aeth.nak_code() == wire::NakCode::kPsnSequenceError) {
        if (s.retries_left == 0) {
          s.shared->counters.retry_exceeded.fetch_add(1, std::memory_order_relaxed);
          complete_in_error(s, index, IBV_WC_RETRY_EXC_ERR);
          return;
        }
        --s.retries_left;
        s.shared->counters.sequence_naks_received.fetch_add(1, std::memory_order_relaxed);
        go_back(s, index, psn);
        return finish(s);
      }
      s.shared->counters.remote_errors.fetch_add(1, std::memory_order_relaxed);
      complete_in_error(s, index, requester_status(aeth.nak_code()));
      return;
    }
    case wire::AethType::kReserved:
      return;  // IBA 9.3.5: a reserved syndrome is discarded
  }
}

void on_read_response(SendSide& s, uint32_t psn, bool first, bool last, std::span<const uint8_t> payload) {
  const uint64_t index = wqe_of(s, psn);
  if (index == ~0ull) return;  // a duplicate or stray response
  SendWqe& w = s.sq.at(index);
  const WrOpcodeInfo* op = wr_opcode(w.opcode);
  if (op == nullptr || op->kind != ReqKind::kRead) return;
  // Responses come in order; one not the next expected is dropped and the
  // request repeated when the timer or a later response shows the gap.
  if (psn_diff(Psn(psn), Psn(w.psn)) != static_cast<int32_t>(w.responses)) return;
  // The response also acknowledges every request before the READ.
  if (!complete_through(s, wire::psn_add(Psn(w.psn), -1).value())) return finish(s);
  const uint64_t mtu = mtu_bytes(s.path_mtu);
  const uint64_t offset = static_cast<uint64_t>(w.responses) * mtu;
  const bool expect_last = w.responses + 1 == w.packets;
  const uint64_t expect_len = expect_last ? w.length - offset : mtu;
  // A response of the wrong shape is malformed: dropped, like a corrupt one.
  if (payload.size() != expect_len || last != expect_last || (first != (w.responses == 0) && !first)) return;
  iovec iov[shm::kMaxSge];
  IoList list;
  const ibv_wc_status st = resolve_local_sges(s, w, true, iov, &list);
  if (st != IBV_WC_SUCCESS) {
    complete_in_error(s, index, st);
    return;
  }
  IoCursor c(list, offset);
  scatter_from(c, payload.data(), std::min<uint64_t>(payload.size(), list.bytes > offset ? list.bytes - offset : 0));
  ++w.responses;
  if (last) {
    complete_through(s, wire::psn_add(Psn(w.psn), w.packets - 1).value());
  }
  finish(s);
}

void on_atomic_acknowledge(SendSide& s, uint32_t psn, const wire::Aeth& aeth, uint64_t original) {
  if (aeth.type() != wire::AethType::kAck) return on_acknowledge(s, psn, aeth);
  const uint64_t index = wqe_of(s, psn);
  if (index == ~0ull) return;
  SendWqe& w = s.sq.at(index);
  const WrOpcodeInfo* op = wr_opcode(w.opcode);
  if (op == nullptr || (op->kind != ReqKind::kCmpSwap && op->kind != ReqKind::kFetchAdd) || w.responses != 0) return;
  if (!complete_through(s, wire::psn_add(Psn(w.psn), -1).value())) return finish(s);
  iovec iov[shm::kMaxSge];
  IoList list;
  const ibv_wc_status st = resolve_local_sges(s, w, true, iov, &list);
  if (st != IBV_WC_SUCCESS) {
    complete_in_error(s, index, st);
    return;
  }
  IoCursor c(list);
  scatter_from(c, &original, std::min<uint64_t>(8, list.bytes));
  w.responses = 1;
  complete_through(s, psn);
  finish(s);
}

void on_packet_timeout(SendSide& s) {
  s.ack_deadline = 0;
  if (s.sq.done == s.sq.next) return;
  // IBA C9-140: retry_cnt retries, then the WQE fails.
  if (s.retries_left == 0) {
    s.shared->counters.retry_exceeded.fetch_add(1, std::memory_order_relaxed);
    complete_in_error(s, s.sq.done, IBV_WC_RETRY_EXC_ERR);
    return;
  }
  --s.retries_left;
  SendWqe& w = s.sq.at(s.sq.done);
  const uint32_t from = answered_by_response(w) ? w.responses : 0;
  go_back(s, s.sq.done, wire::psn_add(Psn(w.psn), from).value());
  finish(s);
}

}  // namespace softverbs::transport
