#include "verbs/qp.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <new>

#include "fabric/fabrics.h"
#include "shm/slot_high_water.h"
#include "shm/limits.h"
#include "shm/port_pkeys.h"
#include "shm/process_registry.h"
#include "shm/qp_pkeys.h"
#include "shm/rings.h"
#include "shm/slot_reset.h"
#include "transport/completer.h"
#include "transport/mtu.h"
#include "transport/requester.h"
#include "transport/responder.h"
#include "transport/wr_opcode_table.h"
#include "util/log.h"
#include "util/time.h"
#include "util/tsan.h"
#include "verbs/ah.h"
#include "verbs/context.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mw.h"
#include "verbs/pd.h"
#include "verbs/port_config.h"
#include "verbs/device_attrs.h"
#include "util/raw_enum.h"
#include "verbs/qp_state_table.h"
#include "verbs/recv_post.h"
#include "verbs/srq.h"
#include "verbs/xrcd.h"

namespace softverbs::verbs {

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
    uint32_t gen = ((q.qpn >> kQpnGenShift) + 1) & kQpnGenMask;
    // IBA 10.5.2.5: QPN 0xFFFFFF is every multicast datagram's DestQP.
    if (((gen << kQpnGenShift) | slot) == 0xffffff) gen = 0;
    shm::reset_slot_after_state(q);
    shm::raise_high_water(seg.header().high_water.qps, slot);
    q.qpn = (gen << kQpnGenShift) | slot;
    // Reserved: a sweep must not free it. The time first, then the state
    // with release: a sweep reads the time only after seeing kDead.
    q.dead_since_ns = ~0ull >> 1;
    q.slot_state.store(static_cast<uint32_t>(shm::SlotState::kDead), std::memory_order_release);
    hint.store(slot + 1, std::memory_order_relaxed);
    return slot;
  }
  return Status::error(ENOMEM);
}

bool valid_mtu(int mtu) { return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096; }

}  // namespace

// IBV_QP_EX_WITH_<op> is bit <op> of ibv_wr_opcode: create() checks the
// send_ops_flags against the WR opcode table through that.
static_assert(IBV_QP_EX_WITH_RDMA_WRITE == 1u << IBV_WR_RDMA_WRITE &&
              IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM == 1u << IBV_WR_RDMA_WRITE_WITH_IMM &&
              IBV_QP_EX_WITH_SEND == 1u << IBV_WR_SEND && IBV_QP_EX_WITH_SEND_WITH_IMM == 1u << IBV_WR_SEND_WITH_IMM &&
              IBV_QP_EX_WITH_RDMA_READ == 1u << IBV_WR_RDMA_READ &&
              IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP == 1u << IBV_WR_ATOMIC_CMP_AND_SWP &&
              IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD == 1u << IBV_WR_ATOMIC_FETCH_AND_ADD);

namespace {
// ...but for ATOMIC WRITE, whose flag came after TSO and FLUSH took bits.
uint32_t wr_opcode_of_send_op(int bit) {
  if (bit == std::countr_zero(static_cast<uint64_t>(IBV_QP_EX_WITH_ATOMIC_WRITE))) return IBV_WR_ATOMIC_WRITE;
  return static_cast<uint32_t>(bit);
}
}  // namespace

