// Completion queues and completion channels.
//
// A CQ's ring lives in the segment (shm/rings.h): peers' responders add
// receive completions to it directly; only this process consumes. Polling is
// lock-free against producers; concurrent pollers of one CQ serialise on a
// process-local lock (skipped for IBV_CREATE_CQ_ATTR_SINGLE_THREADED).
//
// Events: when an armed CQ fires (transport/cq_output.cc), deliver_event()
// writes the CQ's event token (its slot and a per-process serial, never a
// pointer) into its channel's pipe; ibv_get_cq_event reads it there and
// claims the event (Device::claim_cq_event), skipping the events of CQs
// destroyed meanwhile. ibv_destroy_cq(3) waits for the acknowledgement of the
// events that were fetched, not of those still in the pipe. Its asynchronous
// event (IBV_EVENT_CQ_ERR on overrun) names it by the same token and is
// counted when ibv_get_async_event claims it (Device::claim_cq_async_event).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "transport/link.h"
#include "shm/objects.h"
#include "util/spin_mutex.h"
#include "util/status.h"

namespace softverbs::verbs {

class Context;

struct CompChannel {
  ibv_comp_channel ibv{};
  int write_fd = -1;
  std::atomic<int> cqs{0};

  static CompChannel* from(ibv_comp_channel* c) { return reinterpret_cast<CompChannel*>(c); }
  static Result<CompChannel*> create(Context* ctx);
  Status destroy();
};

class Cq {
 public:
  static Result<Cq*> create(Context* ctx, const ibv_cq_init_attr_ex& attr);
  static Cq* from(ibv_cq* c) { return reinterpret_cast<Cq*>(c); }
  static Cq* from(ibv_cq_ex* c) { return reinterpret_cast<Cq*>(c); }

  ibv_cq* ibv() { return reinterpret_cast<ibv_cq*>(&ex_); }
  ibv_cq_ex* ibv_ex() { return &ex_; }
  Context* context() { return ctx_; }
  uint32_t slot() const { return slot_; }
  shm::SharedCq& shared() { return *shared_; }

  // ibv_poll_cq. Most polls of a polling loop find the CQ empty: they learn
  // it from one line, without the poll lock and without a call; the time
  // between two looks is how long a completion waits to be seen.
  int poll(int n, ibv_wc* wc) {
    if (n > 0 && wc != nullptr && !maybe_ready() && receive_fabric_.load(std::memory_order_relaxed) == nullptr)
      return 0;
    return poll_locked(n, wc);
  }
  int arm(bool solicited_only);
  // ibv_resize_cq: grows the ring (shm::cq_move), keeping the entries it
  // holds in order; a smaller size keeps the ring. EAGAIN when a producer
  // that reserved an entry does not write it within the patience below
  // (it died: the CQ is stalled anyway).
  Status resize(int cqe);
  static constexpr uint64_t kMovePatienceSpins = 100'000;
  // The CQ's armed condition was met (or it overran): signal the channel.
  void deliver_event();
  // What deliver_event writes: the slot in the low bits, a serial above.
  static constexpr unsigned kTokenSlotBits = 14;
  static_assert(shm::kMaxCqs <= 1u << kTokenSlotBits);
  uint64_t event_token() const { return event_token_; }
  // Registry lock held (Device::claim_cq_event): ibv_get_cq_event took one
  // of this CQ's events.
  void note_event_fetched() { events_fetched_.fetch_add(1, std::memory_order_relaxed); }
  // Likewise for its asynchronous event (ibv_get_async_event).
  void note_async_event_fetched() { async_events_fetched_.fetch_add(1, std::memory_order_relaxed); }
  Status destroy();
  // ibv_destroy_qp: the QP's unpolled completions leave this CQ (receives
  // count as polled for their queue); the others keep their order.
  void purge_qp(uint32_t qpn);

  // Extended polling (ibv_start_poll & co): the entry under the cursor.
  // kStamped: the CQ keeps completion timestamps (stamped()); the ops table
  // picks the instance once, at creation (abi/ibverbs/cq_ex_ops.cc).
  template <bool kStamped>
  int start_poll();
  template <bool kStamped>
  int next_poll();
  void end_poll();
  const shm::Cqe& current() const { return current_; }
  bool stamped() const { return stamped_; }
  // The entry under the cursor: when it was written, in adapter clock ticks
  // (util/time.h), never before the CQ's previous entry's.
  uint64_t current_stamp() const { return current_stamp_; }

  // A QP of this CQ goes to RTR on `f`: from now on a poll that finds the CQ
  // empty lets a packet fabric receive (transport::Link::receive_now). Kept
  // for the CQ's life: a QP that leaves costs at most a few empty receives.
  void receive_through(transport::Link* f) {
    if (!f->receives_on_poll()) return;  // the host link: completions land synchronously
    if (receive_fabric_.load(std::memory_order_relaxed) != f) receive_fabric_.store(f, std::memory_order_release);
  }

  // QPs and SRQs that complete into this CQ: destroy fails with EBUSY while > 0.
  std::atomic<uint32_t>& users() { return users_; }

 private:
  Cq() = default;
  template <bool kStamped>
  bool pop(shm::Cqe* out);
  int poll_locked(int n, ibv_wc* wc);
  int take(int n, ibv_wc* wc);  // up to n completions, under the poll lock
  // An empty CQ: take again if its packet fabric received something.
  [[gnu::noinline]] int take_after_receiving(int n, ibv_wc* wc);
  // An empty CQ: whether its packet fabric handled something just now.
  bool received_now();
  // Whether the next entry looks published, read without the poll lock: a
  // hint (a resize may be moving the ring), the locked pop decides.
  bool maybe_ready() const {
    const uint64_t head = shared_->head.load(std::memory_order_relaxed);
    const shm::CqeSlot* slot =
        ring_.load(std::memory_order_relaxed) + (head & mask_.load(std::memory_order_relaxed));
    return slot->seq.load(std::memory_order_acquire) == head + 1;
  }
  void note_ring();  // the ring moved (creation, resize): what maybe_ready reads

  ibv_cq_ex ex_{};  // first: ibv_cq and ibv_cq_ex pointers are this object
  std::atomic<uint32_t> users_{0};
  Context* ctx_ = nullptr;
  CompChannel* channel_ = nullptr;
  uint32_t slot_ = 0;
  shm::SharedCq* shared_ = nullptr;
  bool single_threaded_ = false;
  SpinMutex poll_mu_;
  uint64_t event_token_ = 0;
  std::atomic<uint32_t> events_fetched_{0};
  std::atomic<uint32_t> overrun_reported_{0};
  std::atomic<uint32_t> async_events_fetched_{0};
  shm::Cqe current_{};
  bool stamped_ = false;
  // Producers stamp after reserving their slot, so two racing producers can
  // stamp out of slot order; an entry reports at least its predecessor's.
  uint64_t current_stamp_ = 0;
  std::atomic<transport::Link*> receive_fabric_{nullptr};
  std::atomic<shm::CqeSlot*> ring_{nullptr};
  std::atomic<uint32_t> mask_{0};
};

void to_wc(const shm::Cqe& cqe, ibv_wc* wc);

}  // namespace softverbs::verbs
