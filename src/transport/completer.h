// The completer: what an answer means for the requests it answers —
// completion, go-back-N retry (sequence NAK, implied NAK, RNR, timeout), or
// an error that takes the QP to ERR — and the completions that follow, in
// posting order (IBA 9.7.5 requester side, 10.8.3; flush: 10.3.1). It owns
// the QP's retry counters and its one deadline (CompleterState).
//
// One completer for every link: the host link reports the responder's
// answer as these events from inside transmit; a packet link hands over
// each response packet (on_response_packet) as it arrives.
//
// Every function REQUIRES side.lock held, except flush_recv_queue. None of
// them sends: whoever reports an event lets the requester go on afterwards
// (transport::progress), so the host link, which reports from inside the
// requester's own loop, never recurses.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <span>

#include "shm/rings.h"
#include "transport/cq_output.h"
#include "transport/notifier.h"
#include "transport/send_side.h"
#include "transport/wr_opcode_table.h"
#include "wire/aeth.h"
#include "wire/packet.h"
#include "wire/psn.h"

namespace softverbs::transport {

// ACKNOWLEDGE: an ACK, RNR NAK or NAK for `psn`. An ACK covers every
// request up to `psn` (IBA 9.7.5.1.1).
void acknowledge(SendSide& side, uint32_t psn, const wire::Aeth& aeth);
void arm_ack_timer(SendSide& side);
// Requests are in flight and no deadline runs: the local ACK timer starts.
inline void start_ack_timer(SendSide& side) {
  if (side.completer.deadline == 0 && side.sq.done != side.sq.next) arm_ack_timer(side);
}

// The completion of a send WR.
inline void post_send_cqe(SendSide& s, uint64_t wr_id, uint32_t opcode, uint64_t length, ibv_wc_status status) {
  shm::Cqe cqe{};
  cqe.wr_id = wr_id;
  cqe.status = static_cast<uint8_t>(status);
  cqe.opcode = static_cast<uint8_t>(wr_opcode(opcode)->wc_opcode);
  cqe.byte_len = static_cast<uint32_t>(length);
  cqe.qp_num = s.qp.qpn;
  post_cqe(*s.qp.seg, s.qp.send_cq, cqe, *s.qp.notifier);
}
inline void post_send_cqe(SendSide& s, const SendWqe& w, ibv_wc_status status) {
  post_send_cqe(s, w.wr_id, w.opcode, w.length, status);
}

// `index` is side.sq.done. WQE `index` succeeded (UC and UD: once sent, IBA
// 9.8/9.9): its completion if signalled, the retry counters reloaded.
inline void complete_success(SendSide& s, uint64_t index) {
  s.completer.retries_left = s.conn.retry_cnt;
  s.completer.rnr_left = s.conn.rnr_retry;
  SendWqe& w = s.sq.at(index);
  shm::add_single_writer(s.qp.shared->counters.sent_messages, 1);
  shm::add_single_writer(s.qp.shared->counters.sent_bytes, w.length);
  if (s.qp.sig_all || (w.send_flags & IBV_SEND_SIGNALED)) post_send_cqe(s, w, IBV_WC_SUCCESS);
  s.sq.done = index + 1;
}

// A WR the link carried out at post on an idle queue, whose answer completes
// it at once (Link::kPlacedAndDone): it takes its PSNs and retires as
// complete_success would, without ever occupying a WQE. Nothing is
// outstanding before or after, so no timer runs.
inline void complete_at_post(SendSide& s, const ibv_send_wr& wr, uint64_t length, uint32_t packets) {
  s.requester.next_psn = wire::psn_add(wire::Psn(s.requester.next_psn), packets).value();
  s.completer.retries_left = s.conn.retry_cnt;
  s.completer.rnr_left = s.conn.rnr_retry;
  shm::add_single_writer(s.qp.shared->counters.sent_messages, 1);
  shm::add_single_writer(s.qp.shared->counters.sent_bytes, length);
  if (s.qp.sig_all || (wr.send_flags & IBV_SEND_SIGNALED)) post_send_cqe(s, wr.wr_id, wr.opcode, length, IBV_WC_SUCCESS);
  s.sq.done = s.sq.next = ++s.sq.posted;
}

// Progress was made: the local ACK timer starts over for what is still out.
inline void restart_ack_timer(SendSide& s) {
  if (s.completer.rnr_wait) return;
  s.completer.deadline = 0;
  start_ack_timer(s);
}

// The oldest request is answered: its completion, the ACK timer restarted.
inline void retire_oldest(SendSide& side) {
  complete_success(side, side.sq.done);
  restart_ack_timer(side);
}

// acknowledge(), with the answer the synchronous host link gives to nearly
// every request inline: an ACK of the one SEND or WRITE outstanding.
inline void on_acknowledge(SendSide& side, uint32_t psn, const wire::Aeth& aeth) {
  if (aeth.type() == wire::AethType::kAck && side.sq.next - side.sq.done == 1) {
    const SendWqe& w = side.sq.at(side.sq.done);
    if (!reads_remote(w.opcode) && psn == ((w.psn + w.packets - 1) & wire::Psn::kMask)) return retire_oldest(side);
  }
  acknowledge(side, psn, aeth);
}

// One RDMA READ response packet. `first`/`last` from its opcode.
void on_read_response(SendSide& side, uint32_t psn, bool first, bool last, std::span<const uint8_t> payload);

// The whole response to the READ starting at `psn`, its data already placed
// in the WQE's local memory by the link (the host link copies from the
// target's memory straight into it).
void on_read_placed(SendSide& side, uint32_t psn);

// ATOMIC ACKNOWLEDGE: the original value at the target.
void on_atomic_acknowledge(SendSide& side, uint32_t psn, const wire::Aeth& aeth, uint64_t original);

// A response packet (ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, READ response) from
// the QP's peer, parsed and checked by the link: the matching event above.
void on_response_packet(SendSide& side, const wire::PacketView& packet);

// The scheduled call (TimerService): the deadline passed — the local ACK
// timer (resend from the oldest unacknowledged PSN, or RETRY_EXC_ERR once
// retry_cnt retries are spent: IBA C9-140) or the end of an RNR wait — or a
// paced request's turn may have come; then the requester goes on.
void on_timer(SendSide& side);

// Has on_timer called at CompleterState::turn_at (a paced request waits for
// its VL's turn, transport/link_pacing.h).
void schedule_turn(SendSide& side);

// Number of READ and atomic requests sent and not yet answered.
uint32_t reads_in_flight(const SendSide& side);


// `index` is side.sq.done. Completes WQE `index` in error, takes the QP to
// ERR and flushes everything after it.
void complete_in_error(SendSide& side, uint64_t index, ibv_wc_status status);

// Every WQE not yet completed completes with IBV_WC_WR_FLUSH_ERR (signalled
// or not).
void flush_send_queue(SendSide& side);

// Owner only. Every receive WQE of the QP's own receive queue completes with
// IBV_WC_WR_FLUSH_ERR; a QP on an SRQ flushes nothing (the WQEs are the
// SRQ's) and, if RC, raises IBV_EVENT_QP_LAST_WQE_REACHED.
void flush_recv_queue(shm::Segment& seg, uint32_t qp_slot, Notifier& notifier);

}  // namespace softverbs::transport
