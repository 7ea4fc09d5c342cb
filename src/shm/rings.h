// Lock-free rings in the device segment: receive queues and completion queues.
//
// Datapath: no allocation, no syscalls, no locks. See docs/DESIGN.md invariants
// 4 and 5 for who produces and who consumes.
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "shm/objects.h"
#include "shm/segment.h"
#include "util/time.h"

namespace softverbs::shm {

// Asks for a line in the exclusive state (x86 PREFETCHW where the CPU has it).
inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

// ---- Receive queues -------------------------------------------------------

// Entries are copied word by word with relaxed atomics: a consumer that loses
// the race for an entry may read it while the producer already reuses the
// slot; it then throws the copy away, but the read itself must not be a race.
inline void store_words(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<uint64_t*>(dst);
  const auto* s = static_cast<const uint64_t*>(src);
  for (size_t i = 0; i < bytes / 8; ++i) __atomic_store_n(&d[i], s[i], __ATOMIC_RELAXED);
}
inline void load_words(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<uint64_t*>(dst);
  const auto* s = static_cast<const uint64_t*>(src);
  for (size_t i = 0; i < bytes / 8; ++i) d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}
static_assert(sizeof(RecvWqe) % 8 == 0 && sizeof(Sge) % 8 == 0);

// The owner's view: only the owner moves the ring (rq_move), so it reads
// ring and capacity plainly.
inline RecvWqe* rq_slot(const Segment& seg, const RecvQueue& rq, uint64_t index) {
  return seg.ptr<RecvWqe>(rq.ring + (index & (rq.capacity - 1)) * rq.stride);
}

// Set in a receive queue's head while its owner moves the ring (rq_move):
// consumers claim nothing meanwhile, as from an empty queue (RNR NAK).
// Indices never reach this bit.
inline constexpr uint64_t kRqHeadClosed = 1ull << 63;

// A consumer's view, lock-free against a move: the capacity first (acquire;
// rq_move stores the ring before it, release), then the ring. A new
// capacity comes with the new ring; an old one indexes inside either ring,
// whose entry's seq then tells whether it is the one sought.
inline const RecvWqe* rq_consumer_slot(const Segment& seg, const RecvQueue& rq, uint64_t index) {
  const uint32_t capacity = __atomic_load_n(&rq.capacity, __ATOMIC_ACQUIRE);
  const Offset ring = __atomic_load_n(&rq.ring, __ATOMIC_RELAXED);
  return seg.ptr<RecvWqe>(ring + (index & (capacity - 1)) * rq.stride);
}

// Whole cache lines: the owner posting the next entry must not write the
// line a consumer is reading the previous one from.
inline uint32_t rq_stride_for(uint32_t max_sge) {
  const size_t bytes = sizeof(RecvWqe) + (max_sge == 0 ? 1 : max_sge) * sizeof(Sge);
  return static_cast<uint32_t>((bytes + 63) & ~size_t{63});
}

inline uint64_t rq_depth(const RecvQueue& rq) {
  return rq.tail.load(std::memory_order_acquire) - (rq.head.load(std::memory_order_acquire) & ~kRqHeadClosed);
}

// Owner only: how many entries may be written from `tail` on before one
// that no consumer has claimed yet. A list of receive WRs asks once and
// again only when that many are used up, not once per WR.
inline uint64_t rq_room(RecvQueue& rq, uint64_t tail) {
  // Both are lower bounds of head: a polled completion's entry was claimed.
  const uint64_t freed = std::max(rq.head_seen.load(std::memory_order_relaxed), rq.polled.load(std::memory_order_acquire));
  if (tail - freed < rq.capacity) return rq.capacity - (tail - freed);
  // The entry a full ring reuses is free once a consumer's claim of it is seen.
  const uint64_t head = rq.head.load(std::memory_order_acquire);
  rq.head_seen.store(head, std::memory_order_relaxed);
  return tail - head >= rq.capacity ? 0 : rq.capacity - (tail - head);
}

// Owner only, with room for it (rq_room): publishes the entry at `tail`.
// `sge` may be the caller's ibv_sge list as it is (same layout as Sge).
inline void rq_write(const Segment& seg, RecvQueue& rq, uint64_t tail, uint64_t wr_id, const void* sge,
                     uint32_t num_sge) {
  RecvWqe* w = rq_slot(seg, rq, tail);
  const RecvWqe head_words{0, wr_id, num_sge, 0};
  store_words(&w->wr_id, &head_words.wr_id, sizeof(RecvWqe) - sizeof(uint64_t));
  store_words(w->sge, sge, num_sge * sizeof(Sge));
  __atomic_store_n(&w->seq, tail + 1, __ATOMIC_RELEASE);
  rq.tail.store(tail + 1, std::memory_order_release);
}

// Owner only. Returns false when the queue is full.
inline bool rq_post(const Segment& seg, RecvQueue& rq, uint64_t wr_id, const Sge* sge, uint32_t num_sge) {
  const uint64_t tail = rq.tail.load(std::memory_order_relaxed);
  if (rq_room(rq, tail) == 0) return false;
  rq_write(seg, rq, tail, wr_id, sge, num_sge);
  return true;
}

// The owner, polling the completion of the receive at `index`: its slot is
// free (the consumer claimed it, copy done, before completing it). Stale
// indices (from before a reset) and ones never posted change nothing.
inline void rq_note_polled(RecvQueue& rq, uint64_t index) {
  const uint64_t next = index + 1;
  if (next > rq.polled.load(std::memory_order_relaxed) && next <= rq.tail.load(std::memory_order_relaxed))
    rq.polled.store(next, std::memory_order_release);
}

// Likewise for an SRQ, whose completions several CQs (and threads) poll:
// entries are claimed in index order, so the largest polled index bounds
// head from below whichever CQ it came through; kept by CAS so no poller
// moves it back.
inline void rq_note_polled_shared(RecvQueue& rq, uint64_t index) {
  const uint64_t next = index + 1;
  uint64_t cur = rq.polled.load(std::memory_order_relaxed);
  while (next > cur && next <= rq.tail.load(std::memory_order_relaxed))
    if (rq.polled.compare_exchange_weak(cur, next, std::memory_order_release, std::memory_order_relaxed)) return;
}

// Any consumer. Copies the oldest entry out and claims it; *index is its
// index. Returns false when empty.
inline bool rq_take(const Segment& seg, RecvQueue& rq, uint64_t* wr_id, Sge* sge, uint32_t* num_sge,
                    uint64_t* index) {
  uint64_t head = rq.head.load(std::memory_order_acquire);
  for (;;) {
    if (head & kRqHeadClosed) return false;  // being moved: for now, empty
    const RecvWqe* w = rq_consumer_slot(seg, rq, head);
    if (__atomic_load_n(&w->seq, __ATOMIC_ACQUIRE) != head + 1) {
      // Not published yet, or taken and reused while our head went stale.
      const uint64_t fresh = rq.head.load(std::memory_order_acquire);
      if (fresh == head) return false;
      head = fresh;
      continue;
    }
    RecvWqe head_words;
    load_words(&head_words, w, sizeof(RecvWqe));
    *wr_id = head_words.wr_id;
    uint32_t n = head_words.num_sge;
    if (n > rq.max_sge) n = rq.max_sge;  // never trust a peer-written count
    load_words(sge, w->sge, n * sizeof(Sge));
    *num_sge = n;
    // If another consumer won the entry, what we copied may be torn: retry.
    if (rq.head.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel)) {
      // The owner posts well ahead: start fetching the next entry's line now,
      // so the next message does not wait for it.
      __builtin_prefetch(rq_consumer_slot(seg, rq, head + 1), 0);
      *index = head;
      return true;
    }
  }
}

