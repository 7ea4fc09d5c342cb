// Completion timestamps (issue 18): ibv_create_cq_ex with
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP(_WALLCLOCK), the clock that
// ibv_query_device_ex and ibv_query_rt_values_ex report. A completion's
// stamp lies between the raw clock read before its work was posted and the
// one read after it was polled, and the stamps of one CQ never go back,
// whether this process or a peer's responder wrote the entries.
#include <gtest/gtest.h>

#include <ctime>
#include <thread>

#include "harness.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr uint64_t kStampFlags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

struct DestroyCqEx {
  void operator()(ibv_cq_ex* cq) const { EXPECT_EQ(0, ibv_destroy_cq(ibv_cq_ex_to_cq(cq))); }
};
using CqExPtr = std::unique_ptr<ibv_cq_ex, DestroyCqEx>;

// Declared after the CQs: the endpoint's QPs go before the CQs they use.
struct DropQps {
  Endpoint* ep;
  ~DropQps() { ep->qps.clear(); }
};

CqExPtr create_cq_ex(ibv_context* ctx, uint64_t wc_flags, int cqe = 256) {
  ibv_cq_init_attr_ex attr{};
  attr.cqe = static_cast<uint32_t>(cqe);
  attr.wc_flags = IBV_WC_STANDARD_FLAGS | wc_flags;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx, &attr);
  EXPECT_NE(nullptr, cq) << errno_name(errno);
  return CqExPtr(cq);
}

// The adapter's clock, in its ticks (ibv_query_rt_values_ex).
uint64_t raw_clock(ibv_context* ctx) {
  ibv_values_ex v{};
  v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  EXPECT_EQ(0, ibv_query_rt_values_ex(ctx, &v));
  EXPECT_EQ(static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK), v.comp_mask);
  return static_cast<uint64_t>(v.raw_clock.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(v.raw_clock.tv_nsec);
}

uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Stamped {
  uint64_t wr_id;
  ibv_wc_status status;
  uint64_t ts;
  uint64_t wallclock;
};

// Polls `n` completions through the extended interface, with their stamps.
bool poll_stamped(ibv_cq_ex* cq, size_t n, std::vector<Stamped>* out, Millis timeout = scaled(kOpTimeout)) {
  const auto start = Clock::now();
  while (out->size() < n) {
    ibv_poll_cq_attr attr{};
    int rc = ibv_start_poll(cq, &attr);
    if (rc == ENOENT) {
      if (Clock::now() - start > timeout) {
        ADD_FAILURE() << "timed out with " << out->size() << " of " << n << " completions";
        return false;
      }
      sched_yield();
      continue;
    }
    if (rc != 0) {
      ADD_FAILURE() << "ibv_start_poll: " << errno_name(rc);
      return false;
    }
    do {
      out->push_back({cq->wr_id, cq->status, ibv_wc_read_completion_ts(cq), ibv_wc_read_completion_wallclock_ns(cq)});
    } while (out->size() < n && (rc = ibv_next_poll(cq)) == 0);
    ibv_end_poll(cq);
  }
  return true;
}

void expect_stamps_within(const std::vector<Stamped>& got, uint64_t before, uint64_t after, uint64_t real_before,
                          uint64_t real_after) {
  uint64_t last = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("completion " + std::to_string(i));
    EXPECT_EQ(IBV_WC_SUCCESS, got[i].status);
    EXPECT_GE(got[i].ts, before);
    EXPECT_LE(got[i].ts, after);
    EXPECT_GE(got[i].ts, last) << "stamps of one CQ never go back";
    last = got[i].ts;
    // Wall clock: the raw stamp moved onto CLOCK_REALTIME; allow the
    // distance between the two clock reads on either side.
    EXPECT_GE(got[i].wallclock + 1'000'000, real_before);
    EXPECT_LE(got[i].wallclock, real_after + 1'000'000);
  }
}

TEST(Timestamps, DeviceReportsTheClock) {
  run_solo("solo", [](Proc&) {
    auto ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    ibv_device_attr_ex a{};
    ASSERT_EQ(0, ibv_query_device_ex(ctx.get(), nullptr, &a));
    EXPECT_EQ(1'000'000u, a.hca_core_clock) << "kHz: one tick per ns";
    EXPECT_EQ(~uint64_t{0}, a.completion_timestamp_mask);
    const uint64_t t0 = raw_clock(ctx.get());
    timespec mono;
    clock_gettime(CLOCK_MONOTONIC_RAW, &mono);
    const uint64_t t1 = raw_clock(ctx.get());
    const uint64_t mono_ns = static_cast<uint64_t>(mono.tv_sec) * 1'000'000'000ull + mono.tv_nsec;
    EXPECT_LE(t0, mono_ns);
    EXPECT_GE(t1, mono_ns);
    EXPECT_LT(t1 - t0, 100'000'000u);
    ibv_values_ex none{};
    EXPECT_EQ(0, ibv_query_rt_values_ex(ctx.get(), &none));
    EXPECT_EQ(0u, none.comp_mask);
    ibv_values_ex bad{};
    bad.comp_mask = 0x80;
    EXPECT_EQ(EINVAL, ibv_query_rt_values_ex(ctx.get(), &bad));
  });
}

