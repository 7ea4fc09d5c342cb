#include "shm/rings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

namespace softverbs::shm {
namespace {

class RingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-rings-test-" + std::to_string(getpid());
    Result<std::unique_ptr<Segment>> s = Segment::open(path_);
    ASSERT_TRUE(s.is_ok()) << s.code();
    seg_ = std::move(s.value());
  }
  void TearDown() override {
    seg_.reset();
    unlink(path_.c_str());
  }
  SharedCq& make_cq(uint32_t capacity) {
    SharedCq& cq = seg_->cq(1);
    Result<Offset> ring = seg_->arena_alloc(capacity * sizeof(CqeSlot));
    EXPECT_TRUE(ring.is_ok());
    cq.capacity = capacity;
    cq.ring = ring.value();
    cq.slot_state.store(static_cast<uint32_t>(SlotState::kLive));
    return cq;
  }
  RecvQueue& make_rq(uint32_t qp_slot, uint32_t capacity, uint32_t max_sge) {
    RecvQueue& rq = seg_->qp(qp_slot).rq;
    rq.capacity = capacity;
    rq.max_sge = max_sge;
    rq.stride = rq_stride_for(max_sge);
    Result<Offset> ring = seg_->arena_alloc(rq.capacity * rq.stride);
    EXPECT_TRUE(ring.is_ok());
    rq.ring = ring.value();
    return rq;
  }
  std::string path_;
  std::unique_ptr<Segment> seg_;
};

TEST_F(RingsTest, CqOverrunsOnlyWhenFull) {
  SharedCq& cq = make_cq(16);
  Cqe e{};
  for (int i = 0; i < 16; ++i) ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
  EXPECT_EQ(cq_push(*seg_, cq, e), CqPush::kOverrun);
  EXPECT_EQ(cq.overrun.load(), 1u);
}

// A stamped CQ: each entry carries the adapter clock of its push, across a
// wrap of the ring; an unstamped one writes no stamps at all.
TEST_F(RingsTest, CqStampsEachEntryWhenAsked) {
  SharedCq& cq = make_cq(16);
  Result<Offset> stamps = seg_->arena_alloc(16 * sizeof(uint64_t));
  ASSERT_TRUE(stamps.is_ok());
  cq.stamps = stamps.value();
  Cqe e{};
  uint64_t last = 0;
  for (int i = 0; i < 40; ++i) {
    e.wr_id = static_cast<uint64_t>(i);
    const uint64_t before = adapter_clock_ticks();
    ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
    const uint64_t after = adapter_clock_ticks();
    Cqe out;
    uint64_t stamp = 0;
    ASSERT_TRUE(cq_pop_stamped(*seg_, cq, &out, &stamp));
    EXPECT_EQ(out.wr_id, static_cast<uint64_t>(i));
    EXPECT_GE(stamp, before);
    EXPECT_LE(stamp, after);
    EXPECT_GE(stamp, last);
    last = stamp;
  }
  auto* slot0 = seg_->ptr<std::atomic<uint64_t>>(stamps.value());
  const uint64_t kept = slot0->load();  // entry 40 lands in slot 8, entry 48 in slot 0
  cq.stamps = 0;
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
    Cqe out;
    ASSERT_TRUE(cq_pop(*seg_, cq, &out));
  }
  EXPECT_EQ(kept, slot0->load());
}

// Regression: a producer holding a stale tail while the consumer moved head
// past it computed tail - head as a huge number and flagged a false overrun.
TEST_F(RingsTest, StaleTailIsNotAnOverrun) {
  SharedCq& cq = make_cq(16);
  Cqe e{};
  const uint64_t stale = cq.tail.load();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);  // other producers
  Cqe out;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cq_pop(*seg_, cq, &out));          // consumer passes `stale`
  EXPECT_EQ(cq_push_from(*seg_, cq, e, stale), CqPush::kOk);
  EXPECT_EQ(cq.overrun.load(), 0u);
  EXPECT_TRUE(cq_pop(*seg_, cq, &out));
}

