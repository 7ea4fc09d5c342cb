#include "transport/requester.h"
#include "transport/qp_types.h"

#include <algorithm>

#include "shm/process_registry.h"
#include "transport/completer.h"
#include "transport/link.h"
#include "transport/link_pacing.h"
#include "transport/local_sges.h"
#include "transport/mw_ops.h"
#include "transport/vl.h"
#include "transport/wr_opcode_table.h"
#include "wire/psn.h"

namespace softverbs::transport {
namespace {

// PSNs a message consumes: one per MTU-sized packet, at least one (IBA 9.7.1).
uint32_t packets_of(const SendWqe& w, const WrOpcodeInfo& op, uint32_t mtu) {
  static_assert(ReqKind::kFlush > ReqKind::kAtomicWrite && ReqKind::kAtomicWrite > ReqKind::kFetchAdd &&
                ReqKind::kFetchAdd > ReqKind::kCmpSwap && ReqKind::kCmpSwap > ReqKind::kRead);
  if (op.kind >= ReqKind::kCmpSwap) return 1;  // an atomic or ATOMIC WRITE
  return message_packets(w.length, mtu);
}

// IBA 10.8.3.3: a fenced WR waits until earlier READs and atomics are done.
bool fenced(const SendSide& s, const SendWqe& w) {
  if ((w.send_flags & IBV_SEND_FENCE) == 0) return false;
  for (uint64_t i = s.sq.done; i < s.sq.next; ++i)
    if (reads_remote(s.sq.at(i).opcode)) return true;
  return false;
}

// Local checks, then the link. A local error is found before anything leaves.
// `discard`: the port discards it (port_turn) once it passes the local checks.
[[gnu::always_inline]] inline ibv_wc_status send_one(SendSide& s, SendWqe& w, const WrOpcodeInfo& op, uint32_t from_psn,
                                                     bool discard) {
  if (s.qp.qp_type == IBV_QPT_UD) {
    if (w.ah == nullptr) return IBV_WC_LOC_QP_OP_ERR;
    if (w.length > s.qp.ud_mtu) return IBV_WC_LOC_LEN_ERR;  // IBA 11.4.1.1: one packet
    const uint8_t sl = w.ah->sl & 15;
    if (s.qp.shared->sl.load(std::memory_order_relaxed) != sl) [[unlikely]] {
      // The QP's port share so far stays under the SL it travelled on (PMA PortXmitDataSL).
      shm::fold_port_share(s.qp.shared->counters, s.qp.notifier->port_counters(),
                           s.qp.shared->sl.load(std::memory_order_relaxed));
      s.qp.shared->sl.store(sl, std::memory_order_relaxed);
    }
  }
  iovec iov[shm::kMaxSge];
  IoList local;
  // ATOMIC WRITE sends its eight bytes, like a WRITE; its response brings none.
  const bool writes_local =
      op.kind != ReqKind::kSend && op.kind != ReqKind::kWrite && op.kind != ReqKind::kAtomicWrite;
  if (w.placed != 0) {
    // Carried out at post (Link::place_at_post): its L_Key and VL checked there.
    local.bytes = w.length;
  } else {
    const ibv_wc_status st = resolve_local_sges(s, w, writes_local, iov, &local);
    if (st != IBV_WC_SUCCESS) return st;
    if (writes_local && op.kind != ReqKind::kRead && local.bytes < 8) return IBV_WC_LOC_LEN_ERR;  // an atomic's result
    if (discard) [[unlikely]] {
      s.qp.notifier->port_counters().sl_vl15_discards.fetch_add(1, std::memory_order_relaxed);
      return IBV_WC_SUCCESS;  // lost on the way: RC's timer retries, UC/UD complete
    }
  }
  return s.conn.link->transmit(s, w, local, from_psn);
}

// BIND_MW and LOCAL_INV: the requester's own work on the key table.
ibv_wc_status carry_out_locally(SendSide& s, const SendWqe& w) {
  if (w.opcode == IBV_WR_BIND_MW) {
    const WindowBind b{w.remote_qpn, w.rkey, static_cast<uint32_t>(w.swap >> 32), w.remote_addr, w.compare_add,
                       static_cast<uint32_t>(w.swap)};
    return bind_window(*s.qp.seg, s.qp.self, s.qp.pd_id, s.qp.qpn, b);
  }
  // IBA 10.6.7.2.3: only a valid type 2 window of our PD can be invalidated;
  // anything else is a local QP operation error.
  return invalidate_window(*s.qp.seg, w.rkey, s.qp.self, s.qp.pd_id, 0) ? IBV_WC_SUCCESS : IBV_WC_LOC_QP_OP_ERR;
}

}  // namespace

void progress(SendSide& s, bool may_wait) {
  while (s.sq.next != s.sq.posted) {
    const uint8_t state = s.qp.shared->state.load(std::memory_order_acquire);
    if (state == IBV_QPS_ERR) {
      flush_send_queue(s);
      return;
    }
    // IBA 10.3.1: only RTS sends; SQD finishes nothing new; SQE waits for recovery.
    if (state != IBV_QPS_RTS || s.completer.rnr_wait || s.conn.link == nullptr) break;
    SendWqe& w = s.sq.at(s.sq.next);
    const WrOpcodeInfo& op = *wr_opcode(w.opcode);  // checked at post
    if (op.local) {
      // Once everything before it has completed, so its completion stays in
      // order and the requests after it see the window as it leaves it.
      if (s.sq.done != s.sq.next) break;
      const uint64_t index = s.sq.next++;
      const ibv_wc_status st = carry_out_locally(s, w);
      if (st != IBV_WC_SUCCESS) {
        complete_in_error(s, index, st);
        return;
      }
      complete_success(s, index);
      continue;
    }
    // With nothing outstanding every limit allows the next request.
    if (s.sq.done != s.sq.next) {
      if (fenced(s, w)) break;
      // IBA 9.7.4.1.4 (C9-…): at most max_rd_atomic READs and atomics outstanding.
      if (op.reads_remote && reads_in_flight(s) >= std::max<uint32_t>(1, s.conn.max_rd_atomic)) break;
      if (!s.conn.link->can_transmit(s, w)) break;
    }
    if (w.packets == 0) {
      w.packets = packets_of(w, op, s.conn.mtu);
      w.psn = s.requester.next_psn;
      s.requester.next_psn = wire::psn_add(wire::Psn(w.psn), w.packets).value();
    }
    const uint64_t index = s.sq.next;
    const uint32_t from_psn = s.requester.resume_index == index ? s.requester.resume_psn : w.psn;
    // A WQE placed at post had its VL checked there (and a paced path is never placed).
    Turn turn = Turn::kGo;
    if (w.placed == 0 && wqe_to_port(s, w)) [[unlikely]] {
      turn = port_turn(s, w, op, from_psn);
      if (turn == Turn::kLater) {
        if (may_wait) {
          // Everything is looked at again after the sleep: a receive thread
          // may have sent this request, or failed the QP, meanwhile.
          const uint64_t at = s.completer.turn_at;  // guarded by the lock
          s.lock.unlock();
          sleep_until(at);
          s.lock.lock();
          continue;
        }
        // Its VL's turn has not come: the QP's timer asks again.
        schedule_turn(s);
        break;
      }
    }
    ++s.sq.next;
    if (s.requester.resume_index == index) s.requester.resume_index = ~0ull;
    const ibv_wc_status st = send_one(s, w, op, from_psn, turn == Turn::kDiscard);
    if (st != IBV_WC_SUCCESS) {
      // Completions stay in order: earlier requests are answered first, and
      // the WQE fails when it is the oldest (the retry fails the same way).
      if (s.sq.done != index) {
        s.sq.next = index;
        break;
      }
      complete_in_error(s, index, st);
      return;
    }
    // IBA 9.8, 9.9: UC and UD have no acknowledgements: a WQE is done once
    // its packets have left, whatever became of them.
    if (!reliable_qp(s.qp.qp_type) && s.sq.done == index) complete_success(s, index);
  }
  start_ack_timer(s);
}

}  // namespace softverbs::transport