Result<Qp*> Qp::create(Context* ctx, ibv_qp_init_attr_ex* a) {
  if (a == nullptr) return Status::error(EINVAL);
  constexpr uint32_t kKnownMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
                                  IBV_QP_INIT_ATTR_CREATE_FLAGS;
  if ((a->comp_mask & ~kKnownMask) != 0) return Status::error(EOPNOTSUPP);
  // Of the creation flags: the one that keeps a UD QP's multicasts from
  // itself (as mlx5 does; without it a QP attached to the group receives its
  // own sends, as on mlx4/mlx5 by default), and a source QPN of 1 for a UD
  // QP: the process's GSI agent (the RDMA CM's), whose datagrams leave as
  // QP1's and to which QP1's are routed (src/shm/gsi_table.h).
  const uint32_t create_flags = (a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) ? a->create_flags : 0;
  constexpr uint32_t kKnownFlags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SOURCE_QPN;
  if ((create_flags & ~kKnownFlags) != 0 || (create_flags != 0 && a->qp_type != IBV_QPT_UD))
    return Status::error(EOPNOTSUPP);
  const bool gsi_agent = (create_flags & IBV_QP_CREATE_SOURCE_QPN) != 0;
  if (gsi_agent && a->source_qpn != 1) return Status::error(EINVAL);
  const ibv_qp_type type = a->qp_type;
  if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD && type != IBV_QPT_XRC_SEND &&
      type != IBV_QPT_XRC_RECV)
    return Status::error(EOPNOTSUPP);  // raw packet, driver QPs
  // IBA Annex A14: an XRC_RECV QP belongs to a domain and has no PD, CQ or
  // send queue; an XRC_SEND QP has a PD and a send queue only.
  const bool xrc_recv = type == IBV_QPT_XRC_RECV;
  const bool xrc = xrc_recv || type == IBV_QPT_XRC_SEND;
  Xrcd* xrcd = nullptr;
  if (xrc_recv) {
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || a->xrcd == nullptr || a->xrcd->context != ctx->ibv())
      return Status::error(EINVAL);
    xrcd = Xrcd::from(a->xrcd);
  } else if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || a->pd == nullptr || a->pd->context != ctx->ibv()) {
    return Status::error(EINVAL);
  }
  // An SRQ of this context (QPs of one process share it); RC, UC and UD take from one.
  if (a->srq != nullptr && (xrc || a->srq->context != ctx->ibv())) return Status::error(EINVAL);
  Srq* srq = a->srq != nullptr ? Srq::from(a->srq) : nullptr;
  const bool needs_send_cq = !xrc_recv;
  const bool needs_recv_cq = !xrc;
  if ((needs_send_cq && (a->send_cq == nullptr || a->send_cq->context != ctx->ibv())) ||
      (needs_recv_cq && (a->recv_cq == nullptr || a->recv_cq->context != ctx->ibv())))
    return Status::error(EINVAL);
  ibv_qp_cap& cap = a->cap;
  // ibv_create_qp(3): with an SRQ, max_recv_wr and max_recv_sge are ignored;
  // XRC QPs have no receive queue, and an XRC_RECV QP no send queue.
  if (srq != nullptr || xrc) cap.max_recv_wr = cap.max_recv_sge = 0;
  if (xrc_recv) cap.max_send_wr = cap.max_send_sge = cap.max_inline_data = 0;
  if (cap.max_send_wr > shm::kMaxQpWr || cap.max_recv_wr > shm::kMaxQpWr || cap.max_send_sge > shm::kMaxSge ||
      cap.max_recv_sge > shm::kMaxSge || cap.max_inline_data > shm::kMaxInlineData)
    return Status::error(EINVAL);
  if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    constexpr uint64_t kOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                              IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                              IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                              IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |
                              IBV_QP_EX_WITH_ATOMIC_WRITE;
    if ((a->send_ops_flags & ~kOps) != 0) return Status::error(EOPNOTSUPP);
    // An operation the QP's transport lacks (IBA Table 37: UC has no READ and
    // no atomics, UD only SENDs; ATOMIC WRITE is RC's alone) is not supported
    // on it, as mlx5 answers.
    for (uint64_t ops = a->send_ops_flags; ops != 0; ops &= ops - 1) {
      const transport::WrOpcodeInfo* op = transport::wr_opcode(wr_opcode_of_send_op(std::countr_zero(ops)));
      if (op == nullptr || !transport::wr_allowed(*op, static_cast<uint8_t>(a->qp_type)))
        return Status::error(EOPNOTSUPP);
    }
  }

  Device& dev = ctx->device();
  shm::Segment& seg = dev.seg();
  auto* qp = new (std::nothrow) Qp();
  if (qp == nullptr) return Status::error(ENOMEM);
  const uint32_t max_send_wr = cap.max_send_wr == 0 ? 1 : cap.max_send_wr;
  const uint32_t max_inline = std::max(cap.max_inline_data, kMinInline);
  const uint32_t max_send_sge = std::max(cap.max_send_sge, 1u);
  // A parent domain's allocator supplies the send queue (pd.h).
  Pd* pd = xrc_recv ? nullptr : Pd::from(a->pd);
  transport::QueueMemory from_parent;
  if (pd != nullptr && pd->alloc != nullptr) {
    from_parent.allocate = [](void* owner, size_t size, size_t alignment) {
      auto* p = static_cast<Pd*>(owner);
      return p->alloc(&p->ibv, p->pd_context, size, alignment, kSendQueueResource);
    };
    from_parent.release = [](void* owner, void* mem) {
      auto* p = static_cast<Pd*>(owner);
      p->free(&p->ibv, p->pd_context, mem, kSendQueueResource);
    };
    from_parent.owner = pd;
    from_parent.use_default = IBV_ALLOCATOR_USE_DEFAULT;
  }
  if (!qp->side_.sq.init(max_send_wr, max_send_sge, max_inline, &from_parent)) {
    delete qp;
    return Status::error(ENOMEM);
  }
  // A QP on an SRQ, or of XRC, has no receive queue of its own: no ring, capacity 0.
  const bool no_rq = srq != nullptr || xrc;
  const uint32_t max_recv_sge = no_rq ? 0 : std::max(cap.max_recv_sge, 1u);
  uint32_t rq_capacity = no_rq ? 0 : 1;
  while (!no_rq && rq_capacity < std::max(cap.max_recv_wr, 1u)) rq_capacity <<= 1;
  const uint32_t stride = no_rq ? 0 : shm::rq_stride_for(max_recv_sge);
  const uint64_t ring_bytes = static_cast<uint64_t>(rq_capacity) * stride;
  shm::Offset ring = 0;
  if (ring_bytes != 0) {
    Result<shm::Offset> r = seg.arena_alloc(ring_bytes);
    if (!r.is_ok()) {
      delete qp;
      return r.status();
    }
    ring = r.value();
  }
  Result<uint32_t> slot = claim_qp_slot(seg);
  if (!slot.is_ok()) {
    if (ring != 0) seg.arena_free(ring, ring_bytes);
    delete qp;
    return slot.status();
  }
  qp->ctx_ = ctx;
  qp->pd_ = xrc_recv ? nullptr : Pd::from(a->pd);
  qp->send_cq_ = needs_send_cq ? Cq::from(a->send_cq) : nullptr;
  qp->recv_cq_ = needs_recv_cq ? Cq::from(a->recv_cq) : nullptr;
  qp->srq_ = srq;
  qp->xrcd_ = xrcd;
  qp->slot_ = slot.value();
  static std::atomic<uint64_t> serial{0};
  qp->event_token_ = (serial.fetch_add(1, std::memory_order_relaxed) + 1) << shm::kQpSlotBits | qp->slot_;
  shm::SharedQp& s = seg.qp(qp->slot_);
  qp->shared_ = &s;
  s.owner = dev.self();
  s.qp_type = static_cast<uint8_t>(a->qp_type);
  s.state.store(IBV_QPS_RESET);
  s.port_num = 1;
  s.ca = ctx->ca();
  s.gsi = gsi_agent ? 1 : 0;
  s.pkey_index = 0;
  s.pkey = shm::kDefaultPKey;
  s.pkey_fast = shm::fast_pkey(s.pkey);
  s.path_mtu = IBV_MTU_4096;
  s.pd_id = qp->pd_ != nullptr ? qp->pd_->id : 0;
  s.recv_cq = qp->recv_cq_ != nullptr ? qp->recv_cq_->slot() : 0;
  s.send_cq = qp->send_cq_ != nullptr ? qp->send_cq_->slot() : 0;
  s.sq_sig_all = a->sq_sig_all != 0;
  s.block_self_mcast = (create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB) != 0;
  s.srq = srq != nullptr ? srq->slot() + 1 : 0;
  s.xrcd = xrcd != nullptr ? xrcd->slot + 1 : 0;
  s.rq.ring = ring;
  s.rq.capacity = rq_capacity;
  s.rq.stride = stride;
  s.rq.max_sge = max_recv_sge;
  s.dead_since_ns = 0;
  s.slot_state.store(static_cast<uint32_t>(shm::SlotState::kLive), std::memory_order_release);

  transport::SendSide& side = qp->side_;
  transport::QpConsts& c = side.qp;
  c.seg = &seg;
  c.shared = &s;
  c.qp_slot = qp->slot_;
  c.qpn = s.qpn;
  c.wire_src_qpn = gsi_agent ? 1 : 0;
  c.qp_type = s.qp_type;
  c.ca = s.ca;
  c.subnet = ctx->in_subnet();
  c.pd_id = s.pd_id;
  c.send_cq = s.send_cq;
  c.sig_all = s.sq_sig_all;
  c.max_sge = max_send_sge;
  c.max_inline = max_inline;
  c.ud_mtu = transport::mtu_bytes(static_cast<uint8_t>(port_config().mtu));
  c.notifier = &dev.notifier();
  c.timers = &dev.service();
  c.self = dev.self();

  ibv_qp& q = qp->ex_.qp_base;
  q.context = ctx->ibv();
  q.qp_context = a->qp_context;
  q.pd = qp->pd_ != nullptr ? a->pd : nullptr;
  q.send_cq = needs_send_cq ? a->send_cq : nullptr;
  q.recv_cq = needs_recv_cq ? a->recv_cq : nullptr;
  q.srq = a->srq;
  q.handle = qp->slot_;
  q.qp_num = s.qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = a->qp_type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  qp->ex_.comp_mask = 0;

  cap.max_send_wr = xrc_recv ? 0 : max_send_wr;  // its unused send queue is not offered
  cap.max_recv_wr = rq_capacity;
  cap.max_send_sge = xrc_recv ? 0 : max_send_sge;
  cap.max_recv_sge = max_recv_sge;
  cap.max_inline_data = xrc_recv ? 0 : max_inline;
  qp->init_.qp_context = a->qp_context;
  qp->init_.send_cq = q.send_cq;
  qp->init_.recv_cq = q.recv_cq;
  qp->init_.srq = a->srq;
  qp->init_.cap = cap;
  qp->init_.qp_type = a->qp_type;
  qp->init_.sq_sig_all = a->sq_sig_all;

  qp->add_users(1);
  dev.add_qp(qp->slot_, qp);
  return qp;
}