// Growing a CQ keeps what it holds, in order, and later pushes land in the
// new ring; a stamped CQ's stamps move with their entries.
TEST_F(RingsTest, CqMoveKeepsEntriesInOrder) {
  SharedCq& cq = make_cq(16);
  Result<Offset> stamps = seg_->arena_alloc(16 * sizeof(uint64_t));
  ASSERT_TRUE(stamps.is_ok());
  cq.stamps = stamps.value();
  Cqe e{};
  Cqe out;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cq_pop(*seg_, cq, &out));  // head and tail at 5: the move wraps
  for (uint64_t i = 0; i < 16; ++i) {
    e.wr_id = i;
    ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
  }
  std::vector<uint64_t> stamps_before;
  for (uint64_t i = 5; i < 21; ++i) stamps_before.push_back(cq_stamp(*seg_, cq, i)->load());
  Result<Offset> ring = seg_->arena_alloc(cq_ring_bytes(64, true));
  ASSERT_TRUE(ring.is_ok());
  ASSERT_TRUE(cq_move(*seg_, cq, ring.value(), 64, ring.value() + 64 * sizeof(CqeSlot), 1000));
  EXPECT_EQ(64u, cq.capacity);
  EXPECT_EQ(ring.value(), cq.ring);
  for (uint64_t i = 16; i < 60; ++i) {
    e.wr_id = i;
    ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk) << "room for 64 now";
  }
  for (uint64_t i = 0; i < 60; ++i) {
    uint64_t stamp = 0;
    ASSERT_TRUE(cq_pop_stamped(*seg_, cq, &out, &stamp));
    EXPECT_EQ(i, out.wr_id);
    if (i < 16) {
      EXPECT_EQ(stamps_before[i], stamp);
    }
  }
  EXPECT_FALSE(cq_pop(*seg_, cq, &out));
  EXPECT_EQ(0u, cq.overrun.load());
}

// A producer that reserved a slot and never wrote it (it died): the move
// gives up and leaves the CQ as it was.
TEST_F(RingsTest, CqMoveGivesUpOnAnUnpublishedEntry) {
  SharedCq& cq = make_cq(16);
  cq.tail.store(1);  // reserved, never published
  Result<Offset> ring = seg_->arena_alloc(cq_ring_bytes(32, false));
  ASSERT_TRUE(ring.is_ok());
  EXPECT_FALSE(cq_move(*seg_, cq, ring.value(), 32, 0, 100));
  EXPECT_EQ(1u, cq.tail.load()) << "reopened";
  EXPECT_EQ(16u, cq.capacity);
}

// ibv_destroy_qp's purge: a QP's entries leave the CQ, the others stay in
// order (across a wrap of the ring), stamps move with their entries, and
// producers go on pushing into the room it made.
TEST_F(RingsTest, CqPurgeRemovesOneQpsEntriesKeepingOrder) {
  SharedCq& cq = make_cq(8);
  Result<Offset> stamps = seg_->arena_alloc(8 * sizeof(uint64_t));
  ASSERT_TRUE(stamps.is_ok());
  cq.stamps = stamps.value();
  Cqe e{};
  for (int i = 0; i < 5; ++i) ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cq_pop(*seg_, cq, &e));  // head and tail at 5: the next entries wrap
  for (uint32_t i = 0; i < 8; ++i) {
    e.qp_num = (i % 3 == 1) ? 0x66 : 0x11;
    e.wr_id = i;
    ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
  }
  EXPECT_EQ(cq_push(*seg_, cq, e), CqPush::kOverrun);
  cq.overrun.store(0);
  std::vector<uint64_t> stamp_of(8);
  for (uint64_t i = 0; i < 8; ++i) stamp_of[i] = cq_stamp(*seg_, cq, 5 + i)->load();
  std::vector<uint64_t> seen;
  const uint32_t removed = cq_purge(
      *seg_, cq, [](const Cqe& c) { return c.qp_num == 0x66; }, [&](const Cqe& c) { seen.push_back(c.wr_id); },
      1000);
  EXPECT_EQ(3u, removed);
  EXPECT_EQ((std::vector<uint64_t>{7, 4, 1}), seen);
  for (int i = 0; i < 3; ++i) {
    e.qp_num = 0x11;
    e.wr_id = 100 + i;
    ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk) << "room made by the purge";
  }
  std::vector<uint64_t> order;
  uint64_t stamp = 0;
  while (cq_pop_stamped(*seg_, cq, &e, &stamp)) {
    EXPECT_EQ(0x11u, e.qp_num);
    if (e.wr_id < 8) {
      EXPECT_EQ(stamp_of[e.wr_id], stamp) << "entry " << e.wr_id;
    }
    order.push_back(e.wr_id);
  }
  EXPECT_EQ((std::vector<uint64_t>{0, 2, 3, 5, 6, 100, 101, 102}), order);
}