TEST(Timestamps, ReadersOnlyWhenAsked) {
  run_solo("solo", [](Proc&) {
    auto ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    auto plain = create_cq_ex(ctx.get(), 0);
    ASSERT_NE(nullptr, plain);
    EXPECT_EQ(nullptr, plain->read_completion_ts);
    EXPECT_EQ(nullptr, plain->read_completion_wallclock_ns);
    auto ts = create_cq_ex(ctx.get(), IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
    ASSERT_NE(nullptr, ts);
    EXPECT_NE(nullptr, ts->read_completion_ts);
    EXPECT_EQ(nullptr, ts->read_completion_wallclock_ns);
    auto wall = create_cq_ex(ctx.get(), IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
    ASSERT_NE(nullptr, wall);
    EXPECT_EQ(nullptr, wall->read_completion_ts);
    EXPECT_NE(nullptr, wall->read_completion_wallclock_ns);
    ibv_cq_init_attr_ex attr{};
    attr.cqe = 16;
    attr.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_create_cq_ex(ctx.get(), &attr));
    EXPECT_EQ(EOPNOTSUPP, errno);
  });
}

// Both QPs in one process, both CQs stamped: WRITEs and SENDs, many per
// poll, so that entries queue up in the ring.
TEST(Timestamps, LocalCompletionsMonotonicAndNearTheClock) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    auto scq = create_cq_ex(ep->ctx.get(), kStampFlags, 512);
    auto rcq = create_cq_ex(ep->ctx.get(), kStampFlags, 512);
    ASSERT_TRUE(scq && rcq);
    DropQps drop{ep.get()};
    TestQp* a = ep->add_qp({}, ibv_cq_ex_to_cq(scq.get()), ibv_cq_ex_to_cq(rcq.get()));
    TestQp* b = ep->add_qp({}, ibv_cq_ex_to_cq(scq.get()), ibv_cq_ex_to_cq(rcq.get()));
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(connect_local(*a, *b));
    auto mem = Region::create(ep->pd.get(), 64 * 1024);
    ASSERT_NE(nullptr, mem);
    constexpr int kRounds = 4;
    constexpr int kPerRound = 16;
    for (int round = 0; round < kRounds; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      for (int i = 0; i < kPerRound; ++i) ASSERT_TRUE(post_recv(*b, i, {mem->sge(32 * 1024 + i * 64, 64)}));
      const uint64_t before = raw_clock(ep->ctx.get());
      const uint64_t real_before = realtime_ns();
      for (int i = 0; i < kPerRound; ++i) {
        Wr w = i % 2 == 0 ? wr_write(i, {mem->sge(i * 64, 64)}, mem->remote(16 * 1024 + i * 64))
                          : wr_send(i, {mem->sge(i * 64, 64)});
        ASSERT_TRUE(post(*a, w));
      }
      std::vector<Stamped> sends;
      std::vector<Stamped> recvs;
      ASSERT_TRUE(poll_stamped(scq.get(), kPerRound, &sends));
      ASSERT_TRUE(poll_stamped(rcq.get(), kPerRound / 2, &recvs));
      const uint64_t after = raw_clock(ep->ctx.get());
      const uint64_t real_after = realtime_ns();
      expect_stamps_within(sends, before, after, real_before, real_after);
      expect_stamps_within(recvs, before, after, real_before, real_after);
    }
  });
}

// The receive CQ's entries are written by the sender's process (host
// fabric) or the receive thread (UDP): stamped by the writer, in this CQ's
// order. Several sender threads race for the ring's slots.
TEST(Timestamps, PeerWrittenCompletionsMonotonic) {
  constexpr int kThreads = 2;
  constexpr int kPerThread = 200;
  run_pair(
      "sender",
      [&](Proc& p) {
        QpConfig config;
        config.max_send_wr = 256;
        auto ep = connected_endpoint(p.peer(), config, kThreads);
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, src);
        ASSERT_TRUE(p.peer().wait("posted"));
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
          threads.emplace_back([&, t] {
            TestQp& qp = ep->qp(t);
            for (int i = 0; i < kPerThread; i += 16) {
              std::vector<Wr> wrs;
              for (int k = 0; k < 16; ++k) wrs.push_back(wr_send(i + k, {src->sge(64 * t, 8)}));
              std::vector<Wr*> list;
              for (Wr& w : wrs) list.push_back(&w);
              if (!post(qp, list)) return;
              std::vector<ibv_wc> wcs;
              if (!poll_n(qp.send_cq(), 16, &wcs)) return;
            }
          });
        }
        for (auto& th : threads) th.join();
        ASSERT_TRUE(p.peer().wait("done"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        auto rcq = create_cq_ex(ep->ctx.get(), kStampFlags, kThreads * kPerThread + 8);
        ASSERT_NE(nullptr, rcq);
        DropQps drop{ep.get()};
        QpConfig config;
        config.max_recv_wr = kPerThread;
        std::vector<TestQp*> qps;
        for (int t = 0; t < kThreads; ++t) qps.push_back(ep->add_qp(config, nullptr, ibv_cq_ex_to_cq(rcq.get())));
        for (TestQp* q : qps) ASSERT_NE(nullptr, q);
        ASSERT_TRUE(connect_over(p.peer(), qps));
        auto dst = Region::create(ep->pd.get(), kThreads * kPerThread * 8);
        ASSERT_NE(nullptr, dst);
        for (int t = 0; t < kThreads; ++t)
          for (int i = 0; i < kPerThread; ++i)
            ASSERT_TRUE(post_recv(*qps[t], i, {dst->sge((t * kPerThread + i) * 8, 8)}));
        const uint64_t before = raw_clock(ep->ctx.get());
        const uint64_t real_before = realtime_ns();
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<Stamped> got;
        ASSERT_TRUE(poll_stamped(rcq.get(), kThreads * kPerThread, &got, scaled(Millis(30'000))));
        const uint64_t after = raw_clock(ep->ctx.get());
        expect_stamps_within(got, before, after, real_before, realtime_ns());
        ASSERT_TRUE(p.peer().signal("done"));
      });
}

}  // namespace
}  // namespace softverbs::integration