// The objects a QP holds on to: none of them goes while it lives.
void Qp::add_users(int n) {
  if (send_cq_ != nullptr) send_cq_->users().fetch_add(n);
  if (recv_cq_ != nullptr) recv_cq_->users().fetch_add(n);
  if (pd_ != nullptr) pd_->users.fetch_add(n);
  if (srq_ != nullptr) srq_->users().fetch_add(n);
  if (xrcd_ != nullptr) xrcd_->users.fetch_add(n);
}

Result<Qp*> Qp::open(Context* ctx, const ibv_qp_open_attr& a) {
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if ((a.comp_mask & ~(kNeeded | IBV_QP_OPEN_ATTR_CONTEXT)) != 0) return Status::error(EOPNOTSUPP);
  if ((a.comp_mask & kNeeded) != kNeeded || a.xrcd == nullptr || a.xrcd->context != ctx->ibv())
    return Status::error(EINVAL);
  // ibv_open_qp(3): only an XRC_RECV QP of this domain can be opened, as the
  // kernel's uverbs: anything else, an unknown number included, is EINVAL.
  if (a.qp_type != IBV_QPT_XRC_RECV) return Status::error(EINVAL);
  Xrcd* xrcd = Xrcd::from(a.xrcd);
  shm::Segment& seg = ctx->device().seg();
  const int slot = transport::qp_slot_of(seg, a.qp_num);
  if (slot < 0) return Status::error(EINVAL);
  shm::SharedQp& s = seg.qp(static_cast<uint32_t>(slot));
  if (s.qp_type != IBV_QPT_XRC_RECV || s.xrcd != xrcd->slot + 1) return Status::error(EINVAL);
  auto* qp = new (std::nothrow) Qp();
  if (qp == nullptr) return Status::error(ENOMEM);
  qp->ctx_ = ctx;
  qp->xrcd_ = xrcd;
  qp->slot_ = static_cast<uint32_t>(slot);
  qp->shared_ = &s;
  qp->opened_ = true;
  ibv_qp& q = qp->ex_.qp_base;
  q.context = ctx->ibv();
  q.qp_context = (a.comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? a.qp_context : nullptr;
  q.handle = qp->slot_;
  q.qp_num = a.qp_num;
  q.state = static_cast<ibv_qp_state>(s.state.load(std::memory_order_acquire));
  q.qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  qp->init_.qp_context = q.qp_context;
  qp->init_.qp_type = IBV_QPT_XRC_RECV;
  qp->add_users(1);
  return qp;
}

Status Qp::validate_attrs(const ibv_qp_attr& a, int mask, ibv_qp_state cur, ibv_qp_state next) {
  SV_RETURN_IF_ERROR(check_qp_transition(static_cast<ibv_qp_type>(shared_->qp_type), cur, next, mask));
  if ((mask & IBV_QP_PORT) && a.port_num != 1) return Status::error(EINVAL);
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index >= shm::kPKeyTableCap) return Status::error(EINVAL);
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
  // The FLUSH placement types a peer's FLUSH may ask of this QP (IBA 1.5), as rxe takes them.
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (a.qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC | transport::kAccessFlushGlobal |
                             transport::kAccessFlushPersistent)) != 0)
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

