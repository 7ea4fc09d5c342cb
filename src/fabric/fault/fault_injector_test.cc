#include "fabric/fault/fault_injector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

namespace softverbs::fabric::fault {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

// Records what leaves, with the injector's idea of "when" (the time of the
// call that made the Sink call).
struct Recorder : Sink {
  struct Out {
    std::vector<uint8_t> bytes;
    Clock::time_point at;
    const uint8_t* data;  // where the bytes were, to tell forward from copy
    uint64_t tag;
  };
  std::vector<Out> out;
  Clock::time_point now;
  void send(std::span<const uint8_t> d, uint64_t tag) override {
    out.push_back({std::vector<uint8_t>(d.begin(), d.end()), now, d.data(), tag});
  }
};

// Datagram `id`: the id in the first four bytes, then a pattern, of a length
// that varies with the id (4..1027 bytes).
std::vector<uint8_t> datagram(uint32_t id) {
  std::vector<uint8_t> d(4 + (id * 37) % 1024);
  std::memcpy(d.data(), &id, 4);
  for (size_t i = 4; i < d.size(); ++i) d[i] = static_cast<uint8_t>(id + i * 13);
  return d;
}

uint32_t id_of(const std::vector<uint8_t>& d) {
  uint32_t id = 0;
  std::memcpy(&id, d.data(), 4);
  return id;
}

FaultConfig config(const char* text) {
  const FaultConfigParse r = parse_fault_config(text);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.config;
}

// Submits datagrams 0..n-1, one per `step`, calling release_due as a
// progress loop would, then waits for everything held.
std::vector<Recorder::Out> run(FaultInjector& fi, uint32_t n, nanoseconds step = microseconds(10)) {
  Recorder r;
  Clock::time_point t = kT0;
  for (uint32_t id = 0; id < n; ++id) {
    r.now = t;
    fi.release_due(t, r);
    const std::vector<uint8_t> d = datagram(id);
    fi.submit(d, t, r, uint64_t{id} + 1000);
    t += step;
  }
  while (std::optional<Clock::time_point> due = fi.next_deadline()) {
    r.now = t = std::max(t, *due);
    fi.release_due(t, r);
  }
  return std::move(r.out);
}

void expect_balanced(const FaultInjector& fi) {
  const FaultCounters& c = fi.counters();
  EXPECT_EQ(c.submitted + c.duplicated, c.dropped + c.sent + fi.held());
}

TEST(FaultInjector, InactiveForwardsTheCallersBytesAndHoldsNothing) {
  FaultInjector fi(FaultConfig{});
  Recorder r;
  for (uint32_t id = 0; id < 100; ++id) {
    const std::vector<uint8_t> d = datagram(id);
    fi.submit(d, kT0, r);
    ASSERT_EQ(r.out.size(), id + 1u);
    EXPECT_EQ(r.out.back().data, d.data()) << "fast path must not copy";
    EXPECT_EQ(r.out.back().bytes, d);
  }
  EXPECT_EQ(fi.held(), 0u);
  EXPECT_FALSE(fi.next_deadline().has_value());
  EXPECT_EQ(fi.counters().submitted, 100u);
  EXPECT_EQ(fi.counters().sent, 100u);
  expect_balanced(fi);
}

// The tag says where a datagram goes; it must stay with the datagram through
// every hold, duplication and corruption (which alter the bytes, never it).
TEST(FaultInjector, TagTravelsWithEveryCopy) {
  FaultInjector fi(config("dup=0.3,reorder=0.3:5,corrupt=0.3,delay=20us,jitter=20us,seed=9"));
  const std::vector<Recorder::Out> out = run(fi, 500);
  ASSERT_GT(out.size(), 500u);
  size_t corrupted = 0;
  for (const Recorder::Out& o : out) {
    const uint32_t id = static_cast<uint32_t>(o.tag - 1000);
    ASSERT_LT(id, 500u);
    const std::vector<uint8_t> sent = datagram(id);
    ASSERT_EQ(o.bytes.size(), sent.size()) << "tag " << o.tag << " on another datagram";
    int flipped = 0;
    for (size_t i = 0; i < sent.size(); ++i) flipped += __builtin_popcount(o.bytes[i] ^ sent[i]);
    ASSERT_LE(flipped, 1) << "tag " << o.tag << " on another datagram";
    corrupted += flipped;
  }
  EXPECT_GT(corrupted, 0u);
  EXPECT_GT(fi.counters().reordered.load(), 0u);
}

TEST(FaultInjector, SameSeedSameOutputDifferentSeedDifferentOutput) {
  const char* kFaults =
      "loss=0.05,dup=0.05,reorder=0.1:6,corrupt=0.05,delay=30us,jitter=25us,hold=200us,capacity=64";
  auto with_seed = [&](uint64_t seed) {
    FaultConfig c = config(kFaults);
    c.seed = seed;
    FaultInjector fi(c);
    std::vector<Recorder::Out> out = run(fi, 3000);
    expect_balanced(fi);
    // Every fault must actually have happened, or the comparison proves little.
    const FaultCounters& k = fi.counters();
    EXPECT_GT(k.dropped, 0u);
    EXPECT_GT(k.duplicated, 0u);
    EXPECT_GT(k.reordered, 0u);
    EXPECT_GT(k.corrupted, 0u);
    EXPECT_GT(k.delayed, 0u);
    return out;
  };
  const std::vector<Recorder::Out> a = with_seed(42);
  const std::vector<Recorder::Out> b = with_seed(42);
  const std::vector<Recorder::Out> c = with_seed(43);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].bytes, b[i].bytes) << "output " << i;
    ASSERT_EQ(a[i].at, b[i].at) << "output " << i;
  }
  bool differs = a.size() != c.size();
  for (size_t i = 0; !differs && i < a.size(); ++i) differs = a[i].bytes != c[i].bytes;
  EXPECT_TRUE(differs);
}