// A slot reserved and never published (its producer died): the purge
// stops there and leaves it and everything after it alone.
TEST_F(RingsTest, CqPurgeStopsAtAnUnpublishedEntry) {
  SharedCq& cq = make_cq(16);
  Cqe e{};
  e.qp_num = 0x66;
  ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
  ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
  cq.tail.store(3);  // entry 2 reserved, never published
  EXPECT_EQ(2u, cq_purge(*seg_, cq, [](const Cqe& c) { return c.qp_num == 0x66; }, [](const Cqe&) {}, 100));
  EXPECT_EQ(2u, cq.head.load());
  EXPECT_FALSE(cq_pop(*seg_, cq, &e));
}

// Producers keep pushing while the owner purges one QP's entries again and
// again: every entry of the other QP arrives once, in its producer's order,
// and no producer ever sees the ring overrun.
TEST_F(RingsTest, CqPurgeUnderConcurrentProducers) {
  SharedCq& cq = make_cq(64);
  constexpr int kProducers = 2;
  constexpr uint64_t kPerProducer = 20000;
  constexpr uint32_t kKept = 0x11, kPurged = 0x66;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer;) {
        if (cq.tail.load() - cq.head.load() >= 48) {
          std::this_thread::yield();
          continue;
        }
        Cqe e{};
        e.qp_num = (i % 3 == 0) ? kPurged : kKept;
        e.wr_id = (static_cast<uint64_t>(p) << 32) | i;
        ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
        ++i;
      }
    });
  }
  std::vector<uint64_t> next(kProducers, 0);  // the next kept index expected per producer
  uint64_t purges = 0, removed = 0;
  Cqe e;
  auto kept_after = [](uint64_t i) { return i % 3 == 0 ? i + 1 : i; };
  while (next[0] < kPerProducer || next[1] < kPerProducer) {
    if (++purges % 7 == 0) {
      removed += cq_purge(*seg_, cq, [](const Cqe& c) { return c.qp_num == kPurged; }, [](const Cqe&) {}, 1'000'000);
    }
    if (!cq_pop(*seg_, cq, &e)) {
      std::this_thread::yield();
      continue;
    }
    if (e.qp_num == kPurged) continue;  // pushed after the last purge
    const int p = static_cast<int>(e.wr_id >> 32);
    const uint64_t i = e.wr_id & 0xffffffff;
    ASSERT_EQ(kept_after(next[p]), i) << "kept entries of one producer arrive in order, once";
    next[p] = kept_after(i + 1);
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(cq.overrun.load(), 0u);
  EXPECT_GT(removed, 0u) << "the purges had entries to take out";
}