Result<transport::Link*> Qp::choose_fabric(const ibv_ah_attr& ah) {
  return fabric::link_for(ctx_->device(), ah, shared_->qp_type);
}

void Qp::take_pkey(uint16_t index) {
  shm::Segment& seg = *side_.qp.seg;
  // The table is read outside the control lock (another CA's takes the
  // subnet's lock, which comes first); a change stored meanwhile moved the
  // generation, and its refresh may have passed this QP by: read it again.
  for (;;) {
    const uint32_t generation = seg.header().pkeys.generation.load(std::memory_order_acquire);
    const uint16_t pkey = pkey_at(*ctx_, index);
    shm::ControlLock lock(seg);
    if (seg.header().pkeys.generation.load(std::memory_order_relaxed) != generation) continue;
    shm::set_qp_pkey(*shared_, index, pkey);
    return;
  }
}

// Each attribute has one home: what the responder reads (possibly in a peer
// process) in the shared QP, what the requester and completer read in the
// send side's Connection — path_mtu and dest_qpn in both, as both sides use
// them — and query_qp reads them back from there.
void Qp::apply(const ibv_qp_attr& a, int mask, ibv_qp_state next, transport::Link* rtr_link) {
  std::lock_guard lock(side_.lock);
  shm::SharedQp& s = *shared_;
  transport::Connection& conn = side_.conn;
  if (next == IBV_QPS_RESET) {
    // IBA 10.3.1: Reset discards every WQE and all transport state.
    side_.sq.posted = side_.sq.next = side_.sq.done = 0;
    side_.completer = transport::CompleterState{};
    side_.requester = transport::RequesterState{};
    conn = transport::Connection{};
    // Discard by moving head up to tail: indices stay monotonic, so an entry
    // posted before the reset can never match a later index's seq.
    const uint64_t rq_tail = s.rq.tail.load();
    s.rq.head.store(rq_tail);
    s.rq.head_seen.store(rq_tail);
    std::memset(static_cast<void*>(&s.resp), 0, sizeof s.resp);
    s.access_flags.store(0, std::memory_order_relaxed);
    s.qkey = s.dlid = s.dest_qpn = 0;
    {
      shm::ControlLock control(*side_.qp.seg);  // an SM's table change may be refreshing it
      shm::set_qp_pkey(s, 0, shm::kDefaultPKey);
    }
    s.path_mtu = IBV_MTU_4096;
    s.port_num = 1;
    s.max_dest_rd_atomic = 0;
    s.min_rnr_timer.store(0, std::memory_order_relaxed);
    en_sqd_async_notify_ = false;
    last_wqe_reported_.store(false, std::memory_order_relaxed);  // the next Error reports it again
  }
  // The QP holds its index (IBA 10.9.3): it takes the entry there now, and
  // an SM's later Set(P_KeyTable) gives it the new one (shm/qp_pkeys.h).
  if ((mask & IBV_QP_PKEY_INDEX) || next == IBV_QPS_INIT || next == IBV_QPS_RTR)
    take_pkey((mask & IBV_QP_PKEY_INDEX) ? a.pkey_index : s.pkey_index);
  if (mask & IBV_QP_PORT) s.port_num = a.port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) s.access_flags.store(a.qp_access_flags, std::memory_order_relaxed);
  if (mask & IBV_QP_QKEY) s.qkey = a.qkey;
  if (mask & IBV_QP_AV) {
    conn.ah = a.ah_attr;
    side_.requester.path_vl_generation = ~0u;  // the SL may have changed: read the table again
    const uint8_t sl = a.ah_attr.sl & 15;
    if (s.sl.load(std::memory_order_relaxed) != sl) {
      // What was counted so far stays under the SL it travelled on.
      shm::fold_port_share(s.counters, ctx_->device().port_counters(), s.sl.load(std::memory_order_relaxed));
      s.sl.store(sl, std::memory_order_relaxed);
    }
    s.dlid = a.ah_attr.dlid;
    s.traffic_class = a.ah_attr.grh.traffic_class;
  }
  if (mask & IBV_QP_PATH_MTU) conn.path_mtu = s.path_mtu = a.path_mtu;
  conn.mtu = s.qp_type == IBV_QPT_UD ? side_.qp.ud_mtu : transport::mtu_bytes(conn.path_mtu);
  if (mask & IBV_QP_DEST_QPN) conn.dest_qpn = s.dest_qpn = a.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) s.resp.epsn = a.rq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) s.min_rnr_timer.store(a.min_rnr_timer, std::memory_order_relaxed);
  if (mask & IBV_QP_SQ_PSN) side_.requester.next_psn = a.sq_psn;
  if (mask & IBV_QP_TIMEOUT) conn.timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) conn.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) conn.rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) conn.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) en_sqd_async_notify_ = a.en_sqd_async_notify != 0;
  if (rtr_link != nullptr) {
    conn.link = rtr_link;
    if (send_cq_ != nullptr) send_cq_->receive_through(rtr_link);
    if (recv_cq_ != nullptr) recv_cq_->receive_through(rtr_link);
  }
  if (next == IBV_QPS_RTS) {
    side_.completer.retries_left = conn.retry_cnt;
    side_.completer.rnr_left = conn.rnr_retry;
  }
  s.state.store(static_cast<uint8_t>(next), std::memory_order_release);
  ex_.qp_base.state = next;
  if (next == IBV_QPS_ERR) enter_error_locked();
  if (next == IBV_QPS_RTS) transport::progress(side_);
}

