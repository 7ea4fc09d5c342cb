#include "verbs/srq.h"

#include <bit>
#include <cerrno>
#include <new>

#include "shm/slot_high_water.h"
#include "shm/limits.h"
#include "shm/process_registry.h"
#include "shm/rings.h"
#include "shm/slot_reset.h"
#include "util/log.h"
#include "util/time.h"
#include "verbs/context.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/pd.h"
#include "verbs/recv_post.h"
#include "verbs/xrcd.h"

namespace softverbs::verbs {
namespace {

static_assert(shm::kMaxSrqs == 1u << 12);
constexpr uint32_t kSrqnGenShift = 12;
constexpr uint32_t kSrqnGenMask = (1u << (24 - kSrqnGenShift)) - 1;

Result<uint32_t> claim_srq_slot(shm::Segment& seg) {
  shm::ControlLock lock(seg);
  for (uint32_t i = 0; i < shm::kMaxSrqs; ++i) {
    shm::SharedSrq& s = seg.srq(i);
    if (s.slot_state.load(std::memory_order_relaxed) != static_cast<uint32_t>(shm::SlotState::kFree)) continue;
    // Reset under the lock (see claim_qp_slot): the previous SRQ's indices
    // and limit must not leak into this one. The XRC SRQ number keeps a
    // generation above the slot, so a stale number misses a new SRQ.
    const uint32_t gen = ((s.srqn >> kSrqnGenShift) + 1) & kSrqnGenMask;
    shm::reset_slot_after_state(s);
    s.srqn = (gen << kSrqnGenShift) | i;
    s.dead_since_ns = ~0ull >> 1;  // reserved: a sweep must not free it
    s.slot_state.store(static_cast<uint32_t>(shm::SlotState::kDead), std::memory_order_release);
    shm::raise_high_water(seg.header().high_water.srqs, i);
    return i;
  }
  return Status::error(ENOMEM);
}

}  // namespace

Result<Srq*> Srq::create(Context* ctx, ibv_srq_init_attr_ex* a) {
  if (a == nullptr) return Status::error(EINVAL);
  constexpr uint32_t kKnownMask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                                  IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
  if ((a->comp_mask & ~kKnownMask) != 0) return Status::error(EINVAL);
  // Tag-matching SRQs are not supported.
  const ibv_srq_type type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type : IBV_SRQT_BASIC;
  if ((type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) || (a->comp_mask & IBV_SRQ_INIT_ATTR_TM)) {
    SV_LOG(kDebug, "ibv_create_srq_ex: srq_type %d not supported", static_cast<int>(type));
    return Status::error(EOPNOTSUPP);
  }
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || a->pd == nullptr || a->pd->context != ctx->ibv())
    return Status::error(EINVAL);
  // An XRC SRQ names its domain and the CQ its receives complete on; a
  // basic one has neither (its QPs name their CQs).
  const bool xrc = type == IBV_SRQT_XRC;
  const uint32_t xrc_attrs = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if (xrc && ((a->comp_mask & xrc_attrs) != xrc_attrs || a->xrcd == nullptr || a->cq == nullptr ||
              a->xrcd->context != ctx->ibv() || a->cq->context != ctx->ibv()))
    return Status::error(EINVAL);
  if (!xrc && (a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD)) return Status::error(EINVAL);
  // ibv_create_srq(3): srq_limit is ignored here; ibv_modify_srq arms it.
  ibv_srq_attr& attr = a->attr;
  if (attr.max_wr == 0 || attr.max_wr > shm::kMaxSrqWr || attr.max_sge > shm::kMaxSge) return Status::error(EINVAL);

  Device& dev = ctx->device();
  shm::Segment& seg = dev.seg();
  auto* srq = new (std::nothrow) Srq();
  if (srq == nullptr) return Status::error(ENOMEM);
  uint32_t capacity = 1;
  while (capacity < attr.max_wr) capacity <<= 1;
  const uint32_t max_sge = std::max(attr.max_sge, 1u);
  const uint32_t stride = shm::rq_stride_for(max_sge);
  const uint64_t ring_bytes = static_cast<uint64_t>(capacity) * stride;
  Result<shm::Offset> ring = seg.arena_alloc(ring_bytes);
  if (!ring.is_ok()) {
    delete srq;
    return ring.status();
  }
  Result<uint32_t> slot = claim_srq_slot(seg);
  if (!slot.is_ok()) {
    seg.arena_free(ring.value(), ring_bytes);
    delete srq;
    return slot.status();
  }
  srq->ctx_ = ctx;
  srq->pd_ = Pd::from(a->pd);
  srq->slot_ = slot.value();
  static std::atomic<uint64_t> serial{0};
  srq->event_token_ = (serial.fetch_add(1, std::memory_order_relaxed) + 1) << kTokenSlotBits | srq->slot_;
  shm::SharedSrq& s = seg.srq(srq->slot_);
  srq->shared_ = &s;
  s.owner = dev.self();
  s.pd_id = srq->pd_->id;
  if (xrc) {
    srq->xrcd_ = Xrcd::from(a->xrcd);
    srq->cq_ = Cq::from(a->cq);
    s.xrcd = srq->xrcd_->slot + 1;
    s.recv_cq = srq->cq_->slot();
  }
  s.rq.ring = ring.value();
  s.rq.capacity = capacity;
  s.rq.stride = stride;
  s.rq.max_sge = max_sge;
  s.rq.limit.store(0, std::memory_order_relaxed);
  s.dead_since_ns = 0;
  s.slot_state.store(static_cast<uint32_t>(shm::SlotState::kLive), std::memory_order_release);