// Owner only, holding its post lock (no rq_post meanwhile): moves the
// unclaimed entries onto `ring` (`capacity` slots, more than now, zeroed
// arena memory), at the same indices, and makes consumers use it. Closing
// head first stops claims; a consumer that copied an entry out of the old
// ring before still claims it by its CAS on the reopened head, and what it
// copied is what was moved, since nothing writes the old ring again. The
// old ring must outlive every consumer that may still read it (SharedSrq::
// retired).
inline void rq_move(const Segment& seg, RecvQueue& rq, Offset ring, uint32_t capacity) {
  uint64_t head = rq.head.load(std::memory_order_acquire);
  while (!rq.head.compare_exchange_weak(head, head | kRqHeadClosed, std::memory_order_acq_rel)) {
  }
  const uint64_t tail = rq.tail.load(std::memory_order_relaxed);
  for (uint64_t i = head; i < tail; ++i) {
    const RecvWqe* from = rq_slot(seg, rq, i);
    RecvWqe* to = seg.ptr<RecvWqe>(ring + (i & (capacity - 1)) * rq.stride);
    const auto* src = reinterpret_cast<const uint64_t*>(from);
    auto* dst = reinterpret_cast<uint64_t*>(to);
    for (size_t k = 1; k < rq.stride / sizeof(uint64_t); ++k)
      __atomic_store_n(&dst[k], __atomic_load_n(&src[k], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    static_assert(offsetof(RecvWqe, seq) == 0);
    __atomic_store_n(&to->seq, i + 1, __ATOMIC_RELEASE);  // as rq_post publishes
  }
  __atomic_store_n(&rq.ring, ring, __ATOMIC_RELAXED);
  __atomic_store_n(&rq.capacity, capacity, __ATOMIC_RELEASE);
  rq.head.store(head, std::memory_order_release);
}

// ---- Completion queues ----------------------------------------------------

// A CQ's ring, capacity and stamps change only while its tail is closed
// (cq_move); producers read them with relaxed atomic loads (plain loads on
// x86), the acquire of an open tail ordering them after the move.
inline uint32_t cq_capacity(const SharedCq& cq) { return __atomic_load_n(&cq.capacity, __ATOMIC_RELAXED); }

// While set in a CQ's tail, producers reserve nothing: the owner is moving
// the ring (cq_move). Indices never reach this bit, so a closed tail always
// looks like a full ring to a producer, whose slow path then waits.
inline constexpr uint64_t kCqTailClosed = 1ull << 63;

inline CqeSlot* cq_slot(const Segment& seg, const SharedCq& cq, uint64_t index) {
  return seg.ptr<CqeSlot>(__atomic_load_n(&cq.ring, __ATOMIC_RELAXED)) + (index & (cq_capacity(cq) - 1));
}

// The owner's view: only the owner moves the ring, so it reads it plainly.
inline CqeSlot* cq_owned_slot(const Segment& seg, const SharedCq& cq, uint64_t index) {
  return seg.ptr<CqeSlot>(cq.ring) + (index & (cq.capacity - 1));
}

// The arena bytes of a CQ's ring, with its timestamps if it keeps them.
inline uint64_t cq_ring_bytes(uint32_t capacity, bool stamped) {
  return static_cast<uint64_t>(capacity) * (sizeof(CqeSlot) + (stamped ? sizeof(uint64_t) : 0));
}

inline std::atomic<uint64_t>* cq_stamp(const Segment& seg, const SharedCq& cq, uint64_t index) {
  return seg.ptr<std::atomic<uint64_t>>(__atomic_load_n(&cq.stamps, __ATOMIC_RELAXED)) +
         (index & (cq_capacity(cq) - 1));
}

// Out of line: CQs without stamps keep only the test of `stamps`.
[[gnu::noinline]] inline void cq_stamp_now(const Segment& seg, const SharedCq& cq, uint64_t index) {
  cq_stamp(seg, cq, index)->store(adapter_clock_ticks(), std::memory_order_relaxed);
}

// A producer found the tail closed: the move takes a few copies; returns the
// reopened tail.
[[gnu::noinline]] inline uint64_t cq_wait_open(SharedCq& cq) {
  for (unsigned spins = 0;; ++spins) {
    const uint64_t tail = cq.tail.load(std::memory_order_acquire);
    if ((tail & kCqTailClosed) == 0) return tail;
    if (spins < 64)
      __builtin_ia32_pause();
    else
      sched_yield();
  }
}

enum class CqPush { kOk, kOverrun };

// Any producer. On a full CQ nothing is written and the CQ is marked overrun
// (IBA 11.4.2.1: a CQ overrun is an error of the CQ).
// `tail` is the producer's first look at cq.tail, possibly stale by the time
// it reads head (a parameter so tests can replay that interleaving).
[[gnu::always_inline]] inline CqPush cq_push_from(const Segment& seg, SharedCq& cq, const Cqe& cqe, uint64_t tail) {
  for (;;) {
    // A closed tail (cq_move) fails the fullness test below: no test of its
    // own on the way to the CAS.
    const uint32_t capacity = cq_capacity(cq);
    // head_seen never runs ahead of head, so it can only make the ring look
    // fuller than it is; head itself (the consumer's line) is read only then.
    // Release/acquire on head_seen carries the consumer's release of head to
    // producers that did not read head themselves.
    uint64_t head = cq.head_seen.load(std::memory_order_acquire);
    if (tail < head || tail - head >= capacity) {
      if (tail & kCqTailClosed) [[unlikely]] {
        tail = cq_wait_open(cq);
        continue;
      }
      head = cq.head.load(std::memory_order_acquire);
      cq.head_seen.store(head, std::memory_order_release);
    }
    // A stale `tail` can be behind a head the consumer has since advanced:
    // only a fresh tail that is a full ring ahead means overrun.
    if (tail < head || tail - head >= capacity) {
      const uint64_t fresh = cq.tail.load(std::memory_order_acquire);
      if (fresh != tail) {
        tail = fresh;
        continue;
      }
      // The ring grew while we looked (closed and reopened at this tail).
      if (cq_capacity(cq) != capacity) continue;
      if (tail >= head) {
        cq.overrun.store(1, std::memory_order_release);
        return CqPush::kOverrun;
      }
    }
    if (cq.tail.compare_exchange_weak(tail, tail + 1, std::memory_order_acq_rel)) break;
  }
  // Ring and capacity as they are at our reservation (read after the CAS: a
  // move may have happened since the loop's look), once for both slots.
  CqeSlot* const ring = seg.ptr<CqeSlot>(__atomic_load_n(&cq.ring, __ATOMIC_RELAXED));
  const uint64_t mask = cq_capacity(cq) - 1;
  CqeSlot* s = ring + (tail & mask);
  s->cqe = cqe;
  // The stamp is taken after the slot is reserved, so producers racing for
  // neighbouring slots may stamp out of order: the consumer keeps them
  // monotonic (verbs/cq.cc). A CQ without stamps pays this one test of a
  // word on the line cq_slot() just read.
  if (__atomic_load_n(&cq.stamps, __ATOMIC_RELAXED) != 0) [[unlikely]]
    cq_stamp_now(seg, cq, tail);
  s->seq.store(tail + 1, std::memory_order_release);
  // Own the next slot's line before the next entry: its stores then do not
  // hold up the fence that follows a push (cq_output.cc) with a miss.
  prefetch_for_write(ring + ((tail + 1) & mask));
  return CqPush::kOk;
}

[[gnu::always_inline]] inline CqPush cq_push(const Segment& seg, SharedCq& cq, const Cqe& cqe) {
  return cq_push_from(seg, cq, cqe, cq.tail.load(std::memory_order_acquire));
}

// Owner only. Returns false when the next entry is not yet published.
inline bool cq_pop(const Segment& seg, SharedCq& cq, Cqe* out) {
  const uint64_t head = cq.head.load(std::memory_order_relaxed);
  CqeSlot* s = cq_owned_slot(seg, cq, head);
  if (s->seq.load(std::memory_order_acquire) != head + 1) return false;
  *out = s->cqe;
  cq.head.store(head + 1, std::memory_order_release);
  return true;
}

// Owner only, for reading an entry in place: the next entry, or null when
// it is not yet published. It stays the owner's until cq_release.
inline const Cqe* cq_peek(const Segment& seg, const SharedCq& cq, uint64_t head) {
  const CqeSlot* s = cq_owned_slot(seg, cq, head);
  return s->seq.load(std::memory_order_acquire) == head + 1 ? &s->cqe : nullptr;
}

// Owner only: the entry at `head`, read, goes back to producers.
inline void cq_release(SharedCq& cq, uint64_t head) { cq.head.store(head + 1, std::memory_order_release); }

// cq_pop for a CQ that keeps timestamps: also the entry's stamp.
inline bool cq_pop_stamped(const Segment& seg, SharedCq& cq, Cqe* out, uint64_t* stamp) {
  const uint64_t head = cq.head.load(std::memory_order_relaxed);
  CqeSlot* s = cq_owned_slot(seg, cq, head);
  if (s->seq.load(std::memory_order_acquire) != head + 1) return false;
  *out = s->cqe;
  *stamp = cq_stamp(seg, cq, head)->load(std::memory_order_relaxed);
  cq.head.store(head + 1, std::memory_order_release);
  return true;
}

// Owner only, with no poll of this CQ running: moves its entries onto `ring`
// (`capacity` slots, larger than the current ring; `stamps` after it or 0),
// at the same indices, and makes producers use it. Producers that reserved a
// slot before the tail was closed publish it into the old ring first; the
// wait for them is bounded by `patience_spins` (a producer that died
// mid-push stalls the CQ anyway): false then, and nothing changed.
// The old ring is unused once this returns true.
inline bool cq_move(const Segment& seg, SharedCq& cq, Offset ring, uint32_t capacity, Offset stamps,
                    uint64_t patience_spins) {
  uint64_t tail = cq.tail.load(std::memory_order_acquire);
  while (!cq.tail.compare_exchange_weak(tail, tail | kCqTailClosed, std::memory_order_acq_rel)) {
  }
  const uint64_t head = cq.head.load(std::memory_order_relaxed);
  for (uint64_t i = head; i < tail; ++i) {
    for (uint64_t spins = 0; cq_slot(seg, cq, i)->seq.load(std::memory_order_acquire) != i + 1; ++spins) {
      if (spins == patience_spins) {
        cq.tail.store(tail, std::memory_order_release);
        return false;
      }
      if (spins > 64) sched_yield();
    }
  }
  // Arena memory comes zeroed: no slot of the new ring looks published.
  CqeSlot* fresh = seg.ptr<CqeSlot>(ring);
  for (uint64_t i = head; i < tail; ++i) {
    CqeSlot* from = cq_slot(seg, cq, i);
    CqeSlot* to = fresh + (i & (capacity - 1));
    to->cqe = from->cqe;
    if (stamps != 0)
      seg.ptr<std::atomic<uint64_t>>(stamps)[i & (capacity - 1)].store(cq_stamp(seg, cq, i)->load(std::memory_order_relaxed),
                                                                       std::memory_order_relaxed);
    to->seq.store(i + 1, std::memory_order_relaxed);
  }
  __atomic_store_n(&cq.ring, ring, __ATOMIC_RELAXED);
  __atomic_store_n(&cq.stamps, stamps, __ATOMIC_RELAXED);
  __atomic_store_n(&cq.capacity, capacity, __ATOMIC_RELAXED);
  cq.head_seen.store(head, std::memory_order_relaxed);
  cq.tail.store(tail, std::memory_order_release);  // reopen: everything above is seen before it
  return true;
}

// Owner only, with no poll of this CQ running: removes the unpolled entries
// that `match` selects, keeping the others in order; `removed` sees each
// entry it takes out. Returns how many it removed. For ibv_destroy_qp,
// which takes a QP's completions out of its CQs as rdma-core's mlx4/mlx5
// providers do (__mlx5_cq_clean): consumers such as libfabric's verbs
// provider free a QP's WR contexts when they destroy it, and a completion
// polled afterwards would name freed memory.
// Entries reserved but not yet published are waited for (bounded by
// `patience_spins`: a producer that died mid-push stalls the CQ anyway);
// the purge stops at one that stays unpublished. Producers keep reserving
// at the tail meanwhile: only published slots below it are rewritten, and
// head only moves forward, so no producer's fullness check is misled.
template <class Match, class Removed>
inline uint32_t cq_purge(const Segment& seg, SharedCq& cq, Match&& match, Removed&& removed,
                         uint64_t patience_spins) {
  const uint64_t head = cq.head.load(std::memory_order_relaxed);
  const uint64_t tail = cq.tail.load(std::memory_order_acquire) & ~kCqTailClosed;
  uint64_t end = head;
  for (; end < tail; ++end) {
    uint64_t spins = 0;
    while (cq_owned_slot(seg, cq, end)->seq.load(std::memory_order_acquire) != end + 1) {
      if (++spins == patience_spins) break;
      if (spins > 64) sched_yield();
    }
    if (spins == patience_spins) break;
  }
  // Newest first: each kept entry moves up by the number of removed ones
  // older than it, into a slot already read (removed, or itself moved up).
  uint64_t gap = 0;
  for (uint64_t i = end; i-- > head;) {
    CqeSlot* from = cq_owned_slot(seg, cq, i);
    if (match(static_cast<const Cqe&>(from->cqe))) {
      removed(static_cast<const Cqe&>(from->cqe));
      ++gap;
      continue;
    }
    if (gap == 0) continue;
    cq_owned_slot(seg, cq, i + gap)->cqe = from->cqe;
    if (cq.stamps != 0)
      cq_stamp(seg, cq, i + gap)->store(cq_stamp(seg, cq, i)->load(std::memory_order_relaxed),
                                        std::memory_order_relaxed);
  }
  // The slots below the new head are free for producers; those from it to
  // `end` keep their published sequence numbers, now with moved contents.
  if (gap != 0) cq.head.store(head + gap, std::memory_order_release);
  return static_cast<uint32_t>(gap);
}

inline bool cq_empty(const Segment& seg, const SharedCq& cq) {
  const uint64_t head = cq.head.load(std::memory_order_relaxed);
  return cq_owned_slot(seg, cq, head)->seq.load(std::memory_order_acquire) != head + 1;
}

}  // namespace softverbs::shm
