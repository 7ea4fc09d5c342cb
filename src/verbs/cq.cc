#include "verbs/cq.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "shm/slot_high_water.h"
#include "shm/process_registry.h"
#include "shm/rings.h"
#include "transport/responder.h"
#include "util/time.h"
#include "verbs/context.h"
#include "verbs/device.h"

namespace softverbs::verbs {
namespace {

constexpr uint64_t kStampWcFlags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
constexpr uint64_t kSupportedWcFlags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                                       IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                                       IBV_WC_EX_WITH_DLID_PATH_BITS | kStampWcFlags;

Result<uint32_t> claim_cq_slot(shm::Segment& seg) {
  shm::ControlLock lock(seg);
  for (uint32_t i = 0; i < shm::kMaxCqs; ++i) {
    shm::SharedCq& c = seg.cq(i);
    if (c.slot_state.load(std::memory_order_relaxed) != static_cast<uint32_t>(shm::SlotState::kFree)) continue;
    // Reserved: a sweep must not free it. The time first, then the state
    // with release: a sweep reads the time only after seeing kDead.
    c.dead_since_ns = ~0ull >> 1;
    c.slot_state.store(static_cast<uint32_t>(shm::SlotState::kDead), std::memory_order_release);
    shm::raise_high_water(seg.header().high_water.cqs, i);
    return i;
  }
  return Status::error(ENOMEM);
}

}  // namespace

void to_wc(const shm::Cqe& c, ibv_wc* wc) {
  wc->wr_id = c.wr_id;
  wc->status = static_cast<ibv_wc_status>(c.status);
  wc->opcode = static_cast<ibv_wc_opcode>(c.opcode);
  wc->vendor_err = c.vendor_err;
  wc->byte_len = c.byte_len;
  wc->imm_data = c.imm_data;
  wc->qp_num = c.qp_num;
  wc->src_qp = c.src_qp;
  wc->wc_flags = c.wc_flags;
  wc->pkey_index = c.pkey_index;
  wc->slid = c.slid;
  wc->sl = c.sl;
  wc->dlid_path_bits = c.dlid_path_bits;
}

Result<CompChannel*> CompChannel::create(Context* ctx) {
  auto* ch = new (std::nothrow) CompChannel();
  if (ch == nullptr) return Status::error(ENOMEM);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    delete ch;
    return Status::error(errno);
  }
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  ch->ibv.context = ctx->ibv();
  ch->ibv.fd = fds[0];
  ch->ibv.refcnt = 0;
  ch->write_fd = fds[1];
  return ch;
}

Status CompChannel::destroy() {
  if (cqs.load() != 0) return Status::error(EBUSY);
  ::close(ibv.fd);
  ::close(write_fd);
  delete this;
  return Status::ok();
}

