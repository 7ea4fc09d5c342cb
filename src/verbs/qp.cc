#include "verbs/qp.h"

#include <cerrno>
#include <cstring>
#include <new>

#include "fabric/host/host_fabric.h"
#include "fabric/udp/udp_fabric.h"
#include "shm/limits.h"
#include "shm/process_registry.h"
#include "shm/rings.h"
#include "transport/completer.h"
#include "transport/requester.h"
#include "transport/wr_opcode_table.h"
#include "util/log.h"
#include "util/time.h"
#include "verbs/ah.h"
#include "verbs/context.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/pd.h"
#include "fabric/port_config.h"
#include "verbs/device_attrs.h"
#include "util/raw_enum.h"
#include "verbs/qp_state_table.h"

namespace softverbs::verbs {

using fabric::device_segment_path;
using fabric::local_gid_index;
using fabric::port_config;
using fabric::PortConfig;
namespace {

constexpr uint32_t kPsnMask = 0xffffff;
constexpr uint32_t kMinInline = 256;
constexpr uint32_t kQpnGenShift = shm::kQpSlotBits;
constexpr uint32_t kQpnGenMask = (1u << (24 - shm::kQpSlotBits)) - 1;

Result<uint32_t> claim_qp_slot(shm::Segment& seg) {
  static std::atomic<uint32_t> hint{2};
  shm::ControlLock lock(seg);
  const uint32_t start = hint.load(std::memory_order_relaxed);
  for (uint32_t n = 0; n < shm::kMaxQpSlots; ++n) {
    const uint32_t slot = (start + n) % shm::kMaxQpSlots;
    if (slot < 2) continue;  // QPN 0 and 1 are the special QPs (IBA 10.2.4)
    shm::SharedQp& q = seg.qp(slot);
    if (q.slot_state.load(std::memory_order_relaxed) != static_cast<uint32_t>(shm::SlotState::kFree)) continue;
    // Reset under the lock: a reset outside it would pass through kFree and
    // let another process claim the same slot.
    const uint32_t gen = ((q.qpn >> kQpnGenShift) + 1) & kQpnGenMask;
    new (&q) shm::SharedQp();
    q.qpn = (gen << kQpnGenShift) | slot;
    q.slot_state.store(static_cast<uint32_t>(shm::SlotState::kDead), std::memory_order_relaxed);
    q.dead_since_ns = ~0ull >> 1;  // reserved: a sweep must not free it
    hint.store(slot + 1, std::memory_order_relaxed);
    return slot;
  }
  return Status::error(ENOMEM);
}

bool valid_mtu(int mtu) { return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096; }

}  // namespace

Result<Qp*> Qp::create(Context* ctx, ibv_qp_init_attr_ex* a) {
  if (a == nullptr) return Status::error(EINVAL);
  constexpr uint32_t kKnownMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  if ((a->comp_mask & ~kKnownMask) != 0) return Status::error(EOPNOTSUPP);
  if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags != 0) return Status::error(EOPNOTSUPP);
  if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || a->pd == nullptr || a->pd->context != ctx->ibv())
    return Status::error(EINVAL);
  if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD)
    return Status::error(EOPNOTSUPP);  // XRC, raw packet, driver QPs
  if (a->srq != nullptr) return Status::error(EOPNOTSUPP);
  if (a->send_cq == nullptr || a->recv_cq == nullptr || a->send_cq->context != ctx->ibv() ||
      a->recv_cq->context != ctx->ibv())
    return Status::error(EINVAL);
  ibv_qp_cap& cap = a->cap;
  if (cap.max_send_wr > shm::kMaxQpWr || cap.max_recv_wr > shm::kMaxQpWr || cap.max_send_sge > shm::kMaxSge ||
      cap.max_recv_sge > shm::kMaxSge || cap.max_inline_data > shm::kMaxInlineData)
    return Status::error(EINVAL);
  if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    constexpr uint64_t kOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                              IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                              IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    if ((a->send_ops_flags & ~kOps) != 0) return Status::error(EOPNOTSUPP);
  }

  Device& dev = ctx->device();
  shm::Segment& seg = dev.seg();
  auto* qp = new (std::nothrow) Qp();
  if (qp == nullptr) return Status::error(ENOMEM);
  const uint32_t max_send_wr = cap.max_send_wr == 0 ? 1 : cap.max_send_wr;
  const uint32_t max_inline = std::max(cap.max_inline_data, kMinInline);
  const uint32_t max_send_sge = std::max(cap.max_send_sge, 1u);
  const uint32_t max_recv_sge = std::max(cap.max_recv_sge, 1u);
  if (!qp->side_.sq.init(max_send_wr, max_send_sge, max_inline)) {
    delete qp;
    return Status::error(ENOMEM);
  }
  uint32_t rq_capacity = 1;
  while (rq_capacity < std::max(cap.max_recv_wr, 1u)) rq_capacity <<= 1;
  const uint32_t stride = shm::rq_stride_for(max_recv_sge);
  Result<shm::Offset> ring = seg.arena_alloc(static_cast<uint64_t>(rq_capacity) * stride);
  if (!ring.is_ok()) {
    delete qp;
    return ring.status();
  }
  Result<uint32_t> slot = claim_qp_slot(seg);
  if (!slot.is_ok()) {
    seg.arena_free(ring.value(), static_cast<uint64_t>(rq_capacity) * stride);
    delete qp;
    return slot.status();
  }
  qp->ctx_ = ctx;
  qp->pd_ = Pd::from(a->pd);
  qp->send_cq_ = Cq::from(a->send_cq);
  qp->recv_cq_ = Cq::from(a->recv_cq);
  qp->slot_ = slot.value();
  shm::SharedQp& s = seg.qp(qp->slot_);
  qp->shared_ = &s;
  s.owner = dev.self();
  s.qp_type = static_cast<uint8_t>(a->qp_type);
  s.state.store(IBV_QPS_RESET);
  s.port_num = 1;
  s.path_mtu = IBV_MTU_4096;
  s.pd_id = qp->pd_->id;
  s.recv_cq = qp->recv_cq_->slot();
  s.send_cq = qp->send_cq_->slot();
  s.sq_sig_all = a->sq_sig_all != 0;
  s.rq.ring = ring.value();
  s.rq.capacity = rq_capacity;
  s.rq.stride = stride;
  s.rq.max_sge = max_recv_sge;
  s.dead_since_ns = 0;
  s.slot_state.store(static_cast<uint32_t>(shm::SlotState::kLive), std::memory_order_release);

  transport::SendSide& side = qp->side_;
  side.seg = &seg;
  side.shared = &s;
  side.qp_slot = qp->slot_;
  side.qpn = s.qpn;
  side.qp_type = s.qp_type;
  side.pd_id = s.pd_id;
  side.send_cq = s.send_cq;
  side.sig_all = s.sq_sig_all;
  side.max_sge = max_send_sge;
  side.max_inline = max_inline;
  side.notifier = &dev;
  side.timers = &dev;
  side.self = dev.self();

  ibv_qp& q = qp->ex_.qp_base;
  q.context = ctx->ibv();
  q.qp_context = a->qp_context;
  q.pd = a->pd;
  q.send_cq = a->send_cq;
  q.recv_cq = a->recv_cq;
  q.srq = nullptr;
  q.handle = qp->slot_;
  q.qp_num = s.qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = a->qp_type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  qp->ex_.comp_mask = 0;

  cap.max_send_wr = max_send_wr;
  cap.max_recv_wr = rq_capacity;
  cap.max_send_sge = max_send_sge;
  cap.max_recv_sge = max_recv_sge;
  cap.max_inline_data = max_inline;
  qp->init_.qp_context = a->qp_context;
  qp->init_.send_cq = a->send_cq;
  qp->init_.recv_cq = a->recv_cq;
  qp->init_.cap = cap;
  qp->init_.qp_type = a->qp_type;
  qp->init_.sq_sig_all = a->sq_sig_all;
  qp->attr_.qp_state = IBV_QPS_RESET;
  qp->attr_.path_mtu = IBV_MTU_4096;
  qp->attr_.port_num = 1;
  qp->attr_.cap = cap;

  qp->send_cq_->users().fetch_add(1);
  qp->recv_cq_->users().fetch_add(1);
  qp->pd_->users.fetch_add(1);
  dev.add_qp(qp->slot_, qp);
  return qp;
}

