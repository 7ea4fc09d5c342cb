#include "transport/responder.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>

#include "shm/port_pkeys.h"
#include "shm/qp_pkeys.h"
#include "shm/rings.h"
#include "transport/cq_output.h"
#include "transport/mem_ops.h"
#include "transport/mw_ops.h"
#include "transport/nak_table.h"
#include "transport/qp_types.h"
#include "util/log.h"
#include "wire/feth.h"
#include "wire/psn.h"

namespace softverbs::transport {
namespace {

constexpr uint32_t kPsnMask = wire::Psn::kMask;
constexpr uint32_t kUdGrhBytes = 40;

bool accepts_requests(uint8_t state) {
  // IBA 10.3.1: the receive side works in RTR and every later non-error state.
  return state == IBV_QPS_RTR || state == IBV_QPS_RTS || state == IBV_QPS_SQD || state == IBV_QPS_SQE;
}

// C9-… : packets for a QP that cannot receive are silently dropped.
bool can_receive(const shm::SharedQp& qp, uint32_t dest_qpn) {
  return qp.slot_state.load(std::memory_order_acquire) == static_cast<uint32_t>(shm::SlotState::kLive) &&
         qp.qpn == dest_qpn && accepts_requests(qp.state.load(std::memory_order_acquire));
}

bool connected_qp(uint8_t qp_type) { return qp_type != IBV_QPT_UD; }

bool grants(const shm::SharedQp& qp, uint32_t access) {
  return (qp.access_flags.load(std::memory_order_relaxed) & access) != 0;
}

class Responder {
 public:
  Responder(shm::Segment& seg, uint32_t slot, const Request& req, TargetMemory& mem, Notifier& notifier)
      : seg_(seg), slot_(slot), qp_(seg.qp(slot)), st_(qp_.qp_type == IBV_QPT_UD ? ud_state_ : qp_.resp), req_(req),
        mem_(mem), notifier_(notifier), mem_owner_(qp_.owner), mem_pd_(qp_.pd_id), recv_cq_(qp_.recv_cq) {
    // The scalars the datagram path reads before it writes them; the SGEs
    // and replay slots are written before they are read.
    if (&st_ == &ud_state_) std::memset(&ud_state_, 0, offsetof(shm::ResponderState, recv_sge));
  }

  Response run();

 private:
  Response fail(RespError e);
  Response ack() {
    Response r;
    r.kind = Response::Kind::kAck;
    r.msn = st_.msn;
    return r;
  }
  bool resolve_xrc_srq();
  bool take_recv_wqe();
  Response receiver_not_ready();
  Response refuse();
  [[gnu::noinline, gnu::cold]] bool pkey_accepted() const;
  [[gnu::noinline, gnu::cold]] Response pkey_violation();
  [[gnu::noinline]] uint16_t gsi_pkey_index() const;
  std::optional<RespError> place_send_payload(const IoList& data);
  bool complete_recv(int status, uint32_t byte_len, bool with_imm, ibv_wc_opcode opcode);
  Response on_send();
  Response on_ud_send();
  bool uc_in_sequence();
  Response on_write();
  Response on_read();
  Response on_atomic();
  Response on_atomic_write();
  Response on_flush();
  Response on_duplicate();
  void advance(uint32_t packets) { st_.epsn = (req_.psn + packets) & kPsnMask; }
  KeyCheck check_rkey(uint64_t length, uint32_t access, MrRef* out) {
    return check_key(seg_, req_.rkey, true, mem_owner_, mem_pd_, qp_.qpn, req_.va, length, access, out);
  }

