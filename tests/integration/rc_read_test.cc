// RC RDMA READ: sizes from odd remote and local offsets, scatter lists, many
// READs outstanding beyond max_rd_atomic. The target stays passive; the
// initiator checks every byte and the guard bytes around it.
#include <gtest/gtest.h>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr uint64_t kTargetSeed = 0x4EAD;

// The target's whole MR holds pattern kTargetSeed; a READ of [off, off+len)
// must return pattern bytes [off, off+len).
TEST(RcRead, SizesByteExact) {
  const std::vector<size_t> sizes = standard_sizes(0x4EAD);
  const Layout remote_layout = make_layout(sizes, 64, 5);
  const Layout local_layout = make_layout(sizes, 64, 3);
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto dst = Region::create(ep->pd.get(), local_layout.total);
        ASSERT_NE(nullptr, dst);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        std::vector<Span> spans;
        for (size_t k = 0; k < sizes.size(); ++k) {
          SCOPED_TRACE("READ of " + std::to_string(sizes[k]) + " bytes");
          std::vector<ibv_sge> sg;
          if (sizes[k] > 0) sg.push_back(dst->sge(local_layout.offsets[k], sizes[k]));
          Wr w = wr_read(k, sg, remote.at(remote_layout.offsets[k]));
          ASSERT_TRUE(run_wr(ep->qp(), w));
          EXPECT_TRUE(expect_pattern(dst->data() + local_layout.offsets[k], sizes[k], kTargetSeed,
                                     "READ data", remote_layout.offsets[k]));
          spans.push_back({local_layout.offsets[k], sizes[k]});
        }
        EXPECT_TRUE(expect_guard_outside(dst->data(), dst->size(), spans, "local MR"));
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), remote_layout.total);
        ASSERT_NE(nullptr, src);
        fill_pattern(src->data(), src->size(), kTargetSeed);
        ASSERT_TRUE(p.peer().send(src->remote()));
        ASSERT_TRUE(p.peer().wait("done", Deadline(scaled(Millis(20'000)))));
        EXPECT_TRUE(expect_pattern(src->data(), src->size(), kTargetSeed, "READ source (unchanged)"));
        EXPECT_TRUE(expect_no_completion(ep->qp().recv_cq(), Millis(20), "at a READ target"));
      });
}

// One READ scattering into four local SGEs of two MRs.
TEST(RcRead, ScatterList) {
  QpConfig cfg;
  cfg.max_send_sge = 4;
  const std::vector<std::pair<int, Span>> scatter = {
      {0, {64, 100}}, {1, {1, 1}}, {0, {1000, 5000}}, {1, {4096, 4097}}};
  size_t total = 0;
  for (const auto& s : scatter) total += s.second.len;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        const int max_sge_rd = ep->dev.max_sge_rd > 0 ? ep->dev.max_sge_rd : ep->dev.max_sge;
        if (max_sge_rd < 4) {
          GTEST_SKIP() << "max_sge_rd " << max_sge_rd << " < 4";
        }
        std::unique_ptr<Region> mrs[2] = {Region::create(ep->pd.get(), 8192),
                                          Region::create(ep->pd.get(), 16384)};
        ASSERT_TRUE(mrs[0] && mrs[1]);
        std::vector<ibv_sge> sg;
        for (const auto& [mr, span] : scatter) sg.push_back(mrs[mr]->sge(span.offset, span.len));
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        Wr w = wr_read(1, sg, remote.at(11));
        ASSERT_TRUE(run_wr(ep->qp(), w));
        size_t at = 11;
        std::vector<Span> used[2];
        for (const auto& [mr, span] : scatter) {
          EXPECT_TRUE(expect_pattern(mrs[mr]->data() + span.offset, span.len, kTargetSeed,
                                     "scattered READ piece", at));
          used[mr].push_back(span);
          at += span.len;
        }
        EXPECT_TRUE(expect_guard_outside(mrs[0]->data(), mrs[0]->size(), used[0], "local MR 0"));
        EXPECT_TRUE(expect_guard_outside(mrs[1]->data(), mrs[1]->size(), used[1], "local MR 1"));
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), total + 64);
        ASSERT_NE(nullptr, src);
        fill_pattern(src->data(), src->size(), kTargetSeed);
        ASSERT_TRUE(p.peer().send(src->remote()));
        // The initiator may skip; then it closes the link instead of signalling.
        std::vector<uint8_t> frame;
        (void)p.peer().try_recv_frame(&frame, Deadline::op());
      });
}

// Far more READs than max_rd_atomic posted at once: the requester must hold
// back the excess (IBA 9.5: no more than the negotiated outstanding RDMA
// READ/atomic requests) and every READ still completes, in order.
TEST(RcRead, ManyOutstanding) {
  constexpr int kReads = 96;
  constexpr size_t kLen = 8 * kKiB;
  QpConfig cfg;
  cfg.max_send_wr = kReads;
  cfg.max_rd_atomic = 2;
  cfg.max_dest_rd_atomic = 2;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto dst = Region::create(ep->pd.get(), kReads * kLen);
        ASSERT_NE(nullptr, dst);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        std::vector<Wr> wrs;
        for (int i = 0; i < kReads; ++i) {
          // READ i takes remote block (i * 7) % kReads.
          const size_t block = static_cast<size_t>(i * 7 % kReads);
          wrs.push_back(wr_read(i, {dst->sge(i * kLen, kLen)}, remote.at(block * kLen)));
        }
        std::vector<Wr*> list;
        for (Wr& w : wrs) list.push_back(&w);
        ASSERT_TRUE(post(ep->qp(), list));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(ep->qp().send_cq(), kReads, &wcs));
        for (int i = 0; i < kReads; ++i) {
          EXPECT_TRUE(check_wc(wcs[i], {.wr_id = static_cast<uint64_t>(i),
                                        .opcode = IBV_WC_RDMA_READ,
                                        .qp_num = ep->qp().qpn()}));
          const size_t block = static_cast<size_t>(i * 7 % kReads);
          EXPECT_TRUE(expect_pattern(dst->data() + i * kLen, kLen, kTargetSeed, "READ #" + std::to_string(i),
                                     block * kLen));
        }
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), kReads * kLen);
        ASSERT_NE(nullptr, src);
        fill_pattern(src->data(), src->size(), kTargetSeed);
        ASSERT_TRUE(p.peer().send(src->remote()));
        ASSERT_TRUE(p.peer().wait("done", Deadline(scaled(Millis(20'000)))));
      });
}

}  // namespace
}  // namespace softverbs::integration