Status Qp::validate_attrs(const ibv_qp_attr& a, int mask, ibv_qp_state cur, ibv_qp_state next) {
  SV_RETURN_IF_ERROR(check_qp_transition(static_cast<ibv_qp_type>(shared_->qp_type), cur, next, mask));
  if ((mask & IBV_QP_PORT) && a.port_num != 1) return Status::error(EINVAL);
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index != 0) return Status::error(EINVAL);  // one P_Key
  if ((mask & IBV_QP_PATH_MTU) && (!valid_mtu(static_cast<int>(util::raw_enum(a.path_mtu))) ||
                                   util::raw_enum(a.path_mtu) > static_cast<unsigned>(port_config().mtu)))
    return Status::error(EINVAL);
  if ((mask & IBV_QP_PATH_MIG_STATE) && util::raw_enum(a.path_mig_state) > IBV_MIG_ARMED) return Status::error(EINVAL);
  if ((mask & IBV_QP_DEST_QPN) && a.dest_qp_num > kPsnMask) return Status::error(EINVAL);
  if ((mask & IBV_QP_RQ_PSN) && a.rq_psn > kPsnMask) return Status::error(EINVAL);
  if ((mask & IBV_QP_SQ_PSN) && a.sq_psn > kPsnMask) return Status::error(EINVAL);
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return Status::error(EINVAL);
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return Status::error(EINVAL);
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return Status::error(EINVAL);
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return Status::error(EINVAL);
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > shm::kMaxRdAtomic) return Status::error(EINVAL);
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > shm::kMaxRdAtomic) return Status::error(EINVAL);
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (a.qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC)) != 0)
    return Status::error(EINVAL);
  if (mask & IBV_QP_AV) {
    const ibv_ah_attr& ah = a.ah_attr;
    if (ah.port_num != 1) return Status::error(EINVAL);
    if (ah.is_global && ah.grh.sgid_index >= port_gid_count()) return Status::error(EINVAL);
    // An Ethernet port has no LIDs: RoCE addresses are GIDs (IBA A17.4).
    if (port_config().roce && !ah.is_global) return Status::error(EINVAL);
    if (!ah.is_global && ah.dlid == 0) return Status::error(EINVAL);
  }
  if ((mask & IBV_QP_ALT_PATH) || (mask & IBV_QP_PATH_MIG_STATE)) return Status::error(EOPNOTSUPP);  // no APM
  return Status::ok();
}

