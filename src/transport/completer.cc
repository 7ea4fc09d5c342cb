#include "transport/completer.h"

#include "shm/rings.h"
#include "transport/cq_output.h"
#include "transport/nak_table.h"
#include "transport/wr_opcode_table.h"
#include "util/log.h"
#include "util/time.h"

namespace softverbs::transport {
namespace {

void post_send_cqe(SendSide& s, const SendWqe& w, ibv_wc_status status) {
  const WrOpcodeInfo* op = wr_opcode(w.opcode);
  shm::Cqe cqe{};
  cqe.wr_id = w.wr_id;
  cqe.status = static_cast<uint8_t>(status);
  cqe.opcode = static_cast<uint8_t>(op != nullptr ? op->wc_opcode : IBV_WC_SEND);
  cqe.byte_len = static_cast<uint32_t>(w.length);
  cqe.qp_num = s.qpn;
  cqe.sq_index = 0;
  post_cqe(*s.seg, s.send_cq, cqe, *s.notifier);
}

void reload_retries(SendSide& s) {
  s.retries_left = s.retry_cnt;
  s.rnr_left = s.rnr_retry;
}

// Go back to WQE `index` and send it again after `delay_ns` (IBA 9.7.5.2.8, 10.8.3.?).
bool retry_later(SendSide& s, uint64_t index, uint64_t delay_ns) {
  s.sq.next = index;
  if (delay_ns == kForever) return false;  // local ACK timeout 0: wait forever
  s.wait_until = now_ns() + (delay_ns == 0 ? 1 : delay_ns);
  s.timers->arm(s, s.wait_until);
  s.shared->counters.retries.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace

void flush_send_queue(SendSide& s) {
  s.ack_timeout = false;
  while (s.sq.done != s.sq.posted) {
    post_send_cqe(s, s.sq.at(s.sq.done), IBV_WC_WR_FLUSH_ERR);
    ++s.sq.done;
  }
  s.sq.next = s.sq.done;
  s.wait_until = 0;
  s.ack_deadline = 0;
  s.resume_index = ~0ull;
}

void flush_recv_queue(shm::Segment& seg, uint32_t qp_slot, Notifier& notifier) {
  shm::SharedQp& qp = seg.qp(qp_slot);
  if (qp.srq != 0 || qp.rq.ring == 0) return;
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
  SV_LOG(kDebug, "QP %#x: WQE %llu fails: %s", s.qpn, static_cast<unsigned long long>(index),
         ibv_wc_status_str(status));
  // Everything before `index` has completed already (completions are in order).
  s.sq.done = index;
  post_send_cqe(s, s.sq.at(index), status);
  ++s.sq.done;
  s.shared->state.store(IBV_QPS_ERR, std::memory_order_release);
  flush_send_queue(s);
  flush_recv_queue(*s.seg, s.qp_slot, *s.notifier);
}

bool on_ack_timeout(SendSide& s) {
  s.ack_timeout = false;
  // IBA C9-140: retry_cnt retries, then the WQE fails.
  if (s.retries_left == 0) {
    s.shared->counters.retry_exceeded.fetch_add(1, std::memory_order_relaxed);
    complete_in_error(s, s.sq.done, IBV_WC_RETRY_EXC_ERR);
    return false;
  }
  --s.retries_left;
  s.sq.next = s.sq.done;  // go back N
  return true;
}

void complete_success(SendSide& s, uint64_t index) {
  reload_retries(s);
  SendWqe& w = s.sq.at(index);
  shm::add_single_writer(s.shared->counters.sent_messages, 1);
  shm::add_single_writer(s.shared->counters.sent_bytes, w.length);
  if (s.sig_all || (w.send_flags & IBV_SEND_SIGNALED)) post_send_cqe(s, w, IBV_WC_SUCCESS);
  s.sq.done = index + 1;
}

bool on_result(SendSide& s, uint64_t index, const fabric::TransmitResult& r) {
  if (r.local_status != IBV_WC_SUCCESS) {
    complete_in_error(s, index, r.local_status);
    return false;
  }
  // IBA 9.8, 9.9: UC and UD have no acknowledgements: a WQE is done once its
  // packets have left, whatever became of them.
  if (s.qp_type != IBV_QPT_RC) {
    complete_success(s, index);
    return true;
  }
  const Response& resp = r.response;
  switch (resp.kind) {
    case Response::Kind::kAck:
    case Response::Kind::kDuplicate:
      complete_success(s, index);
      return true;
    case Response::Kind::kRnrNak:
      s.shared->counters.rnr_naks_received.fetch_add(1, std::memory_order_relaxed);
      // IBA 9.7.5.2.8 / C9-153: rnr_retry 7 retries forever.
      if (s.rnr_retry != 7) {
        if (s.rnr_left == 0) {
          s.shared->counters.rnr_retry_exceeded.fetch_add(1, std::memory_order_relaxed);
          complete_in_error(s, index, IBV_WC_RNR_RETRY_EXC_ERR);
          return false;
        }
        --s.rnr_left;
      }
      return retry_later(s, index, rnr_timer_ns(resp.rnr_timer));
    case Response::Kind::kNak:
      if (resp.nak == NakCode::kPsnSequenceError) {
        if (s.retries_left == 0) {
          s.shared->counters.retry_exceeded.fetch_add(1, std::memory_order_relaxed);
          complete_in_error(s, index, IBV_WC_RETRY_EXC_ERR);
          return false;
        }
        --s.retries_left;
        s.sq.next = index;  // go back N, at once
        s.shared->counters.retries.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      s.shared->counters.remote_errors.fetch_add(1, std::memory_order_relaxed);
      complete_in_error(s, index, requester_status(resp.nak));
      return false;
    case Response::Kind::kDrop:
      // No answer: the local ACK timeout runs (IBA 9.7.6.1.3, C9-140); what
      // happens when it expires is on_ack_timeout's.
      s.ack_timeout = true;
      return retry_later(s, index, local_ack_timeout_ns(s.timeout));
  }
  return false;
}

}  // namespace softverbs::transport