void Qp::enter_error_locked() {
  // IBA 10.3.1 / 11.3: in Error every outstanding WR completes with flush status.
  transport::flush_send_queue(side_);
  transport::flush_recv_queue(ctx_->device().seg(), slot_, ctx_->device().notifier());
}

Status Qp::modify(const ibv_qp_attr& a, int given_mask) {
  // The QP's connection lives with its creator (the UDP link checks the
  // peer's address there): an opened handle cannot change it.
  if (opened_) return Status::error(EOPNOTSUPP);
  const int mask = drop_ignored_attrs(static_cast<ibv_qp_type>(shared_->qp_type), given_mask);
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
  transport::Link* rtr_link = nullptr;
  if (next == IBV_QPS_RTR && cur != IBV_QPS_RTR) {
    ibv_ah_attr ah;
    {
      std::lock_guard sl(side_.lock);
      ah = (mask & IBV_QP_AV) ? a.ah_attr : side_.conn.ah;
    }
    Result<transport::Link*> f = choose_fabric(ah);
    if (!f.is_ok()) return f.status();
    rtr_link = f.value();
  }
  apply(a, mask, next, rtr_link);
  if (next == IBV_QPS_SQD && cur == IBV_QPS_RTS && en_sqd_async_notify_) {
    // IBA 11.3.3.3: SQ_DRAINED once every request sent is answered — now if
    // nothing is outstanding (always, on the synchronous host link), else
    // when the completer retires the last one.
    std::lock_guard sl(side_.lock);
    if (side_.sq.done == side_.sq.next) {
      raise_event(IBV_EVENT_SQ_DRAINED);
    } else {
      side_.completer.notify_drained = true;
    }
  }
  return Status::ok();
}