// Producers keep pushing while the owner grows the ring several times:
// nothing is lost, duplicated or reordered, and no overrun is seen.
TEST_F(RingsTest, CqMoveUnderConcurrentProducers) {
  SharedCq& cq = make_cq(16);
  constexpr int kProducers = 2;
  constexpr uint64_t kPerProducer = 20000;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer;) {
        const uint64_t tail = cq.tail.load() & ~kCqTailClosed;
        if (tail - cq.head.load() >= 12) {
          std::this_thread::yield();
          continue;
        }
        Cqe e{};
        e.wr_id = (static_cast<uint64_t>(p) << 32) | i;
        ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
        ++i;
      }
    });
  }
  std::vector<uint64_t> next(kProducers, 0);
  uint64_t got = 0;
  uint32_t capacity = 16;
  Cqe e;
  while (got < kProducers * kPerProducer) {
    if (got % 5000 == 4999 && capacity < 1024) {
      capacity *= 2;
      Result<Offset> ring = seg_->arena_alloc(cq_ring_bytes(capacity, false));
      ASSERT_TRUE(ring.is_ok());
      ASSERT_TRUE(cq_move(*seg_, cq, ring.value(), capacity, 0, 1'000'000));
    }
    if (!cq_pop(*seg_, cq, &e)) {
      std::this_thread::yield();
      continue;
    }
    const int p = static_cast<int>(e.wr_id >> 32);
    ASSERT_EQ(e.wr_id & 0xffffffff, next[p]) << "entries of one producer arrive in order, once";
    ++next[p];
    ++got;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(cq.overrun.load(), 0u);
  EXPECT_GT(capacity, 16u);
}

TEST_F(RingsTest, ConcurrentProducersNeverSeeFalseOverrun) {
  SharedCq& cq = make_cq(64);
  constexpr int kProducers = 3;
  constexpr uint64_t kPerProducer = 200000;
  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer;) {
        // Keep the ring from filling for real: the consumer keeps up. Waiting
        // threads yield: four of them share two cores (and TSan's atomics).
        if (cq.tail.load() - cq.head.load() >= 32) {
          std::this_thread::yield();
          continue;
        }
        Cqe e{};
        e.wr_id = (static_cast<uint64_t>(p) << 32) | i;
        ASSERT_EQ(cq_push(*seg_, cq, e), CqPush::kOk);
        ++i;
      }
    });
  }
  std::vector<uint64_t> next(kProducers, 0);
  uint64_t got = 0;
  Cqe e;
  while (got < kProducers * kPerProducer && !stop.load()) {
    if (!cq_pop(*seg_, cq, &e)) {
      std::this_thread::yield();
      continue;
    }
    const int p = static_cast<int>(e.wr_id >> 32);
    ASSERT_EQ(e.wr_id & 0xffffffff, next[p]) << "entries of one producer arrive in order, once";
    ++next[p];
    ++got;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(cq.overrun.load(), 0u);
  EXPECT_EQ(got, kProducers * kPerProducer);
}

TEST_F(RingsTest, RecvQueueIsFifoAndBounded) {
  RecvQueue& rq = make_rq(2, 4, 2);
  Sge sge[2] = {{1, 2, 3}, {4, 5, 6}};
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(rq_post(*seg_, rq, i, sge, 2));
  EXPECT_FALSE(rq_post(*seg_, rq, 99, sge, 2));
  uint64_t wr_id;
  uint32_t n;
  uint64_t index;
  Sge out[2];
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
    EXPECT_EQ(wr_id, i);
    EXPECT_EQ(index, i);
    EXPECT_EQ(n, 2u);
    EXPECT_EQ(out[1].lkey, 6u);
  }
  EXPECT_FALSE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
}