// The fabric that carries this QP's requests, from its address at RTR: QPs of
// this host's device through shared memory, other hosts over RoCEv2. A UD QP
// has no address of its own: on RoCE the UDP fabric takes its WRs and hands
// those for this host to the host fabric.
Result<fabric::Fabric*> Qp::choose_fabric(const ibv_ah_attr& ah) {
  const PortConfig& config = port_config();
  const bool ud = shared_->qp_type == IBV_QPT_UD;
  if (!config.roce || (!ud && local_gid_index(ah.grh.dgid.raw) >= 0)) return &fabric::host::host_fabric();
  fabric::udp::UdpFabric& udp = fabric::udp::udp_fabric();
  SV_RETURN_IF_ERROR(udp.start(ctx_->device(), config.gids, config.udp_port));
  return &udp;
}

void Qp::apply(const ibv_qp_attr& a, int mask, ibv_qp_state next, fabric::Fabric* rtr_fabric) {
  std::lock_guard lock(side_.lock);
  shm::SharedQp& s = *shared_;
  if (next == IBV_QPS_RESET) {
    // IBA 10.3.1: Reset discards every WQE and all transport state.
    side_.sq.posted = side_.sq.next = side_.sq.done = 0;
    side_.wait_until = 0;
    side_.ack_timeout = false;
    side_.fabric = nullptr;
    // Discard by moving head up to tail: indices stay monotonic, so an entry
    // posted before the reset can never match a later index's seq.
    const uint64_t rq_tail = s.rq.tail.load();
    s.rq.head.store(rq_tail);
    s.rq.head_seen.store(rq_tail);
    std::memset(static_cast<void*>(&s.resp), 0, sizeof s.resp);
    const ibv_qp_cap cap = attr_.cap;
    attr_ = ibv_qp_attr{};
    attr_.cap = cap;
    attr_.path_mtu = IBV_MTU_4096;
    attr_.port_num = 1;
  }
  if (mask & IBV_QP_PKEY_INDEX) attr_.pkey_index = a.pkey_index, s.pkey_index = a.pkey_index;
  if (mask & IBV_QP_PORT) attr_.port_num = a.port_num, s.port_num = a.port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) {
    attr_.qp_access_flags = a.qp_access_flags;
    s.access_flags.store(a.qp_access_flags, std::memory_order_relaxed);
  }
  if (mask & IBV_QP_QKEY) attr_.qkey = a.qkey, s.qkey = a.qkey;
  if (mask & IBV_QP_AV) {
    attr_.ah_attr = a.ah_attr;
    side_.ah = a.ah_attr;
    s.dlid = a.ah_attr.dlid;
  }
  if (mask & IBV_QP_PATH_MTU) attr_.path_mtu = a.path_mtu, side_.path_mtu = a.path_mtu, s.path_mtu = a.path_mtu;
  if (mask & IBV_QP_DEST_QPN) attr_.dest_qp_num = a.dest_qp_num, side_.dest_qpn = a.dest_qp_num,
                              s.dest_qpn = a.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) attr_.rq_psn = a.rq_psn, s.resp.epsn = a.rq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic,
                                        s.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) {
    attr_.min_rnr_timer = a.min_rnr_timer;
    s.min_rnr_timer.store(a.min_rnr_timer, std::memory_order_relaxed);
  }
  if (mask & IBV_QP_SQ_PSN) attr_.sq_psn = a.sq_psn, side_.sq_psn = a.sq_psn;
  if (mask & IBV_QP_TIMEOUT) attr_.timeout = a.timeout, side_.timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) attr_.retry_cnt = a.retry_cnt, side_.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) attr_.rnr_retry = a.rnr_retry, side_.rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) attr_.max_rd_atomic = a.max_rd_atomic, side_.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) attr_.en_sqd_async_notify = a.en_sqd_async_notify;
  if (rtr_fabric != nullptr) {
    side_.fabric = rtr_fabric;
    send_cq_->receive_through(rtr_fabric);
    recv_cq_->receive_through(rtr_fabric);
  }
  if (next == IBV_QPS_RTS) {
    side_.retries_left = side_.retry_cnt;
    side_.rnr_left = side_.rnr_retry;
  }
  attr_.qp_state = next;
  attr_.cur_qp_state = next;
  s.state.store(static_cast<uint8_t>(next), std::memory_order_release);
  ex_.qp_base.state = next;
  if (next == IBV_QPS_ERR) enter_error_locked();
  if (next == IBV_QPS_RTS) transport::progress(side_);
}

