// RC atomics (atomic_cap IBV_ATOMIC_HCA): 64-bit, 8-byte aligned, host byte
// order; the original value lands in the 8-byte local SGE. Single operations,
// exactly-once FetchAdd from several processes and QPs, CmpSwap as a lock.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }

constexpr size_t kWords = 8;  // target words 0..7; word 3 is the one operated on
constexpr size_t kWord = 3;

// One atomic against word 3 of the target; the target then checks the word
// and that its neighbours are untouched.
struct AtomicCase {
  const char* name;
  ibv_wr_opcode op;
  uint64_t initial;
  uint64_t compare_add;
  uint64_t swap;
  uint64_t expect_remote;
};

void run_atomic_case(const AtomicCase& c) {
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        if (ep->dev.atomic_cap == IBV_ATOMIC_NONE) {
          GTEST_SKIP() << "no atomics";
        }
        auto local = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, local);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        Wr w = c.op == IBV_WR_ATOMIC_CMP_AND_SWP
                   ? wr_cas(1, local->sge(8, 8), remote.at(kWord * 8), c.compare_add, c.swap)
                   : wr_faa(1, local->sge(8, 8), remote.at(kWord * 8), c.compare_add);
        ASSERT_TRUE(run_wr(ep->qp(), w));
        EXPECT_EQ(c.initial, load64(local->data() + 8)) << c.name << ": the original value";
        EXPECT_TRUE(expect_guard_outside(local->data(), 64, {{8, 8}}, "local atomic buffer"));
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto words = Region::create(ep->pd.get(), kWords * 8);
        ASSERT_NE(nullptr, words);
        for (size_t i = 0; i < kWords; ++i) store64(words->data() + i * 8, 0x1111111111111111ull * i);
        store64(words->data() + kWord * 8, c.initial);
        ASSERT_TRUE(p.peer().send(words->remote()));
        ASSERT_TRUE(p.peer().wait("done"));
        EXPECT_EQ(c.expect_remote, load64(words->data() + kWord * 8)) << c.name << ": the target word";
        for (size_t i = 0; i < kWords; ++i) {
          if (i == kWord) continue;
          EXPECT_EQ(0x1111111111111111ull * i, load64(words->data() + i * 8)) << "word " << i;
        }
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

TEST(RcAtomic, CompareSwapMatching) {
  run_atomic_case({"CmpSwap, compare matches", IBV_WR_ATOMIC_CMP_AND_SWP, 0x0123456789ABCDEFull,
                   0x0123456789ABCDEFull, 0xFEDCBA9876543210ull, 0xFEDCBA9876543210ull});
}

TEST(RcAtomic, CompareSwapNotMatching) {
  run_atomic_case({"CmpSwap, compare differs", IBV_WR_ATOMIC_CMP_AND_SWP, 0x0123456789ABCDEFull,
                   0x0123456789ABCDEEull, 0xFEDCBA9876543210ull, 0x0123456789ABCDEFull});
}

TEST(RcAtomic, FetchAddWrapsAround) {
  run_atomic_case({"FetchAdd across 2^64", IBV_WR_ATOMIC_FETCH_AND_ADD, 0xFFFFFFFFFFFFFFF0ull, 0x20, 0,
                   0x10});
}

TEST(RcAtomic, FetchAddCarriesAcross32Bits) {
  run_atomic_case({"FetchAdd carry into the high word", IBV_WR_ATOMIC_FETCH_AND_ADD,
                   0x00000001FFFFFFFFull, 1, 0, 0x0000000200000000ull});
}

