// Growing a CQ with ibv_resize_cq (issue 18): the completions it holds stay,
// in order, and the larger size is usable at once — also while a peer's
// process keeps writing receive completions into it.
#include <gtest/gtest.h>

#include "harness.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

TEST(CqResize, GrowKeepsCompletionsInOrder) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    CqPtr cq = create_cq(ep->ctx.get(), 16);
    ASSERT_NE(nullptr, cq);
    const int before = cq->cqe;
    ASSERT_GE(before, 16);
    struct DropQps {
      Endpoint* ep;
      ~DropQps() { ep->qps.clear(); }
    } drop{ep.get()};
    QpConfig config;
    config.max_send_wr = 256;
    TestQp* a = ep->add_qp(config, cq.get(), nullptr);
    TestQp* b = ep->add_qp({});
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(connect_local(*a, *b));
    auto mem = Region::create(ep->pd.get(), 4096);
    ASSERT_NE(nullptr, mem);

    // Fill the CQ to its size, grow it, and fill the new room too.
    uint64_t id = 0;
    for (; id < static_cast<uint64_t>(before); ++id) {
      Wr w = wr_write(id, {mem->sge(0, 8)}, mem->remote(64));
      ASSERT_TRUE(post(*a, w));
    }
    EXPECT_EQ(0, ibv_resize_cq(cq.get(), 8)) << "a smaller size keeps the CQ";
    EXPECT_EQ(before, cq->cqe);
    ASSERT_EQ(0, ibv_resize_cq(cq.get(), 200));
    EXPECT_GE(cq->cqe, 200);
    EXPECT_EQ(EINVAL, ibv_resize_cq(cq.get(), 0));
    const uint64_t total = 200;
    for (; id < total; ++id) {
      Wr w = wr_write(id, {mem->sge(0, 8)}, mem->remote(64));
      ASSERT_TRUE(post(*a, w));
    }
    std::vector<ibv_wc> wcs;
    ASSERT_TRUE(poll_n(cq.get(), total, &wcs));
    for (uint64_t i = 0; i < total; ++i) {
      EXPECT_EQ(i, wcs[i].wr_id);
      EXPECT_EQ(IBV_WC_SUCCESS, wcs[i].status) << describe(wcs[i]);
    }
    EXPECT_TRUE(expect_no_completion(cq.get(), Millis(20), "after all 200"));
  });
}

// The receiver grows its receive CQ while the sender's process is SENDing
// into it (each round: "go", then the resize races the round's SENDs):
// every receive completes once, in order, without an overrun.
TEST(CqResize, GrowWhileAPeerWrites) {
  constexpr int kRounds = 12;
  constexpr int kPerRound = 40;
  constexpr int kGrowRounds = 6;
  run_pair(
      "sender",
      [&](Proc& p) {
        QpConfig config;
        config.max_send_wr = kPerRound;
        auto ep = connected_endpoint(p.peer(), config);
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, src);
        for (int r = 0; r < kRounds; ++r) {
          ASSERT_TRUE(p.peer().wait("go"));
          for (int k = 0; k < kPerRound; ++k) {
            Wr w = wr_send(r * kPerRound + k, {src->sge(0, 8)});
            ASSERT_TRUE(post(ep->qp(), w));
          }
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(ep->qp().send_cq(), kPerRound, &wcs));
          for (const ibv_wc& wc : wcs) ASSERT_EQ(IBV_WC_SUCCESS, wc.status) << describe(wc);
        }
        ASSERT_TRUE(p.peer().wait("done"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        CqPtr rcq = create_cq(ep->ctx.get(), 64);
        ASSERT_NE(nullptr, rcq);
        struct DropQps {
          Endpoint* ep;
          ~DropQps() { ep->qps.clear(); }
        } drop{ep.get()};
        QpConfig config;
        config.max_recv_wr = kRounds * kPerRound;
        TestQp* qp = ep->add_qp(config, nullptr, rcq.get());
        ASSERT_NE(nullptr, qp);
        ASSERT_TRUE(connect_over(p.peer(), {qp}));
        auto dst = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, dst);
        for (int i = 0; i < kRounds * kPerRound; ++i) ASSERT_TRUE(post_recv(*qp, i, {dst->sge(0, 64)}));
        std::vector<ibv_wc> wcs;
        for (int r = 0; r < kRounds; ++r) {
          ASSERT_TRUE(p.peer().signal("go"));
          if (r < kGrowRounds) {
            const int want = rcq->cqe + 1;
            ASSERT_EQ(0, ibv_resize_cq(rcq.get(), want)) << "round " << r;
            EXPECT_GE(rcq->cqe, want);
          }
          ASSERT_TRUE(poll_n(rcq.get(), kPerRound, &wcs, scaled(kOpTimeout), "a round's receives"));
        }
        for (int i = 0; i < kRounds * kPerRound; ++i) {
          EXPECT_EQ(static_cast<uint64_t>(i), wcs[i].wr_id);
          EXPECT_EQ(IBV_WC_SUCCESS, wcs[i].status) << describe(wcs[i]);
        }
        ASSERT_TRUE(p.peer().signal("done"));
      });
}

}  // namespace
}  // namespace softverbs::integration