void Qp::enter_error_locked() {
  // IBA 10.3.1 / 11.3: in Error every outstanding WR completes with flush status.
  transport::flush_send_queue(side_);
  transport::flush_recv_queue(ctx_->device().seg(), slot_, ctx_->device());
}

Status Qp::modify(const ibv_qp_attr& a, int mask) {
  std::lock_guard lock(modify_mu_);
  const auto cur = static_cast<ibv_qp_state>(shared_->state.load(std::memory_order_acquire));
  if ((mask & IBV_QP_CUR_STATE) && util::raw_enum(a.cur_qp_state) != static_cast<unsigned>(cur))
    return Status::error(EINVAL);
  ibv_qp_state next = cur;
  if (mask & IBV_QP_STATE) {
    const auto requested = util::raw_enum(a.qp_state);
    if (requested > IBV_QPS_ERR) return Status::error(EINVAL);
    next = static_cast<ibv_qp_state>(requested);
  }
  SV_RETURN_IF_ERROR(validate_attrs(a, mask, cur, next));
  fabric::Fabric* rtr_fabric = nullptr;
  if (next == IBV_QPS_RTR && cur != IBV_QPS_RTR) {
    Result<fabric::Fabric*> f = choose_fabric((mask & IBV_QP_AV) ? a.ah_attr : attr_.ah_attr);
    if (!f.is_ok()) return f.status();
    rtr_fabric = f.value();
  }
  apply(a, mask, next, rtr_fabric);
  if (next == IBV_QPS_SQD && cur == IBV_QPS_RTS && (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && a.en_sqd_async_notify) {
    // The host fabric has nothing in flight once post_send returns: drained now.
    events_reported_.fetch_add(1);
    ctx_->raise_async(IBV_EVENT_SQ_DRAINED, AsyncObject::kQp, this);
  }
  return Status::ok();
}

Status Qp::query(ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  if (attr == nullptr || init == nullptr) return Status::error(EINVAL);
  std::lock_guard lock(modify_mu_);
  *attr = attr_;
  attr->qp_state = static_cast<ibv_qp_state>(shared_->state.load(std::memory_order_acquire));
  attr->cur_qp_state = attr->qp_state;
  {
    std::lock_guard sl(side_.lock);
    attr->sq_psn = side_.sq_psn;
    attr->sq_draining = 0;
  }
  attr->rq_psn = shared_->resp.epsn;
  *init = init_;
  return Status::ok();
}

[[gnu::always_inline]] inline int Qp::check_wr(const ibv_send_wr& wr, uint64_t* length) const {
  const auto raw_opcode = util::raw_enum(wr.opcode);
  if (raw_opcode > IBV_WR_ATOMIC_WRITE) return EINVAL;
  const transport::WrOpcodeInfo* op = transport::wr_opcode(static_cast<ibv_wr_opcode>(raw_opcode));
  if (op == nullptr || !transport::wr_allowed(*op, side_.qp_type)) return EINVAL;
  if (wr.num_sge < 0 || static_cast<uint32_t>(wr.num_sge) > side_.max_sge) return EINVAL;
  if (wr.num_sge > 0 && wr.sg_list == nullptr) return EINVAL;
  const bool is_inline = (wr.send_flags & IBV_SEND_INLINE) != 0;
  const bool atomic = op->kind == transport::ReqKind::kCmpSwap || op->kind == transport::ReqKind::kFetchAdd;
  if (is_inline && (op->kind != transport::ReqKind::kSend && op->kind != transport::ReqKind::kWrite)) return EINVAL;
  if (atomic && wr.num_sge < 1) return EINVAL;
  if (side_.sq.full()) return ENOMEM;
  uint64_t total = 0;
  for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
  if (is_inline && total > side_.max_inline) return EINVAL;
  if (side_.qp_type == IBV_QPT_UD && (wr.wr.ud.ah == nullptr || wr.wr.ud.ah->context != ex_.qp_base.context))
    return EINVAL;
  *length = atomic ? 8 : total;
  return 0;
}

[[gnu::always_inline]] inline void Qp::enqueue(const ibv_send_wr& wr, uint64_t length, uint32_t placed) {
  const transport::WrOpcodeInfo* op = transport::wr_opcode(wr.opcode);
  const bool atomic = op->kind == transport::ReqKind::kCmpSwap || op->kind == transport::ReqKind::kFetchAdd;
  transport::SendWqe& w = side_.sq.at(side_.sq.posted);
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.send_flags = wr.send_flags;
  w.imm_data = op->has_imm ? wr.imm_data : 0;
  w.packets = 0;
  w.responses = 0;
  w.psn = 0;
  w.placed = placed;
  w.ah = nullptr;
  if (side_.qp_type == IBV_QPT_UD) {
    w.ah = &Ah::from(wr.wr.ud.ah)->attr;
    w.remote_qpn = wr.wr.ud.remote_qpn & kPsnMask;
    w.remote_qkey = wr.wr.ud.remote_qkey;
  }
  if (op->remote) {
    w.remote_addr = atomic ? wr.wr.atomic.remote_addr : wr.wr.rdma.remote_addr;
    w.rkey = atomic ? wr.wr.atomic.rkey : wr.wr.rdma.rkey;
  }
  w.compare_add = atomic ? wr.wr.atomic.compare_add : 0;
  w.swap = atomic ? wr.wr.atomic.swap : 0;
  if (wr.send_flags & IBV_SEND_INLINE) {
    // Inline data is copied now, so the buffer is free once post_send returns.
    uint8_t* dst = w.inline_data();
    for (int i = 0; i < wr.num_sge; ++i) {
      std::memcpy(dst, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
      dst += wr.sg_list[i].length;
    }
    w.inline_len = static_cast<uint32_t>(length);
    w.num_sge = 0;
  } else {
    w.inline_len = 0;
    w.num_sge = static_cast<uint32_t>(wr.num_sge);
    for (int i = 0; i < wr.num_sge; ++i) w.sge[i] = {wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  }
  w.length = length;
  ++side_.sq.posted;
}

// A peer waiting for this WR polls the line it lands in (a WRITE's
// destination, a SEND's receive completion), so that line is in the peer's
// cache: ask for it now, and the transfer overlaps the lock and the checks
// instead of following them. The addresses are the last WR's (SendSide's
// hints, read without the lock): a wrong one costs a useless prefetch.
void Qp::prefetch_landing(const ibv_send_wr& wr) {
  // Not yet checked: the opcode may be no ibv_wr_opcode at all.
  const auto opcode = util::raw_enum(wr.opcode);
  if (opcode == IBV_WR_RDMA_WRITE) {
    if (wr.wr.rdma.rkey == side_.write_hint_rkey.load(std::memory_order_relaxed))
      shm::prefetch_for_write(reinterpret_cast<const void*>(
          wr.wr.rdma.remote_addr + static_cast<uint64_t>(side_.write_hint_delta.load(std::memory_order_relaxed))));
  } else if (opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    if (const uintptr_t cqe = side_.recv_cqe_hint.load(std::memory_order_relaxed))
      shm::prefetch_for_write(reinterpret_cast<const void*>(cqe));
  }
}

int Qp::post_send(ibv_send_wr* wr, ibv_send_wr** bad) {
  if (bad != nullptr) *bad = nullptr;
  if (wr == nullptr) return EINVAL;
  prefetch_landing(*wr);
  std::lock_guard lock(side_.lock);
  const uint8_t state = shared_->state.load(std::memory_order_acquire);
  // IBA 11.4.1.1: no posting to the send queue before RTS; in Error WRs are
  // accepted and complete with flush status.
  int rc = (state == IBV_QPS_RESET || state == IBV_QPS_INIT || state == IBV_QPS_RTR) ? EINVAL : 0;
  while (rc == 0 && wr != nullptr) {
    uint64_t length = 0;
    rc = check_wr(*wr, &length);
    if (rc != 0) break;
    // A lone WRITE on an idle queue may be placed first, bookkeeping after:
    // a peer polling its buffer for the data then does not wait for the rest.
    const uint32_t placed = wr->opcode == IBV_WR_RDMA_WRITE && wr->next == nullptr &&
                                    side_.sq.done == side_.sq.posted && side_.fabric != nullptr
                                ? side_.fabric->place_at_post(side_, *wr, length)
                                : 0;
    enqueue(*wr, length, placed);
    wr = wr->next;
  }
  // ibv_post_send(3): bad_wr names the first WR that was not posted.
  if (rc != 0 && bad != nullptr) *bad = wr;
  transport::progress(side_);
  return rc;
}

int Qp::post_recv(ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (bad != nullptr) *bad = nullptr;
  if (wr == nullptr) return EINVAL;
  const uint8_t state = shared_->state.load(std::memory_order_acquire);
  if (state == IBV_QPS_RESET) {
    if (bad != nullptr) *bad = wr;
    return EINVAL;
  }
  shm::Segment& seg = ctx_->device().seg();
  int rc = 0;
  {
    std::lock_guard lock(rq_mu_);
    shm::Sge sge[shm::kMaxSge];
    for (; wr != nullptr; wr = wr->next) {
      if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > shared_->rq.max_sge ||
          (wr->num_sge > 0 && wr->sg_list == nullptr)) {
        rc = EINVAL;
        break;
      }
      for (int i = 0; i < wr->num_sge; ++i) sge[i] = {wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
      if (!shm::rq_post(seg, shared_->rq, wr->wr_id, sge, static_cast<uint32_t>(wr->num_sge))) {
        rc = ENOMEM;
        break;
      }
    }
  }
  if (rc != 0 && bad != nullptr) *bad = wr;
  if (shared_->state.load(std::memory_order_acquire) == IBV_QPS_ERR)
    transport::flush_recv_queue(seg, slot_, ctx_->device());
  return rc;
}

void Qp::wr_start() {
  side_.lock.lock();
  wr_building_ = 0;
  wr_current_ = nullptr;
  wr_error_ = 0;
}

transport::SendWqe* Qp::wr_begin(ibv_wr_opcode opcode) {
  wr_current_ = nullptr;
  if (wr_error_ != 0) return nullptr;
  const transport::WrOpcodeInfo* op = transport::wr_opcode(opcode);
  if (op == nullptr || !transport::wr_allowed(*op, side_.qp_type)) {
    wr_error_ = EINVAL;
    return nullptr;
  }
  if (side_.sq.posted + wr_building_ - side_.sq.done >= side_.sq.max_wr()) {
    wr_error_ = ENOMEM;
    return nullptr;
  }
  transport::SendWqe& w = side_.sq.at(side_.sq.posted + wr_building_);
  ++wr_building_;
  std::memset(static_cast<void*>(&w), 0, sizeof w);
  w.wr_id = ex_.wr_id;
  w.opcode = opcode;
  w.send_flags = ex_.wr_flags;
  wr_current_ = &w;
  return &w;
}

void Qp::wr_set_sges(const ibv_sge* sge, size_t n) {
  transport::SendWqe* w = wr_current_;
  if (w == nullptr) return;
  if (n > side_.max_sge || (n > 0 && sge == nullptr)) {
    wr_error_ = EINVAL;
    return;
  }
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w->opcode);
  const bool atomic = op->kind == transport::ReqKind::kCmpSwap || op->kind == transport::ReqKind::kFetchAdd;
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    w->sge[i] = {sge[i].addr, sge[i].length, sge[i].lkey};
    total += sge[i].length;
  }
  w->num_sge = static_cast<uint32_t>(n);
  w->inline_len = 0;
  w->send_flags &= ~static_cast<uint32_t>(IBV_SEND_INLINE);
  w->length = atomic ? 8 : total;
}

void Qp::wr_set_ud_addr(ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  transport::SendWqe* w = wr_current_;
  if (w == nullptr) return;
  if (side_.qp_type != IBV_QPT_UD || ah == nullptr || ah->context != ex_.qp_base.context) {
    wr_error_ = EINVAL;
    return;
  }
  w->ah = &Ah::from(ah)->attr;
  w->remote_qpn = remote_qpn & kPsnMask;
  w->remote_qkey = remote_qkey;
}

void Qp::wr_set_inline(const ibv_data_buf* bufs, size_t n) {
  transport::SendWqe* w = wr_current_;
  if (w == nullptr) return;
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += bufs[i].length;
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w->opcode);
  if (total > side_.max_inline || (op->kind != transport::ReqKind::kSend && op->kind != transport::ReqKind::kWrite)) {
    wr_error_ = EINVAL;
    return;
  }
  uint8_t* dst = w->inline_data();
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(dst, bufs[i].addr, bufs[i].length);
    dst += bufs[i].length;
  }
  w->inline_len = static_cast<uint32_t>(total);
  w->num_sge = 0;
  w->send_flags |= IBV_SEND_INLINE;
  w->length = total;
}