// Several processes, two QPs each, FetchAdd(+1) on one counter with several
// atomics in flight per QP. Exactly once: the final value is the number of
// adds, and the values returned are 0..N-1, each once.
TEST(RcAtomic, ConcurrentFetchAddExactlyOnce) {
  constexpr int kInitiators = 3;
  constexpr int kQpsEach = 2;
  constexpr int kAddsPerQp = 300;
  constexpr int kWindow = 4;
  std::vector<ProcSpec> procs;
  procs.push_back({"target", [&](Proc& p) {
                     auto ep = Endpoint::open();
                     ASSERT_NE(nullptr, ep);
                     for (int r = 1; r <= kInitiators; ++r)
                       ASSERT_TRUE(connect_qps(p.link(r), *ep, QpConfig{}, kQpsEach));
                     auto counter = Region::create(ep->pd.get(), 64);
                     ASSERT_NE(nullptr, counter);
                     store64(counter->data() + 8, 0);
                     for (int r = 1; r <= kInitiators; ++r) {
                       ASSERT_TRUE(p.link(r).send(counter->remote(8)));
                     }
                     std::vector<uint64_t> all;
                     for (int r = 1; r <= kInitiators; ++r) {
                       std::vector<uint64_t> got;
                       ASSERT_TRUE(p.link(r).recv_vector(&got, Deadline(scaled(Millis(30'000))),
                                                         "an initiator's fetched values"));
                       all.insert(all.end(), got.begin(), got.end());
                     }
                     const uint64_t total = uint64_t{kInitiators} * kQpsEach * kAddsPerQp;
                     EXPECT_EQ(total, load64(counter->data() + 8)) << "final counter";
                     ASSERT_EQ(total, all.size());
                     std::sort(all.begin(), all.end());
                     for (uint64_t i = 0; i < total; ++i) {
                       if (all[i] != i) {
                         ADD_FAILURE() << "fetched values are not 0.." << total - 1
                                       << " exactly once: position " << i << " holds " << all[i];
                         break;
                       }
                     }
                     EXPECT_TRUE(expect_guard_outside(counter->data(), 64, {{8, 8}}, "counter neighbours"));
                   }});
  for (int r = 1; r <= kInitiators; ++r) {
    procs.push_back({"initiator" + std::to_string(r), [&](Proc& p) {
                       auto ep = Endpoint::open();
                       ASSERT_NE(nullptr, ep);
                       ASSERT_TRUE(connect_qps(p.link(0), *ep, QpConfig{}, kQpsEach));
                       RemoteBuf counter;
                       ASSERT_TRUE(p.link(0).recv(&counter));
                       auto results = Region::create(ep->pd.get(), kQpsEach * kAddsPerQp * 8);
                       ASSERT_NE(nullptr, results);
                       // Round-robin over the QPs, up to kWindow atomics in flight on each.
                       std::vector<int> posted(kQpsEach, 0), done(kQpsEach, 0);
                       const Deadline deadline(scaled(Millis(25'000)));
                       int remaining = kQpsEach * kAddsPerQp;
                       while (remaining > 0) {
                         ASSERT_FALSE(deadline.expired()) << remaining << " FetchAdds still outstanding";
                         for (int q = 0; q < kQpsEach; ++q) {
                           while (posted[q] < kAddsPerQp && posted[q] - done[q] < kWindow) {
                             const int slot = q * kAddsPerQp + posted[q];
                             Wr w = wr_faa(slot, results->sge(slot * 8, 8), counter, 1);
                             ASSERT_TRUE(post(ep->qp(q), w));
                             ++posted[q];
                           }
                           ibv_wc wc[8];
                           const int n = ibv_poll_cq(ep->qp(q).send_cq(), 8, wc);
                           ASSERT_GE(n, 0);
                           for (int i = 0; i < n; ++i) {
                             ASSERT_EQ(IBV_WC_SUCCESS, wc[i].status) << describe(wc[i]);
                             EXPECT_EQ(IBV_WC_FETCH_ADD, wc[i].opcode) << describe(wc[i]);
                             EXPECT_EQ(static_cast<uint64_t>(q * kAddsPerQp + done[q]), wc[i].wr_id)
                                 << "completions out of post order";
                             ++done[q];
                             --remaining;
                           }
                         }
                         sched_yield();
                       }
                       std::vector<uint64_t> values(kQpsEach * kAddsPerQp);
                       std::memcpy(values.data(), results->data(), values.size() * 8);
                       ASSERT_TRUE(p.link(0).send_vector(values));
                     }});
  }
  run_procs(std::move(procs), {.timeout = Millis(60'000)});
}

// CmpSwap(0 -> me) as a spin lock guarding a plain counter that each holder
// READs, increments and WRITEs back; release with CmpSwap(me -> 0), which must
// find the lock still ours. The counter ends at the number of critical sections.
TEST(RcAtomic, CompareSwapAsLock) {
  constexpr int kContenders = 3;
  constexpr int kRounds = 30;
  std::vector<ProcSpec> procs;
  procs.push_back({"target", [&](Proc& p) {
                     auto ep = Endpoint::open();
                     ASSERT_NE(nullptr, ep);
                     for (int r = 1; r <= kContenders; ++r) {
                       ASSERT_TRUE(connect_qps(p.link(r), *ep, QpConfig{}));
                     }
                     // Lock word at 0, counter at 64 (another cache line).
                     auto words = Region::create(ep->pd.get(), 128);
                     ASSERT_NE(nullptr, words);
                     store64(words->data(), 0);
                     store64(words->data() + 64, 0);
                     for (int r = 1; r <= kContenders; ++r) {
                       ASSERT_TRUE(p.link(r).send(words->remote()));
                     }
                     for (int r = 1; r <= kContenders; ++r)
                       ASSERT_TRUE(p.link(r).wait("finished", Deadline(scaled(Millis(40'000)))));
                     EXPECT_EQ(0u, load64(words->data())) << "lock word after every release";
                     EXPECT_EQ(uint64_t{kContenders} * kRounds, load64(words->data() + 64)) << "counter";
                   }});
  for (int r = 1; r <= kContenders; ++r) {
    procs.push_back({"contender" + std::to_string(r), [&, r](Proc& p) {
                       auto ep = Endpoint::open();
                       ASSERT_NE(nullptr, ep);
                       ASSERT_TRUE(connect_qps(p.link(0), *ep, QpConfig{}));
                       TestQp& qp = ep->qp();
                       RemoteBuf words;
                       ASSERT_TRUE(p.link(0).recv(&words));
                       auto local = Region::create(ep->pd.get(), 64);
                       ASSERT_NE(nullptr, local);
                       const uint64_t me = static_cast<uint64_t>(r);
                       const Deadline deadline(scaled(Millis(35'000)));
                       uint64_t id = 0;
                       for (int round = 0; round < kRounds; ++round) {
                         for (;;) {  // acquire
                           ASSERT_FALSE(deadline.expired()) << "could not take the lock";
                           Wr cas = wr_cas(id++, local->sge(0, 8), words, 0, me);
                           ASSERT_TRUE(run_wr(qp, cas));
                           const uint64_t old = load64(local->data());
                           if (old == 0) break;
                           ASSERT_LE(old, uint64_t{kContenders}) << "lock word holds garbage";
                           ASSERT_NE(me, old) << "we already held the lock";
                           ::usleep(50);
                         }
                         Wr read = wr_read(id++, {local->sge(8, 8)}, words.at(64));
                         ASSERT_TRUE(run_wr(qp, read));
                         store64(local->data() + 8, load64(local->data() + 8) + 1);
                         Wr write = wr_write(id++, {local->sge(8, 8)}, words.at(64));
                         ASSERT_TRUE(run_wr(qp, write));
                         Wr release = wr_cas(id++, local->sge(16, 8), words, me, 0);
                         ASSERT_TRUE(run_wr(qp, release));
                         ASSERT_EQ(me, load64(local->data() + 16)) << "someone else released our lock";
                       }
                       ASSERT_TRUE(p.link(0).signal("finished"));
                     }});
  }
  run_procs(std::move(procs), {.timeout = Millis(60'000)});
}

}  // namespace
}  // namespace softverbs::integration