Result<Cq*> Cq::create(Context* ctx, const ibv_cq_init_attr_ex& attr) {
  if (attr.cqe < 1 || attr.cqe > shm::kMaxCqe) return Status::error(EINVAL);
  if (attr.comp_vector >= static_cast<uint32_t>(ctx->ibv()->num_comp_vectors)) return Status::error(EINVAL);
  if ((attr.wc_flags & ~kSupportedWcFlags) != 0) return Status::error(EOPNOTSUPP);
  if ((attr.comp_mask & ~static_cast<uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) != 0)
    return Status::error(EINVAL);
  if ((attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
      (attr.flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)))
    return Status::error(EOPNOTSUPP);
  if (attr.channel != nullptr && attr.channel->context != ctx->ibv()) return Status::error(EINVAL);

  Device& dev = ctx->device();
  shm::Segment& seg = dev.seg();
  uint32_t capacity = 16;
  while (capacity < attr.cqe + 1u) capacity <<= 1;
  const bool stamped = (attr.wc_flags & kStampWcFlags) != 0;
  auto* cq = new (std::nothrow) Cq();
  if (cq == nullptr) return Status::error(ENOMEM);
  Result<shm::Offset> ring = seg.arena_alloc(shm::cq_ring_bytes(capacity, stamped));
  if (!ring.is_ok()) {
    delete cq;
    return ring.status();
  }
  Result<uint32_t> slot = claim_cq_slot(seg);
  if (!slot.is_ok()) {
    seg.arena_free(ring.value(), shm::cq_ring_bytes(capacity, stamped));
    delete cq;
    return slot.status();
  }
  cq->ctx_ = ctx;
  cq->slot_ = slot.value();
  cq->shared_ = &seg.cq(cq->slot_);
  cq->channel_ = attr.channel != nullptr ? CompChannel::from(attr.channel) : nullptr;
  static std::atomic<uint64_t> serial{0};
  cq->event_token_ = (serial.fetch_add(1, std::memory_order_relaxed) + 1) << kTokenSlotBits | cq->slot_;
  cq->single_threaded_ =
      (attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr.flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
  cq->stamped_ = stamped;

  shm::SharedCq& s = *cq->shared_;
  s.owner = dev.self();
  s.capacity = capacity;
  s.cqe = capacity - 1;
  s.ring = ring.value();
  s.stamps = stamped ? ring.value() + static_cast<uint64_t>(capacity) * sizeof(shm::CqeSlot) : 0;
  s.armed.store(shm::kCqDisarmed);
  s.overrun.store(0);
  s.tail.store(0);
  s.head_seen.store(0);
  s.head.store(0);
  s.dead_since_ns = 0;
  s.slot_state.store(static_cast<uint32_t>(shm::SlotState::kLive), std::memory_order_release);
  cq->note_ring();

  ibv_cq_ex& e = cq->ex_;
  e.context = ctx->ibv();
  e.channel = attr.channel;
  e.cq_context = attr.cq_context;
  e.handle = cq->slot_;
  e.cqe = static_cast<int>(capacity - 1);
  pthread_mutex_init(&e.mutex, nullptr);
  pthread_cond_init(&e.cond, nullptr);
  if (cq->channel_ != nullptr) cq->channel_->ibv.refcnt = cq->channel_->cqs.fetch_add(1) + 1;
  dev.add_cq(cq->slot_, cq);
  return cq;
}

namespace {

// A polled receive frees its RQ slot: the poster learns it here, not from
// the consumers' head (the peer's line).
void note_recv_polled(shm::Segment& seg, const shm::Cqe& cqe) {
  const int slot = transport::qp_slot_of(seg, cqe.qp_num);
  if (slot < 0) return;
  shm::SharedQp& qp = seg.qp(static_cast<uint32_t>(slot));
  if (qp.srq == 0) {
    if (qp.rq.ring == 0) return;  // an XRC_RECV QP's (it has none)
    shm::rq_note_polled(qp.rq, cqe.rq_index);
    return;
  }
  // A basic SRQ: its posts, like a QP's, then need not read the consumers' head.
  shm::SharedSrq& srq = seg.srq(qp.srq - 1);
  if (__atomic_load_n(&srq.rq.ring, __ATOMIC_RELAXED) == 0) return;  // another thread may be growing it
  shm::rq_note_polled_shared(srq.rq, cqe.rq_index);
}

}  // namespace

template <bool kStamped>
bool Cq::pop(shm::Cqe* out) {
  shm::Segment& seg = ctx_->device().seg();
  if constexpr (kStamped) {
    uint64_t stamp = 0;
    if (!shm::cq_pop_stamped(seg, *shared_, out, &stamp)) return false;
    if (stamp > current_stamp_) current_stamp_ = stamp;
  } else {
    if (!shm::cq_pop(seg, *shared_, out)) return false;
  }
  if (out->sq_index == shm::Cqe::kRecv) note_recv_polled(seg, *out);
  return true;
}

void Cq::note_ring() {
  const shm::Segment& seg = ctx_->device().seg();
  ring_.store(shm::cq_owned_slot(seg, *shared_, 0), std::memory_order_relaxed);
  mask_.store(shared_->capacity - 1, std::memory_order_relaxed);
}

bool Cq::received_now() {
  transport::Link* f = receive_fabric_.load(std::memory_order_acquire);
  if (f == nullptr) return false;
  // Timers first: a paced request whose turn has come leaves before we look
  // for what answers it.
  const bool timers = ctx_->device().service().run_due_timers();
  return f->receive_now() || timers;
}

[[gnu::always_inline]] inline int Cq::take(int n, ibv_wc* wc) {
  if (!single_threaded_) poll_mu_.lock();
  int got = 0;
  // ibv_wc has no timestamp: a stamped CQ's stamps are not read here. Each
  // entry goes from its slot straight into the caller's ibv_wc (no copy in
  // between), and a batch poll (UCX asks for 16) that finds the next slot
  // empty stops at its sequence word.
  shm::Segment& seg = ctx_->device().seg();
  uint64_t head = shared_->head.load(std::memory_order_relaxed);
  for (; got < n; ++got, ++head) {
    const shm::Cqe* cqe = shm::cq_peek(seg, *shared_, head);
    if (cqe == nullptr) break;
    to_wc(*cqe, &wc[got]);
    if (cqe->sq_index == shm::Cqe::kRecv) note_recv_polled(seg, *cqe);
    shm::cq_release(*shared_, head);
  }
  if (!single_threaded_) poll_mu_.unlock();
  return got;
}

int Cq::poll_locked(int n, ibv_wc* wc) {
  if (n < 0 || (n > 0 && wc == nullptr)) return -EINVAL;
  const int got = take(n, wc);
  if (got == 0 && n > 0) [[unlikely]]
    return take_after_receiving(n, wc);
  return got;
}

int Cq::take_after_receiving(int n, ibv_wc* wc) {
  // Outside the poll lock: receiving makes syscalls, and may complete into this CQ.
  return received_now() ? take(n, wc) : 0;
}

int Cq::arm(bool solicited_only) {
  // IBA 11.4.2.2: the next (solicited) completion after arming raises one event.
  shared_->armed.store(solicited_only ? shm::kCqArmSolicited : shm::kCqArmAny, std::memory_order_seq_cst);
  return 0;
}

Status Cq::resize(int cqe) {
  if (cqe < 1 || static_cast<uint32_t>(cqe) > shm::kMaxCqe) return Status::error(EINVAL);
  // A size the CQ already has is honoured as it is: the ring never shrinks.
  if (static_cast<uint32_t>(cqe) <= shared_->cqe) return Status::ok();
  uint32_t capacity = shared_->capacity;
  while (capacity < static_cast<uint32_t>(cqe) + 1u) capacity <<= 1;
  shm::Segment& seg = ctx_->device().seg();
  const uint64_t bytes = shm::cq_ring_bytes(capacity, stamped_);
  Result<shm::Offset> ring = seg.arena_alloc(bytes);
  if (!ring.is_ok()) return ring.status();
  const shm::Offset old_ring = shared_->ring;
  const uint64_t old_bytes = shm::cq_ring_bytes(shared_->capacity, stamped_);
  const shm::Offset stamps = stamped_ ? ring.value() + static_cast<uint64_t>(capacity) * sizeof(shm::CqeSlot) : 0;
  // Producers (peers' responders, receive threads) write the ring lock-free:
  // shm::cq_move closes its tail, lets reserved entries land, copies them
  // to the same indices of the new ring and reopens the tail there.
  if (!single_threaded_) poll_mu_.lock();
  const bool moved = shm::cq_move(seg, *shared_, ring.value(), capacity, stamps, kMovePatienceSpins);
  if (moved) {
    shared_->cqe = capacity - 1;
    ex_.cqe = static_cast<int>(capacity - 1);
    note_ring();
  }
  if (!single_threaded_) poll_mu_.unlock();
  if (!moved) {
    seg.arena_free(ring.value(), bytes);
    return Status::error(EAGAIN);
  }
  // No producer touches the old ring once the move returned: those that
  // reserved in it have published, later ones reserve in the new ring.
  seg.arena_free(old_ring, old_bytes);
  return Status::ok();
}

void Cq::deliver_event() {
  if (shared_->overrun.load(std::memory_order_acquire) != 0 && overrun_reported_.exchange(1) == 0) {
    ctx_->raise_async(IBV_EVENT_CQ_ERR, AsyncObject::kCq, reinterpret_cast<void*>(static_cast<uintptr_t>(event_token_)));
  }
  if (channel_ == nullptr) return;
  // A full pipe loses the event: the application has that many unread.
  (void)!::write(channel_->write_fd, &event_token_, sizeof event_token_);
}

Status Cq::destroy() {
  if (users_.load() != 0) return Status::error(EBUSY);
  Device& dev = ctx_->device();
  dev.remove_cq(slot_);
  // ibv_destroy_cq(3): wait until every event fetched with ibv_get_cq_event
  // or ibv_get_async_event has been acknowledged. Unfetched ones are dropped:
  // no claim can find this CQ once it left the registry.
  pthread_mutex_lock(&ex_.mutex);
  while (ex_.comp_events_completed != events_fetched_.load() ||
         ex_.async_events_completed != async_events_fetched_.load())
    pthread_cond_wait(&ex_.cond, &ex_.mutex);
  pthread_mutex_unlock(&ex_.mutex);
  shm::mark_dead(dev.seg(), *shared_, now_ns());
  if (channel_ != nullptr) channel_->ibv.refcnt = channel_->cqs.fetch_sub(1) - 1;
  pthread_mutex_destroy(&ex_.mutex);
  pthread_cond_destroy(&ex_.cond);
  delete this;
  return Status::ok();
}

void Cq::purge_qp(uint32_t qpn) {
  shm::Segment& seg = ctx_->device().seg();
  if (!single_threaded_) poll_mu_.lock();
  shm::cq_purge(
      seg, *shared_, [qpn](const shm::Cqe& c) { return c.qp_num == qpn; },
      [&seg](const shm::Cqe& c) {
        if (c.sq_index == shm::Cqe::kRecv) note_recv_polled(seg, c);
      },
      kMovePatienceSpins);
  if (!single_threaded_) poll_mu_.unlock();
}

template <bool kStamped>
int Cq::start_poll() {
  for (int pass = 0;; ++pass) {
    if (!single_threaded_) poll_mu_.lock();
    if (pop<kStamped>(&current_)) break;
    if (!single_threaded_) poll_mu_.unlock();
    if (pass == 1 || !received_now()) return ENOENT;
  }
  ex_.wr_id = current_.wr_id;
  ex_.status = static_cast<ibv_wc_status>(current_.status);
  return 0;
}

template <bool kStamped>
int Cq::next_poll() {
  if (!pop<kStamped>(&current_)) return ENOENT;
  ex_.wr_id = current_.wr_id;
  ex_.status = static_cast<ibv_wc_status>(current_.status);
  return 0;
}

template int Cq::start_poll<false>();
template int Cq::start_poll<true>();
template int Cq::next_poll<false>();
template int Cq::next_poll<true>();

void Cq::end_poll() {
  if (!single_threaded_) poll_mu_.unlock();
}

}  // namespace softverbs::verbs