int Qp::wr_complete() {
  int rc = wr_error_;
  const uint8_t state = shared_->state.load(std::memory_order_acquire);
  if (rc == 0 && (state == IBV_QPS_RESET || state == IBV_QPS_INIT || state == IBV_QPS_RTR)) rc = EINVAL;
  for (uint64_t i = 0; rc == 0 && side_.qp_type == IBV_QPT_UD && i < wr_building_; ++i)
    if (side_.sq.at(side_.sq.posted + i).ah == nullptr) rc = EINVAL;  // ibv_wr_set_ud_addr never called
  if (rc == 0) {
    side_.sq.posted += wr_building_;
    transport::progress(side_);
  }
  wr_building_ = 0;
  wr_current_ = nullptr;
  side_.lock.unlock();
  return rc;
}

void Qp::wr_abort() {
  wr_building_ = 0;
  wr_current_ = nullptr;
  side_.lock.unlock();
}

void Qp::on_timer() {
  std::lock_guard lock(side_.lock);
  transport::on_timer(side_);
}

void Qp::on_remote_event(uint64_t bits) {
  if (bits & transport::kQpFlushRequest) {
    std::lock_guard lock(side_.lock);
    ex_.qp_base.state = IBV_QPS_ERR;
    enter_error_locked();
  }
  for (int e = 0; e < 32; ++e) {
    if ((bits & (1ull << e)) == 0) continue;
    events_reported_.fetch_add(1);
    ctx_->raise_async(static_cast<ibv_event_type>(e), AsyncObject::kQp, this);
  }
}