  shm::Segment& seg_;
  uint32_t slot_;
  shm::SharedQp& qp_;
  // A UD QP has any number of senders, and on the host link each runs this
  // responder in its own process at the same time: a datagram's receive WQE
  // is held here, never in the QP's shared ResponderState (which a
  // connected QP's one requester owns, invariant 3). One packet, one message:
  // nothing carries over.
  shm::ResponderState ud_state_;
  shm::ResponderState& st_;
  const Request& req_;
  TargetMemory& mem_;
  Notifier& notifier_;
  // Whose memory the request reaches, under which PD, and where its receive
  // completes: the QP's own, or for XRC the SRQ's the XRCETH names.
  shm::OwnerId mem_owner_;
  uint32_t mem_pd_;
  uint32_t recv_cq_;
  shm::SharedSrq* xrc_srq_ = nullptr;
};

// IBA Annex A14: an XRC request names an XRC SRQ, which must be one of the
// XRC_RECV QP's domain; its PD checks the request's memory accesses and its
// CQ takes the receive completion.
bool Responder::resolve_xrc_srq() {
  const uint32_t slot = req_.xrc_srqn & (shm::kMaxSrqs - 1);
  shm::SharedSrq& srq = seg_.srq(slot);
  if (srq.slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::SlotState::kLive) ||
      srq.srqn != req_.xrc_srqn || srq.xrcd == 0 || srq.xrcd != qp_.xrcd)
    return false;
  xrc_srq_ = &srq;
  mem_owner_ = srq.owner;
  mem_pd_ = srq.pd_id;
  recv_cq_ = srq.recv_cq;
  return true;
}

bool Responder::take_recv_wqe() {
  if (st_.recv_valid) return true;
  shm::RecvQueue* rq = &qp_.rq;
  shm::SharedSrq* srq = xrc_srq_;
  if (qp_.srq != 0) {
    srq = &seg_.srq(qp_.srq - 1);
    if (srq->slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::SlotState::kLive)) return false;
  }
  if (srq != nullptr) rq = &srq->rq;
  if (__atomic_load_n(&rq->ring, __ATOMIC_RELAXED) == 0) return false;  // an SRQ's owner may be moving it
  uint32_t n = 0;
  if (!shm::rq_take(seg_, *rq, &st_.recv_wr_id, st_.recv_sge, &n, &st_.recv_index)) return false;
  st_.recv_num_sge = n;
  st_.recv_offset = 0;
  st_.recv_from_srq = srq != nullptr;
  st_.recv_valid = 1;
  if (srq != nullptr) {
    // IBA 10.2.9.3: the SRQ limit event fires once when the queue drains below it.
    const uint32_t limit = srq->rq.limit.load(std::memory_order_relaxed);
    if (limit != 0 && shm::rq_depth(srq->rq) < limit) {
      uint32_t expected = limit;
      if (srq->rq.limit.compare_exchange_strong(expected, 0)) {
        if (srq == xrc_srq_)  // its owner need not be the QP's
          notifier_.srq_event(static_cast<uint32_t>(srq - &seg_.srq(0)), srq->owner);
        else
          notifier_.qp_event(slot_, qp_.owner, 1ull << IBV_EVENT_SRQ_LIMIT_REACHED);
      }
    }
  }
  return true;
}

// IBA 9.7.5.2.8: no receive WQE: an RNR NAK carrying our minimum RNR timer
// (RC); the unreliable transports drop the message.
Response Responder::receiver_not_ready() {
  if (!reliable_qp(qp_.qp_type)) return fail(RespError::kRecvTooSmall);
  shm::add_single_writer(qp_.counters.rnr_naks_sent, 1);
  Response r;
  r.kind = Response::Kind::kRnrNak;
  r.rnr_timer = qp_.min_rnr_timer.load(std::memory_order_relaxed);
  r.msn = st_.msn;
  return r;
}