TEST(FaultInjector, LossRateIsRoughlyTheConfiguredOne) {
  FaultInjector all(config("loss=1"));
  EXPECT_TRUE(run(all, 500).empty());
  EXPECT_EQ(all.counters().dropped, 500u);

  FaultInjector some(config("loss=0.3,seed=5"));
  const std::vector<Recorder::Out> out = run(some, 10000);
  // 3000 expected, sd ~46: a generous band that a broken draw still misses.
  EXPECT_GT(some.counters().dropped, 2700u);
  EXPECT_LT(some.counters().dropped, 3300u);
  EXPECT_EQ(out.size() + some.counters().dropped, 10000u);
  // What survives keeps its order and bytes.
  for (size_t i = 1; i < out.size(); ++i) EXPECT_LT(id_of(out[i - 1].bytes), id_of(out[i].bytes));
  for (const Recorder::Out& o : out) EXPECT_EQ(o.bytes, datagram(id_of(o.bytes)));
}

TEST(FaultInjector, DuplicateSendsTwoIdenticalCopies) {
  FaultInjector fi(config("dup=1"));
  const std::vector<Recorder::Out> out = run(fi, 50);
  ASSERT_EQ(out.size(), 100u);
  for (uint32_t id = 0; id < 50; ++id) {
    EXPECT_EQ(out[2 * id].bytes, datagram(id));
    EXPECT_EQ(out[2 * id + 1].bytes, datagram(id));
  }
  EXPECT_EQ(fi.counters().duplicated, 50u);
  expect_balanced(fi);
}

TEST(FaultInjector, CorruptFlipsExactlyOneBitOfACopy) {
  FaultInjector fi(config("corrupt=1,seed=9"));
  Recorder r;
  std::vector<size_t> bits_hit(8);
  for (uint32_t id = 0; id < 400; ++id) {
    const std::vector<uint8_t> d = datagram(id);
    const std::vector<uint8_t> before = d;
    fi.submit(d, kT0, r);
    ASSERT_EQ(d, before) << "the caller's datagram must stay intact";
    const std::vector<uint8_t>& got = r.out.back().bytes;
    ASSERT_EQ(got.size(), d.size());
    int flipped = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      const uint8_t x = got[i] ^ d[i];
      flipped += std::popcount(x);
      if (x != 0) bits_hit[std::countr_zero(x)]++;
    }
    EXPECT_EQ(flipped, 1) << "datagram " << id;
  }
  EXPECT_EQ(fi.counters().corrupted, 400u);
  // Every bit position of a byte gets hit: the choice covers whole bytes.
  for (size_t b = 0; b < 8; ++b) EXPECT_GT(bits_hit[b], 0u) << "bit " << b;
}

TEST(FaultInjector, ReorderStaysInsideTheWindowAndLosesNothing) {
  constexpr uint32_t kWindow = 4;
  constexpr uint32_t kN = 2000;
  FaultInjector fi(config("reorder=0.3:4,seed=3"));
  const std::vector<Recorder::Out> out = run(fi, kN);
  ASSERT_EQ(out.size(), kN);
  std::vector<uint32_t> ids;
  for (const Recorder::Out& o : out) ids.push_back(id_of(o.bytes));
  EXPECT_FALSE(std::is_sorted(ids.begin(), ids.end()));
  std::vector<uint32_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(sorted[i], i) << "lost or doubled";
  // A datagram held back is overtaken by at most kWindow later ones.
  uint32_t highest = 0;
  for (uint32_t id : ids) {
    EXPECT_LE(highest, id + kWindow) << "datagram " << id;
    highest = std::max(highest, id);
  }
  EXPECT_GT(fi.counters().reordered, 400u);
  expect_balanced(fi);
}