// An SRQ grows under its consumers (rq_move): entries keep their indices
// and order; a consumer that copied an entry out of the old ring before the
// move claims it afterwards, once; nothing is claimed while head is closed.
TEST_F(RingsTest, RecvQueueMoveKeepsEntriesAndClaims) {
  RecvQueue& rq = make_rq(6, 4, 1);
  for (uint64_t i = 0; i < 4; ++i) {
    const Sge sge{100 + i, 8, 7};
    ASSERT_TRUE(rq_post(*seg_, rq, i, &sge, 1));
  }
  uint64_t wr_id, index;
  uint32_t n;
  Sge out[1];
  ASSERT_TRUE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
  EXPECT_EQ(wr_id, 0u);
  // A consumer's look at entry 1 in the old ring, before the move.
  const uint64_t seen_head = rq.head.load();
  const RecvWqe* old_entry = rq_consumer_slot(*seg_, rq, seen_head);
  EXPECT_EQ(old_entry->wr_id, 1u);

  const Offset old_ring = rq.ring;
  Result<Offset> ring = seg_->arena_alloc(16 * rq.stride);
  ASSERT_TRUE(ring.is_ok());
  rq_move(*seg_, rq, ring.value(), 16);
  EXPECT_EQ(rq.capacity, 16u);
  EXPECT_NE(rq.ring, old_ring);
  EXPECT_EQ(rq.head.load(), seen_head) << "reopened where it was";
  // That consumer's claim succeeds on the reopened head, with what it copied.
  uint64_t expected = seen_head;
  ASSERT_TRUE(rq.head.compare_exchange_strong(expected, seen_head + 1));
  // The rest come from the new ring, in order, and the new size is usable.
  for (uint64_t i = 4; i < 16; ++i) {
    const Sge sge{100 + i, 8, 7};
    ASSERT_TRUE(rq_post(*seg_, rq, i, &sge, 1)) << i;
  }
  // The two claimed entries' slots are free: 18 posted in all, then full.
  for (uint64_t i = 16; i < 18; ++i) {
    const Sge sge{100 + i, 8, 7};
    ASSERT_TRUE(rq_post(*seg_, rq, i, &sge, 1)) << i;
  }
  const Sge extra{0, 8, 7};
  EXPECT_FALSE(rq_post(*seg_, rq, 99, &extra, 1));
  // While head is closed, a consumer finds nothing (as empty).
  rq.head.fetch_or(kRqHeadClosed);
  EXPECT_FALSE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
  EXPECT_EQ(rq_depth(rq), 16u);
  rq.head.fetch_and(~kRqHeadClosed);
  for (uint64_t i = 2; i < 18; ++i) {
    ASSERT_TRUE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
    EXPECT_EQ(wr_id, i);
    EXPECT_EQ(index, i);
    EXPECT_EQ(out[0].addr, 100 + i);
  }
  EXPECT_FALSE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
}

// Polled completions free slots for the owner, but a note for an entry never
// posted (a stale or foreign completion) must not let a post overwrite an
// entry nobody has claimed.
TEST_F(RingsTest, PolledReceivesFreeOnlyClaimedSlots) {
  RecvQueue& rq = make_rq(4, 4, 1);
  Sge sge{1, 2, 3};
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(rq_post(*seg_, rq, i, &sge, 1));
  rq_note_polled(rq, 10);  // beyond the tail: ignored
  EXPECT_FALSE(rq_post(*seg_, rq, 4, &sge, 1));
  uint64_t wr_id, index;
  uint32_t n;
  Sge out[1];
  for (int k = 0; k < 2; ++k) ASSERT_TRUE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
  rq_note_polled(rq, index);
  rq_note_polled(rq, 0);  // older than what was noted: ignored
  EXPECT_EQ(rq.polled.load(), 2u);
  EXPECT_TRUE(rq_post(*seg_, rq, 4, &sge, 1));
  EXPECT_TRUE(rq_post(*seg_, rq, 5, &sge, 1));
  EXPECT_FALSE(rq_post(*seg_, rq, 6, &sge, 1));
  for (uint64_t i = 2; i < 6; ++i) {
    ASSERT_TRUE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
    EXPECT_EQ(wr_id, i);
  }
}