// Scatters this packet's payload across the receive WQE's SGEs, checking each
// SGE's L_Key as it is reached.
std::optional<RespError> Responder::place_send_payload(const IoList& data) {
  uint64_t len = data.bytes;
  uint64_t skip = st_.recv_offset;
  uint64_t src_off = 0;
  uint64_t capacity = 0;
  for (uint32_t i = 0; i < st_.recv_num_sge; ++i) capacity += st_.recv_sge[i].length;
  if (st_.recv_offset + len > capacity) return RespError::kRecvTooSmall;
  for (uint32_t i = 0; i < st_.recv_num_sge && len > 0; ++i) {
    const shm::Sge& sge = st_.recv_sge[i];
    if (skip >= sge.length) {
      skip -= sge.length;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(sge.length - skip, len);
    MrRef ref;
    if (check_key(seg_, sge.lkey, false, mem_owner_, mem_pd_, 0, sge.addr + skip, n, IBV_ACCESS_LOCAL_WRITE, &ref) !=
        KeyCheck::kOk)
      return RespError::kRecvLkey;
    if (!mem_.write(*ref.mr, ref.va, data, src_off, n).is_ok())
      return on_demand(*ref.mr) ? RespError::kRecvLkey : RespError::kTargetMemory;
    src_off += n;
    len -= n;
    skip = 0;
  }
  st_.recv_offset += static_cast<uint32_t>(data.bytes);
  return std::nullopt;
}

bool Responder::complete_recv(int status, uint32_t byte_len, bool with_imm, ibv_wc_opcode opcode) {
  shm::Cqe cqe{};
  cqe.wr_id = st_.recv_wr_id;
  cqe.status = static_cast<uint8_t>(status);
  cqe.opcode = static_cast<uint8_t>(opcode);
  cqe.byte_len = byte_len;
  cqe.qp_num = qp_.qpn;
  cqe.src_qp = req_.src_qpn;
  cqe.slid = req_.slid;
  cqe.sq_index = shm::Cqe::kRecv;
  cqe.rq_index = st_.recv_index;
  cqe.solicited = req_.solicited;
  if (with_imm) {
    cqe.wc_flags = IBV_WC_WITH_IMM;
    cqe.imm_data = req_.imm;
  }
  if (req_.has_inv && status == IBV_WC_SUCCESS) {
    cqe.wc_flags = IBV_WC_WITH_INV;
    cqe.imm_data = req_.inv_rkey;  // ibv_wc's invalidated_rkey shares imm_data's place
  }
  if (qp_.qp_type == IBV_QPT_UD) {
    cqe.sl = req_.sl;
    if (req_.with_grh) cqe.wc_flags |= IBV_WC_GRH;
    // ibv_wc.pkey_index is QP1's (ibv_poll_cq(3)): the entry of the port's
    // table the datagram's P_Key matched, which its answer is to carry.
    if (qp_.gsi != 0) cqe.pkey_index = gsi_pkey_index();
  }
  st_.recv_valid = 0;
  return post_cqe(seg_, recv_cq_, cqe, notifier_);
}

Response Responder::fail(RespError e) {
  const NakEffect fx = nak_effect(e, qp_.qp_type);
  if (e == RespError::kPsnAhead) {
    shm::add_single_writer(qp_.counters.out_of_sequence, 1);
    if (st_.psn_nak_sent) {
      Response r;
      r.kind = Response::Kind::kDrop;
      return r;
    }
    st_.psn_nak_sent = 1;
  }
  // A packet ahead of the expected PSN leaves the message in progress as it
  // is: the requester resends from the expected PSN, mid-message (IBA 9.7.5.2.1).
  if (e != RespError::kPsnAhead) {
    if (fx.recv_status >= 0 && st_.recv_valid)
      complete_recv(fx.recv_status, 0, false, req_.kind == ReqKind::kSend ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM);
    st_.in_message = 0;
    st_.recv_offset = 0;  // a receive WQE still held starts the next message afresh
  }
  if (fx.qp_error) {
    qp_.state.store(IBV_QPS_ERR, std::memory_order_release);
    uint64_t bits = kQpFlushRequest;
    if (fx.async_event >= 0) bits |= 1ull << fx.async_event;
    notifier_.qp_event(slot_, qp_.owner, bits);
  }
  if (e == RespError::kRkey) notifier_.port_counters().remote_access_errors.fetch_add(1, std::memory_order_relaxed);
  Response r;
  r.kind = fx.kind;
  r.nak = fx.nak;
  r.msn = st_.msn;
  return r;
}

Response Responder::on_send() {
  if (req_.first && !take_recv_wqe()) return receiver_not_ready();
  if (!st_.recv_valid) return fail(RespError::kOpcodeSequence);
  if (std::optional<RespError> e = place_send_payload(req_.payload)) return fail(*e);
  // IBA 10.6.7.2.3 (C10-…): the window must be a type 2 one of this QP's
  // PD, bound to this QP; otherwise an invalid request, the QP to Error.
  if (req_.last && req_.has_inv && !invalidate_window(seg_, req_.inv_rkey, qp_.owner, qp_.pd_id, qp_.qpn))
    return fail(RespError::kInvalidate);
  st_.in_message = !req_.last;
  st_.opcode_family = static_cast<uint32_t>(ReqKind::kSend);
  advance(req_.packets);
  if (req_.last) {
    const uint32_t len = st_.recv_offset;
    st_.msn = (st_.msn + 1) & kPsnMask;
    shm::add_single_writer(qp_.counters.received_messages, 1);
    shm::add_single_writer(qp_.counters.received_bytes, len);
    complete_recv(IBV_WC_SUCCESS, len, req_.has_imm, IBV_WC_RECV);
  }
  return ack();
}

// UC (IBA 9.8.3): a gap in the PSNs loses the rest of the message in
// progress; the next FIRST or ONLY starts afresh, in the receive WQE that
// message had taken. Returns false for a packet to drop.
bool Responder::uc_in_sequence() {
  const bool continues_in_order = st_.in_message != 0 && req_.psn == st_.epsn;
  if (!req_.first && continues_in_order) return true;
  if (st_.in_message != 0) {  // lost its tail, or a new message began: it is gone
    st_.in_message = 0;
    st_.recv_offset = 0;
  }
  return req_.first;
}

// UD (IBA 11.4.1.2): one packet, into a receive WQE whose first 40 bytes
// take the GRH; byte_len counts them. No WQE, or one too small: dropped.
Response Responder::on_ud_send() {
  if (!take_recv_wqe()) {
    notifier_.port_counters().dropped_requests.fetch_add(1, std::memory_order_relaxed);
    return Response{};
  }
  static constexpr uint8_t kNoGrh[kUdGrhBytes] = {};
  const iovec grh_iov{const_cast<uint8_t*>(req_.grh != nullptr ? req_.grh : kNoGrh), kUdGrhBytes};
  if (std::optional<RespError> e = place_send_payload(IoList{&grh_iov, 1, kUdGrhBytes})) return fail(*e);
  if (std::optional<RespError> e = place_send_payload(req_.payload)) return fail(*e);
  const uint32_t len = st_.recv_offset;
  st_.recv_offset = 0;
  qp_.counters.received_messages.fetch_add(1, std::memory_order_relaxed);
  qp_.counters.received_bytes.fetch_add(len, std::memory_order_relaxed);
  complete_recv(IBV_WC_SUCCESS, len, req_.has_imm, IBV_WC_RECV);
  return ack();
}

Response Responder::on_write() {
  if (!grants(qp_, IBV_ACCESS_REMOTE_WRITE)) return fail(RespError::kUnsupported);
  // WRITE with immediate consumes a receive WQE (IBA 9.4.3): check first, so an
  // RNR NAK comes before any data is placed.
  if (req_.last && req_.has_imm && !take_recv_wqe()) return receiver_not_ready();
  // The message's state is stored after the payload: a peer polling the
  // target buffer waits for the data, not for the bookkeeping.
  MrRef ref;
  uint64_t va = st_.write_va;
  uint32_t rkey = st_.write_rkey;
  uint32_t remaining = st_.write_remaining;
  uint32_t length = st_.write_length;
  if (req_.first) {
    // IBA 9.7.4.1.5 / C9-88: the R_Key of a zero-length WRITE is not checked.
    if (req_.dma_length != 0 && check_rkey(req_.dma_length, IBV_ACCESS_REMOTE_WRITE, &ref) != KeyCheck::kOk)
      return fail(RespError::kRkey);
    va = req_.va;
    rkey = req_.rkey;
    remaining = length = req_.dma_length;
  }
  const uint64_t n = req_.payload.bytes;
  if (n > remaining || (req_.last && n != remaining)) return fail(RespError::kLengthMismatch);
  Response r = ack();
  if (n > 0) {
    // The first packet's check covered the whole WRITE; later ones are checked
    // again, so a region deregistered mid-message stops taking data.
    if (!req_.first &&
        check_key(seg_, rkey, true, mem_owner_, mem_pd_, qp_.qpn, va, n, IBV_ACCESS_REMOTE_WRITE, &ref) != KeyCheck::kOk)
      return fail(RespError::kRkey);
    if (!mem_.write(*ref.mr, ref.va, req_.payload, 0, n).is_ok())
      return fail(on_demand(*ref.mr) ? RespError::kPageFault : RespError::kTargetMemory);
    r.data_mr = ref.mr;
    r.data_va = ref.va;
  }
  st_.write_va = va + n;
  st_.write_rkey = rkey;
  st_.write_remaining = remaining - static_cast<uint32_t>(n);
  st_.write_length = length;
  st_.in_message = !req_.last;
  st_.opcode_family = static_cast<uint32_t>(ReqKind::kWrite);
  advance(req_.packets);
  if (req_.last) {
    shm::add_single_writer(qp_.counters.received_messages, 1);
    st_.msn = (st_.msn + 1) & kPsnMask;
    // The LAST packet carries no RETH: the length is the first packet's (IBA 9.4.3).
    if (req_.has_imm) complete_recv(IBV_WC_SUCCESS, length, true, IBV_WC_RECV_RDMA_WITH_IMM);
  }
  r.msn = st_.msn;
  return r;
}

Response Responder::on_read() {
  if (!reliable_qp(qp_.qp_type) || !grants(qp_, IBV_ACCESS_REMOTE_READ)) return fail(RespError::kUnsupported);
  Response r = ack();
  if (req_.dma_length != 0) {
    MrRef ref;
    if (check_rkey(req_.dma_length, IBV_ACCESS_REMOTE_READ, &ref) != KeyCheck::kOk) return fail(RespError::kRkey);
    if (on_demand(*ref.mr) && !mem_.fault_in(*ref.mr, ref.va, req_.dma_length, false).is_ok()) [[unlikely]]
      return fail(RespError::kPageFault);
    r.data_mr = ref.mr;
    r.data_va = ref.va;
  }
  advance(req_.packets);
  st_.msn = (st_.msn + 1) & kPsnMask;
  r.msn = st_.msn;
  shm::add_single_writer(qp_.counters.received_messages, 1);
  return r;
}

Response Responder::on_atomic() {
  if (!reliable_qp(qp_.qp_type) || !grants(qp_, IBV_ACCESS_REMOTE_ATOMIC)) return fail(RespError::kUnsupported);
  if (req_.va % 8 != 0) return fail(RespError::kMisaligned);
  MrRef ref;
  if (check_rkey(8, IBV_ACCESS_REMOTE_ATOMIC, &ref) != KeyCheck::kOk) return fail(RespError::kRkey);
  uint64_t original = 0;
  const AtomicOp op = req_.kind == ReqKind::kCmpSwap ? AtomicOp::kCmpSwap : AtomicOp::kFetchAdd;
  if (!mem_.atomic(*ref.mr, ref.va, op, req_.compare_add, req_.swap, &original).is_ok())
    return fail(on_demand(*ref.mr) ? RespError::kPageFault : RespError::kTargetMemory);
  shm::AtomicReplay& slot = st_.atomics[st_.atomic_next++ % shm::kMaxRdAtomic];
  slot.psn = req_.psn;
  slot.original = original;
  slot.valid = 1;
  advance(req_.packets);
  st_.msn = (st_.msn + 1) & kPsnMask;
  shm::add_single_writer(qp_.counters.received_messages, 1);
  Response r = ack();
  r.original = original;
  return r;
}

// IBA 1.5 ATOMIC WRITE, checked as Linux's rxe checks it: the QP must allow
// remote writes, the R_Key grant REMOTE_WRITE over the eight bytes and the
// target be 8-byte aligned. The bytes land as one 64-bit store, after
// everything placed before it, so a peer never sees them torn. It takes a
// responder resource: its PSN goes in the replay ring, so that a duplicate
// is answered again without storing again over whatever came after.
Response Responder::on_atomic_write() {
  if (!reliable_qp(qp_.qp_type) || !grants(qp_, IBV_ACCESS_REMOTE_WRITE)) return fail(RespError::kUnsupported);
  if (req_.dma_length != 8 || req_.payload.bytes != 8) return fail(RespError::kLengthMismatch);
  MrRef ref;
  if (check_rkey(8, IBV_ACCESS_REMOTE_WRITE, &ref) != KeyCheck::kOk) return fail(RespError::kRkey);
  if ((req_.va | ref.va) % 8 != 0) return fail(RespError::kMisaligned);
  uint64_t value = 0;
  IoCursor c(req_.payload);
  gather_into(&value, c, 8);
  uint64_t unused = 0;
  if (!mem_.atomic(*ref.mr, ref.va, AtomicOp::kStore, 0, value, &unused).is_ok())
    return fail(on_demand(*ref.mr) ? RespError::kPageFault : RespError::kTargetMemory);
  shm::AtomicReplay& slot = st_.atomics[st_.atomic_next++ % shm::kMaxRdAtomic];
  slot.psn = req_.psn;
  slot.original = 0;
  slot.valid = 1;
  advance(req_.packets);
  st_.msn = (st_.msn + 1) & kPsnMask;
  shm::add_single_writer(qp_.counters.received_messages, 1);
  return ack();
}

// IBA 1.5 FLUSH, answered as Linux's rxe answers it (none is ever sent from
// here: rdma-core 44 has no verb for it). The QP must allow the placement
// types asked for and the R_Key grant them, over the RETH's range or, with
// "whole region" selectivity, over its region (the range is then not
// checked). Every store the responder made is visible to the target's CPUs
// once it returned, so global visibility is a fence; no region here is
// persistent memory (ibv_reg_mr refuses FLUSH_PERSISTENT), so a persistence
// flush fails the key check. Like ATOMIC WRITE it takes a responder resource.
Response Responder::on_flush() {
  const uint32_t need = ((req_.flush_placement & wire::Feth::kGlobalVisibility) ? kAccessFlushGlobal : 0) |
                        ((req_.flush_placement & wire::Feth::kPersistence) ? kAccessFlushPersistent : 0);
  if (!reliable_qp(qp_.qp_type) || (qp_.access_flags.load(std::memory_order_relaxed) & need) != need)
    return fail(RespError::kUnsupported);
  uint64_t va = req_.va;
  uint64_t length = req_.dma_length;
  if (req_.flush_selectivity == wire::Feth::kWholeRegion) {
    va = seg_.mr(mr_slot_of_key(req_.rkey)).iova;  // check_key vouches for the key itself
    length = 0;
  }
  MrRef ref;
  if (check_key(seg_, req_.rkey, true, mem_owner_, mem_pd_, qp_.qpn, va, length, need, &ref) != KeyCheck::kOk)
    return fail(RespError::kRkey);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  shm::AtomicReplay& slot = st_.atomics[st_.atomic_next++ % shm::kMaxRdAtomic];
  slot.psn = req_.psn;
  slot.original = 0;
  slot.valid = 1;
  advance(req_.packets);
  st_.msn = (st_.msn + 1) & kPsnMask;
  shm::add_single_writer(qp_.counters.received_messages, 1);
  return ack();
}

// IBA 9.7.5.1.5: duplicates are answered, never executed twice. READs are
// answered again from memory; atomics, ATOMIC WRITEs and FLUSHes from the
// replay ring.
Response Responder::on_duplicate() {
  shm::add_single_writer(qp_.counters.duplicate_requests, 1);
  Response r;
  r.kind = Response::Kind::kDuplicate;
  r.msn = st_.msn;
  if (req_.kind == ReqKind::kRead && req_.dma_length != 0) {
    MrRef ref;
    if (check_rkey(req_.dma_length, IBV_ACCESS_REMOTE_READ, &ref) != KeyCheck::kOk ||
        (on_demand(*ref.mr) && !mem_.fault_in(*ref.mr, ref.va, req_.dma_length, false).is_ok())) {
      r.kind = Response::Kind::kDrop;
      return r;
    }
    r.data_mr = ref.mr;
    r.data_va = ref.va;
  } else if (req_.kind >= ReqKind::kCmpSwap) {  // the atomics, ATOMIC WRITE, FLUSH
    static_assert(ReqKind::kFlush > ReqKind::kAtomicWrite && ReqKind::kAtomicWrite > ReqKind::kFetchAdd &&
                  ReqKind::kFetchAdd > ReqKind::kCmpSwap);
    r.kind = Response::Kind::kDrop;  // C9-… : unknown PSN: drop, let the requester time out
    for (const shm::AtomicReplay& a : st_.atomics)
      if (a.valid && a.psn == req_.psn) {
        r.kind = Response::Kind::kDuplicate;
        r.original = a.original;
      }
  }
  return r;
}

// Dropped before the sender is known to be the QP's one requester: any
// sender may race here, so the counter takes a locked add.
Response Responder::refuse() {
  qp_.counters.received_packets.fetch_add(req_.packets, std::memory_order_relaxed);
  notifier_.port_counters().dropped_requests.fetch_add(1, std::memory_order_relaxed);
  return Response{};
}

bool Responder::pkey_accepted() const {
  if (shm::pkeys_match(req_.pkey, shm::qp_pkey(qp_))) return true;
  // IBA 9.6.1.1: QP1 takes a packet whose P_Key matches any valid entry of
  // its port's table, by the same membership rule (10.9.3). Another CA of a
  // topology keeps its table outside the segment: its QP1 is held to its own.
  return qp_.gsi != 0 && qp_.ca == 0 && shm::pkey_index_matching(seg_.header(), req_.pkey) >= 0;
}

uint16_t Responder::gsi_pkey_index() const {
  const uint16_t own = __atomic_load_n(&qp_.pkey_index, __ATOMIC_RELAXED);
  if (req_.pkey == shm::qp_pkey(qp_) || qp_.ca != 0) return own;
  const shm::SegmentHeader& h = seg_.header();
  // The same key first; else the entry the membership rule matched.
  for (unsigned i = 0; i < shm::kPKeyTableCap; ++i)
    if (h.pkeys.entry[i].load(std::memory_order_relaxed) == req_.pkey) return static_cast<uint16_t>(i);
  const int matched = shm::pkey_index_matching(h, req_.pkey);
  return matched >= 0 ? static_cast<uint16_t>(matched) : own;
}

Response Responder::pkey_violation() {
  shm::count_pkey_violation(seg_.header());
  SV_LOG_RATELIMITED(kDebug, "QP %#x: request with P_Key %#x, the QP's %#x: dropped", req_.dest_qpn,
                     static_cast<unsigned>(req_.pkey), static_cast<unsigned>(shm::qp_pkey(qp_)));
  return Response{};
}

Response Responder::run() {
  // An XRC_SEND QP has no receive side (IBA Annex A14).
  if (!can_receive(qp_, req_.dest_qpn) || qp_.qp_type == IBV_QPT_XRC_SEND) {
    SV_LOG_RATELIMITED(kDebug, "QP %#x: request dropped: state %u", req_.dest_qpn,
                       static_cast<unsigned>(qp_.state.load()));
    return refuse();
  }
  // IBA 10.9.3 (C10-130): a request whose P_Key does not match its QP's is
  // dropped and counted in PortInfo:P_KeyViolations; RC's requester then
  // runs out of retries. Equal keys of a full member are the common case:
  // one compare (shm::fast_pkey); anything else is looked at closely.
  if (static_cast<uint32_t>(req_.pkey) != shm::qp_pkey_fast(qp_)) [[unlikely]] {
    if (!pkey_accepted()) return pkey_violation();
  }
  // A connected QP answers only its peer.
  if (connected_qp(qp_.qp_type) && req_.src_qpn != qp_.dest_qpn) {
    SV_LOG_RATELIMITED(kDebug, "QP %#x: request from QP %#x, connected to %#x: dropped", req_.dest_qpn,
                       req_.src_qpn, qp_.dest_qpn);
    return refuse();
  }
  if (qp_.qp_type == IBV_QPT_UD) {
    qp_.counters.received_packets.fetch_add(req_.packets, std::memory_order_relaxed);  // senders race
    // IBA 10.2.4 / C10-15: a Q_Key that is not the QP's drops the datagram;
    // UD carries SENDs only, each one packet.
    if (req_.qkey != qp_.qkey || req_.kind != ReqKind::kSend || !req_.first || !req_.last) {
      notifier_.port_counters().dropped_requests.fetch_add(1, std::memory_order_relaxed);
      return Response{};
    }
    return on_ud_send();
  }
  // From here on the QP's one connected requester is the only writer (invariant 3).
  shm::add_single_writer(qp_.counters.received_packets, req_.packets);
  if (qp_.requester_qpn != req_.src_qpn) qp_.requester_qpn = req_.src_qpn;
  const bool xrc_ok = qp_.qp_type != IBV_QPT_XRC_RECV || resolve_xrc_srq();
  if (reliable_qp(qp_.qp_type)) {
    const int32_t d = wire::psn_diff(wire::Psn(req_.psn), wire::Psn(st_.epsn));
    if (d < 0) {
      if (xrc_ok) return on_duplicate();
      Response r;  // its SRQ is gone since: nothing to answer from
      return r;
    }
    if (d > 0) return fail(RespError::kPsnAhead);
    st_.psn_nak_sent = 0;
    if (!xrc_ok) {
      SV_LOG_RATELIMITED(kDebug, "QP %#x: XRC SRQ %#x is not of its domain: NAK", req_.dest_qpn, req_.xrc_srqn);
      return fail(RespError::kXrcSrq);
    }
  } else if (!uc_in_sequence()) {
    shm::add_single_writer(qp_.counters.out_of_sequence, 1);
    return Response{};
  }
  // IBA 9.7.4.1.3 (C9-…): opcodes must follow first…middle…last of one kind.
  const bool continues = st_.in_message != 0;
  if (continues != !req_.first ||
      (continues && st_.opcode_family != static_cast<uint32_t>(req_.kind)))
    return fail(RespError::kOpcodeSequence);
  switch (req_.kind) {
    case ReqKind::kSend: return on_send();
    case ReqKind::kWrite: return on_write();
    case ReqKind::kRead: return on_read();
    case ReqKind::kCmpSwap:
    case ReqKind::kFetchAdd: return on_atomic();
    case ReqKind::kAtomicWrite: return on_atomic_write();
    case ReqKind::kFlush: return on_flush();
  }
  return fail(RespError::kUnsupported);
}

}  // namespace

Response respond(shm::Segment& seg, uint32_t qp_slot, const Request& req, TargetMemory& mem, Notifier& notifier) {
  return Responder(seg, qp_slot, req, mem, notifier).run();
}

}  // namespace softverbs::transport