Status Qp::query(ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  if (attr == nullptr || init == nullptr) return Status::error(EINVAL);
  std::lock_guard lock(modify_mu_);
  const shm::SharedQp& s = *shared_;
  *attr = ibv_qp_attr{};
  attr->qp_state = static_cast<ibv_qp_state>(s.state.load(std::memory_order_acquire));
  attr->cur_qp_state = attr->qp_state;
  attr->cap = init_.cap;
  attr->pkey_index = s.pkey_index;
  attr->port_num = s.port_num;
  attr->qp_access_flags = s.access_flags.load(std::memory_order_relaxed);
  attr->qkey = s.qkey;
  {
    // A snapshot: the responder (this process's UDP receive thread, or a
    // peer process on the host link) advances it without a lock, and
    // ibv_query_qp(3) reports a recent value, as a busy HCA would.
    const UnsyncedAccess responder_owned;
    attr->rq_psn = s.resp.epsn;
  }
  attr->max_dest_rd_atomic = s.max_dest_rd_atomic;
  attr->min_rnr_timer = s.min_rnr_timer.load(std::memory_order_relaxed);
  attr->en_sqd_async_notify = en_sqd_async_notify_;
  if (opened_) {  // what the creator's send side holds is not ours to read
    attr->path_mtu = static_cast<ibv_mtu>(s.path_mtu);
    attr->dest_qp_num = s.dest_qpn;
    *init = init_;
    return Status::ok();
  }
  {
    std::lock_guard sl(side_.lock);
    const transport::Connection& conn = side_.conn;
    attr->ah_attr = conn.ah;
    attr->path_mtu = static_cast<ibv_mtu>(conn.path_mtu);
    attr->dest_qp_num = conn.dest_qpn;
    attr->timeout = conn.timeout;
    attr->retry_cnt = conn.retry_cnt;
    attr->rnr_retry = conn.rnr_retry;
    attr->max_rd_atomic = conn.max_rd_atomic;
    attr->sq_psn = side_.requester.next_psn;
    attr->sq_draining = attr->qp_state == IBV_QPS_SQD && side_.sq.done != side_.sq.next;
  }
  *init = init_;
  return Status::ok();
}

// BIND_MW and LOCAL_INV carry no data. A bind names a window of this
// context; whether the bind is allowed is the requester's to find
// (IBV_WC_MW_BIND_ERR), as on an HCA.
int Qp::check_local_wr(const ibv_send_wr& wr, uint64_t* length) const {
  if (side_.sq.full()) return ENOMEM;
  if (wr.opcode == IBV_WR_BIND_MW) {
    const ibv_mw* mw = wr.bind_mw.mw;
    if (mw == nullptr || mw->context != ex_.qp_base.context) return EINVAL;
    const ibv_mr* mr = wr.bind_mw.bind_info.mr;
    if (mr != nullptr && mr->context != ex_.qp_base.context) return EINVAL;
  }
  *length = 0;
  return 0;
}