void Qp::ack_async_event() {
  pthread_mutex_lock(&ex_.qp_base.mutex);
  ++ex_.qp_base.events_completed;
  pthread_cond_signal(&ex_.qp_base.cond);
  pthread_mutex_unlock(&ex_.qp_base.mutex);
}

Status Qp::destroy() {
  Device& dev = ctx_->device();
  dev.remove_qp(slot_);  // from now on the service thread does not call us
  // ibv_destroy_qp(3): wait until every async event reported for it is acknowledged.
  pthread_mutex_lock(&ex_.qp_base.mutex);
  while (ex_.qp_base.events_completed != events_reported_.load())
    pthread_cond_wait(&ex_.qp_base.cond, &ex_.qp_base.mutex);
  pthread_mutex_unlock(&ex_.qp_base.mutex);
  {
    std::lock_guard lock(side_.lock);
    shared_->state.store(IBV_QPS_ERR, std::memory_order_release);
    shm::fold_port_share(shared_->counters, dev.port_counters());
  }
  shm::mark_dead(dev.seg(), *shared_, now_ns());
  send_cq_->users().fetch_sub(1);
  recv_cq_->users().fetch_sub(1);
  pd_->users.fetch_sub(1);
  pthread_mutex_destroy(&ex_.qp_base.mutex);
  pthread_cond_destroy(&ex_.qp_base.cond);
  delete this;
  return Status::ok();
}

}  // namespace softverbs::verbs