  ibv_srq& i = srq->ibv_;
  i.context = ctx->ibv();
  i.srq_context = a->srq_context;
  i.pd = a->pd;
  i.handle = srq->slot_;
  pthread_mutex_init(&i.mutex, nullptr);
  pthread_cond_init(&i.cond, nullptr);
  i.events_completed = 0;

  attr.max_wr = capacity;
  attr.max_sge = max_sge;
  srq->pd_->users.fetch_add(1);
  if (xrc) {
    srq->xrcd_->users.fetch_add(1);
    srq->cq_->users().fetch_add(1);
  }
  dev.add_srq(srq->slot_, srq);
  return srq;
}

Status Srq::modify(const ibv_srq_attr& a, int mask) {
  if ((mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) != 0 || mask == 0) return Status::error(EINVAL);
  std::lock_guard lock(modify_mu_);
  shm::RecvQueue& rq = shared_->rq;
  // ibv_modify_srq(3): invalid attributes change nothing, so check all first.
  const bool grow = (mask & IBV_SRQ_MAX_WR) && a.max_wr > rq.capacity;
  if (mask & IBV_SRQ_MAX_WR) {
    if (a.max_wr == 0 || a.max_wr > shm::kMaxSrqWr || a.max_wr < shm::rq_depth(rq)) return Status::error(EINVAL);
  }
  // The limit is checked against the size the SRQ will have.
  const uint32_t capacity = grow ? std::bit_ceil(a.max_wr) : rq.capacity;
  if ((mask & IBV_SRQ_LIMIT) && a.srq_limit > capacity) return Status::error(EINVAL);
  // A size the SRQ has is honoured as it is: the ring never shrinks.
  if (grow) {
    const Status s = grow_to(capacity);
    if (!s.is_ok()) return s;
  }
  // IBA 10.2.9.3: arms the limit (0 disarms); the event fires once the
  // queue holds fewer WQEs than the limit after a responder takes one.
  if (mask & IBV_SRQ_LIMIT) rq.limit.store(a.srq_limit, std::memory_order_release);
  return Status::ok();
}

Status Srq::grow_to(uint32_t capacity) {
  shm::Segment& seg = ctx_->device().seg();
  shm::SharedSrq& s = *shared_;
  if (s.retired_count >= shm::kMaxSrqRingMoves) return Status::error(ENOMEM);  // cannot happen: each move doubles
  const uint64_t bytes = static_cast<uint64_t>(capacity) * s.rq.stride;
  Result<shm::Offset> ring = seg.arena_alloc(bytes);
  if (!ring.is_ok()) return ring.status();
  // Peers' responders take from the ring lock-free: the entries move under
  // a closed head (shm::rq_move), and the old ring stays until the SRQ's
  // slot is reclaimed, for a responder that looked it up before the move.
  std::lock_guard lock(post_mu_);
  s.retired[s.retired_count++] = {s.rq.ring, static_cast<uint64_t>(s.rq.capacity) * s.rq.stride};
  shm::rq_move(seg, s.rq, ring.value(), capacity);
  return Status::ok();
}

Status Srq::query(ibv_srq_attr* attr) {
  if (attr == nullptr) return Status::error(EINVAL);
  std::lock_guard lock(modify_mu_);
  attr->max_wr = shared_->rq.capacity;
  attr->max_sge = shared_->rq.max_sge;
  attr->srq_limit = shared_->rq.limit.load(std::memory_order_acquire);
  return Status::ok();
}

int Srq::post_recv(ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (bad != nullptr) *bad = nullptr;
  if (wr == nullptr) return EINVAL;
  shm::Segment& seg = ctx_->device().seg();
  shm::RecvQueue& rq = shared_->rq;
  int rc = 0;
  {
    std::lock_guard lock(post_mu_);
    rc = post_recv_list(seg, rq, &wr);
  }
  // ibv_post_srq_recv(3): bad_wr names the first WR that was not posted.
  if (rc != 0 && bad != nullptr) *bad = wr;
  return rc;
}

Status Srq::number(uint32_t* srqn) const {
  if (srqn == nullptr || xrcd_ == nullptr) return Status::error(EINVAL);  // only XRC SRQs are numbered
  *srqn = shared_->srqn;
  return Status::ok();
}

void Srq::raise_limit_event() {
  ctx_->raise_async(IBV_EVENT_SRQ_LIMIT_REACHED, AsyncObject::kSrq,
                    reinterpret_cast<void*>(static_cast<uintptr_t>(event_token_)));
}

Status Srq::destroy() {
  if (users_.load() != 0) return Status::error(EBUSY);
  Device& dev = ctx_->device();
  dev.remove_srq(slot_);
  // ibv_destroy_srq(3): wait until every async event fetched for it is
  // acknowledged (unfetched ones are skipped once it left the registry). WQEs still queued are discarded: nothing completes them.
  pthread_mutex_lock(&ibv_.mutex);
  while (ibv_.events_completed != events_fetched_.load()) pthread_cond_wait(&ibv_.cond, &ibv_.mutex);
  pthread_mutex_unlock(&ibv_.mutex);
  // Phase 1: responders stop taking from it (they check slot_state); the
  // ring is freed after the grace period (invariant 7).
  shm::mark_dead(dev.seg(), *shared_, now_ns());
  pd_->users.fetch_sub(1);
  if (xrcd_ != nullptr) {
    xrcd_->users.fetch_sub(1);
    cq_->users().fetch_sub(1);
  }
  pthread_mutex_destroy(&ibv_.mutex);
  pthread_cond_destroy(&ibv_.cond);
  delete this;
  return Status::ok();
}

}  // namespace softverbs::verbs