TEST(FaultInjector, ReorderHoldIsBoundedInTime) {
  FaultInjector fi(config("reorder=1:8,hold=100us"));
  Recorder r;
  const std::vector<uint8_t> d = datagram(1);
  fi.submit(d, kT0, r);
  EXPECT_TRUE(r.out.empty());
  ASSERT_TRUE(fi.next_deadline().has_value());
  EXPECT_EQ(*fi.next_deadline(), kT0 + microseconds(100));
  fi.release_due(kT0 + microseconds(100) - nanoseconds(1), r);
  EXPECT_TRUE(r.out.empty());
  fi.release_due(kT0 + microseconds(100), r);
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_EQ(r.out[0].bytes, d);
  EXPECT_FALSE(fi.next_deadline().has_value());
}

TEST(FaultInjector, FixedDelayKeepsOrderAndTiming) {
  FaultInjector fi(config("delay=50us"));
  const std::vector<Recorder::Out> out = run(fi, 100, microseconds(7));
  ASSERT_EQ(out.size(), 100u);
  for (uint32_t id = 0; id < 100; ++id) {
    EXPECT_EQ(id_of(out[id].bytes), id);
    // run() polls once per 7 us step, so a datagram leaves at its due time
    // or at the first poll after it.
    const Clock::time_point due = kT0 + id * microseconds(7) + microseconds(50);
    EXPECT_GE(out[id].at, due);
    EXPECT_LT(out[id].at, due + microseconds(7));
  }
  EXPECT_EQ(fi.counters().delayed, 100u);
}

TEST(FaultInjector, JitterStaysInItsBand) {
  FaultInjector fi(config("delay=50us,jitter=20us,seed=11"));
  Recorder r;
  std::vector<Clock::time_point> sent_at(200);
  // Poll every nanosecond-exact due time so the measured delay is the drawn one.
  for (uint32_t id = 0; id < 200; ++id) {
    const std::vector<uint8_t> d = datagram(id);
    fi.submit(d, kT0 + id * microseconds(1), r);
  }
  while (std::optional<Clock::time_point> due = fi.next_deadline()) {
    r.now = *due;
    fi.release_due(*due, r);
  }
  ASSERT_EQ(r.out.size(), 200u);
  nanoseconds lo = nanoseconds::max();
  nanoseconds hi = nanoseconds::min();
  for (const Recorder::Out& o : r.out) {
    const nanoseconds d = o.at - (kT0 + id_of(o.bytes) * microseconds(1));
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_GE(lo, microseconds(30));
  EXPECT_LE(hi, microseconds(70));
  // The draw spreads over the band rather than sitting at the mean.
  EXPECT_LT(lo, microseconds(35));
  EXPECT_GT(hi, microseconds(65));
}

TEST(FaultInjector, FullPoolOrOversizedDatagramIsSentAtOnceAndCounted) {
  FaultInjector fi(config("delay=1ms,capacity=2,max_datagram=600"));
  Recorder r;
  for (uint32_t id : {0u, 1u, 2u, 3u}) {  // lengths 4, 41, 78, 115: all fit a slot
    const std::vector<uint8_t> d = datagram(id);
    fi.submit(d, kT0, r);
  }
  EXPECT_EQ(fi.held(), 2u);
  ASSERT_EQ(r.out.size(), 2u);
  EXPECT_EQ(id_of(r.out[0].bytes), 2u);
  EXPECT_EQ(id_of(r.out[1].bytes), 3u);
  fi.flush(r);
  const std::vector<uint8_t> big = datagram(20);  // 744 bytes > 600
  fi.submit(big, kT0, r);
  ASSERT_EQ(r.out.size(), 5u);
  EXPECT_EQ(r.out.back().bytes, big);
  EXPECT_EQ(fi.counters().overflow, 3u);
  EXPECT_EQ(fi.held(), 0u);
  expect_balanced(fi);
}

TEST(FaultInjector, EverythingAtOnceStillAccountsForEveryDatagram) {
  FaultInjector fi(config("loss=0.2,dup=0.2,reorder=0.2:3,corrupt=0.2,delay=5us,jitter=5us,"
                          "capacity=8,seed=77"));
  run(fi, 5000, microseconds(1));
  EXPECT_EQ(fi.held(), 0u);
  EXPECT_GT(fi.counters().overflow, 0u);  // capacity 8 is meant to overflow here
  expect_balanced(fi);
}

}  // namespace
}  // namespace softverbs::fabric::fault