[[gnu::always_inline]] inline int Qp::check_wr(const ibv_send_wr& wr, uint64_t* length) const {
  const auto raw_opcode = util::raw_enum(wr.opcode);
  if (raw_opcode > IBV_WR_ATOMIC_WRITE) return EINVAL;
  const transport::WrOpcodeInfo* op = transport::wr_opcode(static_cast<ibv_wr_opcode>(raw_opcode));
  if (op == nullptr || !transport::wr_allowed(*op, side_.qp.qp_type)) return EINVAL;
  if (op->local) return check_local_wr(wr, length);
  if (wr.num_sge < 0 || static_cast<uint32_t>(wr.num_sge) > side_.qp.max_sge) return EINVAL;
  if (wr.num_sge > 0 && wr.sg_list == nullptr) return EINVAL;
  const bool is_inline = (wr.send_flags & IBV_SEND_INLINE) != 0;
  // CMP_SWAP, FETCH_ADD and ATOMIC WRITE: eight bytes (their result, or what ATOMIC WRITE stores).
  static_assert(transport::ReqKind::kAtomicWrite > transport::ReqKind::kFetchAdd &&
                transport::ReqKind::kFetchAdd > transport::ReqKind::kCmpSwap);
  const bool atomic = op->kind >= transport::ReqKind::kCmpSwap;
  if (is_inline && (op->kind != transport::ReqKind::kSend && op->kind != transport::ReqKind::kWrite &&
                    op->kind != transport::ReqKind::kAtomicWrite))
    return EINVAL;
  if (atomic && wr.num_sge < 1) return EINVAL;
  if (side_.sq.full()) return ENOMEM;
  uint64_t total = 0;
  for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
  // IBA 1.5: ATOMIC WRITE's SGEs hold exactly the eight bytes it stores.
  // Folded into the inline check, so SEND and WRITE test nothing more.
  const bool bad_atomic_write = (op->kind == transport::ReqKind::kAtomicWrite) & (total != 8);
  if ((is_inline & (total > side_.qp.max_inline)) | bad_atomic_write) return EINVAL;
  if (side_.qp.qp_type == IBV_QPT_UD && (wr.wr.ud.ah == nullptr || wr.wr.ud.ah->context != ex_.qp_base.context))
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
  w.imm_data = op->has_imm || op->has_inv ? wr.imm_data : 0;  // a union with invalidate_rkey
  w.packets = 0;
  w.responses = 0;
  w.psn = 0;
  w.placed = placed;
  w.ah = nullptr;
  if (op->local) {
    if (wr.opcode == IBV_WR_BIND_MW) {
      fill_bind(w, wr.bind_mw.mw, wr.bind_mw.rkey, wr.bind_mw.bind_info);
    } else {
      w.rkey = wr.invalidate_rkey;
      w.length = 0;
      w.num_sge = 0;
      w.inline_len = 0;
    }
    ++side_.sq.posted;
    return;
  }
  if (side_.qp.qp_type == IBV_QPT_UD) {
    w.ah = &Ah::from(wr.wr.ud.ah)->attr;
    w.remote_qpn = wr.wr.ud.remote_qpn & kPsnMask;
    w.remote_qkey = wr.wr.ud.remote_qkey;
  }
  w.remote_srqn = wr.qp_type.xrc.remote_srqn & kPsnMask;  // IBA A14: the XRCETH's XRCSRQ
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
    if (wr.wr.rdma.rkey == side_.hints.write_rkey.load(std::memory_order_relaxed))
      shm::prefetch_for_write(reinterpret_cast<const void*>(
          wr.wr.rdma.remote_addr + static_cast<uint64_t>(side_.hints.write_delta.load(std::memory_order_relaxed))));
  } else if (opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    if (const uintptr_t cqe = side_.hints.recv_cqe.load(std::memory_order_relaxed))
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
    // A lone WRITE or SEND on an idle queue may be carried out first,
    // bookkeeping after: a peer polling for its data or its receive
    // completion then does not wait for the rest.
    const uint32_t placed = (wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_SEND ||
                             wr->opcode == IBV_WR_SEND_WITH_IMM) &&
                                    wr->next == nullptr && side_.sq.done == side_.sq.posted &&
                                    side_.conn.link != nullptr
                                ? side_.conn.link->place_at_post(side_, *wr, length)
                                : 0;
    if (placed & transport::Link::kPlacedAndDone) {
      transport::complete_at_post(side_, *wr, length, transport::message_packets(length, side_.conn.mtu));
    } else {
      enqueue(*wr, length, placed);
    }
    wr = wr->next;
  }
  // ibv_post_send(3): bad_wr names the first WR that was not posted.
  if (rc != 0 && bad != nullptr) *bad = wr;
  transport::progress(side_, /*may_wait=*/true);
  return rc;
}