// A list of receive WRs looks the free room up once (rq_room): what it
// reports must be exactly the slots no consumer still needs, counting
// claims the owner has not seen yet only once it looks at head again.
TEST_F(RingsTest, RoomCountsOnlyFreeSlots) {
  RecvQueue& rq = make_rq(4, 4, 1);
  Sge sge{1, 2, 3};
  EXPECT_EQ(rq_room(rq, 0), 4u);
  for (uint64_t i = 0; i < 3; ++i) rq_write(*seg_, rq, i, i, &sge, 1);
  EXPECT_EQ(rq_room(rq, 3), 1u);
  rq_write(*seg_, rq, 3, 3, &sge, 1);
  EXPECT_EQ(rq_room(rq, 4), 0u);
  uint64_t wr_id, index;
  uint32_t n;
  Sge out[1];
  for (int k = 0; k < 2; ++k) ASSERT_TRUE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
  EXPECT_EQ(rq_room(rq, 4), 2u) << "a full ring re-reads head";
  EXPECT_EQ(rq.head_seen.load(), 2u);
  rq_write(*seg_, rq, 4, 4, &sge, 1);
  EXPECT_EQ(rq_room(rq, 5), 1u);
  rq_write(*seg_, rq, 5, 5, &sge, 1);
  EXPECT_EQ(rq_room(rq, 6), 0u);
  for (uint64_t i = 2; i < 6; ++i) {
    ASSERT_TRUE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
    EXPECT_EQ(wr_id, i);
  }
  EXPECT_FALSE(rq_take(*seg_, rq, &wr_id, out, &n, &index));
}

// An SRQ's completions arrive through several CQs, in any order: the mark
// only ever rises, stays within what was posted, and rises under racing pollers.
TEST_F(RingsTest, SharedPolledMarkOnlyRises) {
  RecvQueue& rq = make_rq(5, 8, 1);
  Sge sge{1, 2, 3};
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(rq_post(*seg_, rq, i, &sge, 1));
  rq_note_polled_shared(rq, 5);
  rq_note_polled_shared(rq, 2);   // polled later through another CQ
  EXPECT_EQ(rq.polled.load(), 6u);
  rq_note_polled_shared(rq, 20);  // beyond the tail: ignored
  EXPECT_EQ(rq.polled.load(), 6u);
  std::vector<std::thread> pollers;
  for (uint64_t t = 0; t < 4; ++t)
    pollers.emplace_back([&rq, t] {
      for (uint64_t i = t; i < 8; i += 4) rq_note_polled_shared(rq, i);
    });
  for (std::thread& p : pollers) p.join();
  EXPECT_EQ(rq.polled.load(), 8u);
}

TEST_F(RingsTest, ConcurrentConsumersTakeEachEntryOnce) {
  RecvQueue& rq = make_rq(3, 256, 1);
  constexpr uint64_t kTotal = 100000;
  std::atomic<uint64_t> taken{0};
  std::vector<std::atomic<uint8_t>> seen(kTotal);
  std::vector<std::thread> consumers;
  for (int c = 0; c < 2; ++c)
    consumers.emplace_back([&] {
      uint64_t wr_id, index;
      uint32_t n;
      Sge out[1];
      while (taken.load() < kTotal)
        if (rq_take(*seg_, rq, &wr_id, out, &n, &index)) {
          seen[wr_id].fetch_add(1);
          taken.fetch_add(1);
        } else {
          std::this_thread::yield();  // empty: let the producer run
        }
    });
  Sge sge{0, 0, 0};
  for (uint64_t i = 0; i < kTotal;)
    if (rq_post(*seg_, rq, i, &sge, 1))
      ++i;
    else
      std::this_thread::yield();  // full: let the consumers run
  for (auto& t : consumers) t.join();
  for (uint64_t i = 0; i < kTotal; ++i) ASSERT_EQ(seen[i].load(), 1) << i;
}

}  // namespace
}  // namespace softverbs::shm