int Qp::post_recv(ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (bad != nullptr) *bad = nullptr;
  if (wr == nullptr) return EINVAL;
  const uint8_t state = shared_->state.load(std::memory_order_acquire);
  // A QP on an SRQ, or of XRC, has no receive queue to post to.
  if (state == IBV_QPS_RESET || shared_->rq.ring == 0) {
    if (bad != nullptr) *bad = wr;
    return EINVAL;
  }
  shm::Segment& seg = ctx_->device().seg();
  int rc = 0;
  {
    std::lock_guard lock(rq_mu_);
    rc = post_recv_list(seg, shared_->rq, &wr);
  }
  if (rc != 0 && bad != nullptr) *bad = wr;
  if (shared_->state.load(std::memory_order_acquire) == IBV_QPS_ERR)
    transport::flush_recv_queue(seg, slot_, ctx_->device().notifier());
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
  if (op == nullptr || !transport::wr_allowed(*op, side_.qp.qp_type)) {
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
  if (n > side_.qp.max_sge || (n > 0 && sge == nullptr)) {
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
  if (side_.qp.qp_type != IBV_QPT_UD || ah == nullptr || ah->context != ex_.qp_base.context) {
    wr_error_ = EINVAL;
    return;
  }
  w->ah = &Ah::from(ah)->attr;
  w->remote_qpn = remote_qpn & kPsnMask;
  w->remote_qkey = remote_qkey;
}

void Qp::wr_set_xrc_srqn(uint32_t remote_srqn) {
  transport::SendWqe* w = wr_current_;
  if (w == nullptr) return;
  if (side_.qp.qp_type != IBV_QPT_XRC_SEND) {
    wr_error_ = EINVAL;
    return;
  }
  w->remote_srqn = remote_srqn & kPsnMask;
}

void Qp::wr_set_inline(const ibv_data_buf* bufs, size_t n) {
  transport::SendWqe* w = wr_current_;
  if (w == nullptr) return;
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += bufs[i].length;
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w->opcode);
  if (total > side_.qp.max_inline || (op->kind != transport::ReqKind::kSend && op->kind != transport::ReqKind::kWrite)) {
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
  for (uint64_t i = 0; rc == 0 && side_.qp.qp_type == IBV_QPT_UD && i < wr_building_; ++i)
    if (side_.sq.at(side_.sq.posted + i).ah == nullptr) rc = EINVAL;  // ibv_wr_set_ud_addr never called
  if (rc == 0) {
    side_.sq.posted += wr_building_;
    transport::progress(side_, /*may_wait=*/true);
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
    if (e == IBV_EVENT_SRQ_LIMIT_REACHED) {
      // A responder took our SRQ below its limit while serving this QP:
      // the event is the SRQ's. The SRQ outlives the QP (users count).
      if (srq_ != nullptr) srq_->raise_limit_event();
      continue;
    }
    // IBA 11.6.3: Last WQE Reached once per entry into Error (every path
    // into Error raises it: local modify, responder error, requester error).
    if (e == IBV_EVENT_QP_LAST_WQE_REACHED && last_wqe_reported_.exchange(true)) continue;
    raise_event(static_cast<ibv_event_type>(e));
  }
}

// The event names the QP by its token, not its address: ibv_get_async_event
// claims it through the registry (Device::claim_qp_event), so an event still
// unread when the QP is destroyed is skipped rather than dereferenced.
void Qp::raise_event(ibv_event_type type) {
  ctx_->raise_async(type, AsyncObject::kQp, reinterpret_cast<void*>(static_cast<uintptr_t>(event_token_)));
}

void Qp::ack_async_event() {
  pthread_mutex_lock(&ex_.qp_base.mutex);
  ++ex_.qp_base.events_completed;
  pthread_cond_signal(&ex_.qp_base.cond);
  pthread_mutex_unlock(&ex_.qp_base.mutex);
}

Status Qp::destroy() {
  if (opened_) {  // ibv_open_qp(3): closes this handle; the QP is its creator's
    add_users(-1);
    pthread_mutex_destroy(&ex_.qp_base.mutex);
    pthread_cond_destroy(&ex_.qp_base.cond);
    delete this;
    return Status::ok();
  }
  Device& dev = ctx_->device();
  dev.remove_qp(slot_);  // from now on the service thread does not call us
  // ibv_destroy_qp(3): wait until every async event fetched for it with
  // ibv_get_async_event is acknowledged. Unfetched ones are dropped: no claim
  // finds this QP once it left the registry.
  pthread_mutex_lock(&ex_.qp_base.mutex);
  while (ex_.qp_base.events_completed != events_fetched_.load())
    pthread_cond_wait(&ex_.qp_base.cond, &ex_.qp_base.mutex);
  pthread_mutex_unlock(&ex_.qp_base.mutex);
  {
    std::lock_guard lock(side_.lock);
    shared_->state.store(IBV_QPS_ERR, std::memory_order_release);
    shm::fold_port_share(shared_->counters, dev.port_counters(), shared_->sl.load(std::memory_order_relaxed));
  }
  // ibv_destroy_qp takes the QP's unpolled completions out of its CQs, as
  // rdma-core's mlx4/mlx5 providers do: a consumer that frees its WR
  // contexts with the QP (libfabric's verbs provider) must never poll one.
  // The QP is in Error: no completion of ours follows.
  if (recv_cq_ != nullptr) recv_cq_->purge_qp(shared_->qpn);
  if (send_cq_ != nullptr && send_cq_ != recv_cq_) send_cq_->purge_qp(shared_->qpn);
  detach_all_mcast();  // ibv_destroy_qp leaves the QP's groups, as the kernel's uverbs does
  shm::mark_dead(dev.seg(), *shared_, now_ns());
  add_users(-1);
  pthread_mutex_destroy(&ex_.qp_base.mutex);
  pthread_cond_destroy(&ex_.qp_base.cond);
  delete this;
  return Status::ok();
}

}  // namespace softverbs::verbs
