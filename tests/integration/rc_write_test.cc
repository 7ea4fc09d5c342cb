// RC RDMA WRITE and RDMA WRITE with immediate: sizes, unaligned addresses,
// gather lists, inline data, zero-length writes. The target checks every byte
// it was sent and every guard byte around it.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

uint64_t seed_of(size_t k) { return 0x3A17E000 + k; }

// WRITE every standard size to an odd offset of the target's MR. RDMA WRITE
// consumes no receive WQE and produces no completion at the target.
TEST(RcWrite, SizesByteExact) {
  const std::vector<size_t> sizes = standard_sizes(0x3A17);
  const Layout layout = make_layout(sizes, 64, 7);
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), layout.total);
        ASSERT_NE(nullptr, src);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        ASSERT_GE(remote.len, layout.total);
        for (size_t k = 0; k < sizes.size(); ++k) {
          SCOPED_TRACE("WRITE of " + std::to_string(sizes[k]) + " bytes");
          fill_pattern(src->data() + layout.offsets[k], sizes[k], seed_of(k));
          std::vector<ibv_sge> sg;
          if (sizes[k] > 0) sg.push_back(src->sge(layout.offsets[k], sizes[k]));
          Wr w = wr_write(k, sg, remote.at(layout.offsets[k]));
          ASSERT_TRUE(run_wr(ep->qp(), w));
        }
        ASSERT_TRUE(p.peer().signal("written"));
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto dst = Region::create(ep->pd.get(), layout.total);
        ASSERT_NE(nullptr, dst);
        auto spare = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, spare);
        ASSERT_TRUE(post_recv(ep->qp(), 1, {spare->sge(0, 64)}));
        ASSERT_TRUE(p.peer().send(dst->remote()));
        ASSERT_TRUE(p.peer().wait("written", Deadline(scaled(Millis(20'000)))));
        std::vector<Span> spans;
        for (size_t k = 0; k < sizes.size(); ++k) {
          EXPECT_TRUE(expect_pattern(dst->data() + layout.offsets[k], sizes[k], seed_of(k),
                                     "WRITE of " + std::to_string(sizes[k]) + " bytes"));
          spans.push_back({layout.offsets[k], sizes[k]});
        }
        EXPECT_TRUE(expect_guard_outside(dst->data(), dst->size(), spans, "target MR"));
        EXPECT_TRUE(expect_no_completion(ep->qp().recv_cq(), Millis(50),
                                         "at the target (RDMA WRITE consumes no receive)"));
        EXPECT_TRUE(expect_fill(spare->data(), 64, kGuardByte, "the posted receive buffer"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// WRITE_WITH_IMM consumes a receive: IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_WITH_IMM,
// imm_data in network order exactly as posted. The data goes to the R_Key'd
// memory, not to the receive buffer (which may even have no SGE).
TEST(RcWrite, WithImmediate) {
  const std::vector<size_t> sizes = {0, 1, 4096, 4097, kMiB};
  const Layout layout = make_layout(sizes, 64, 1);
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), layout.total);
        ASSERT_NE(nullptr, src);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        ASSERT_TRUE(p.peer().wait("posted"));
        for (size_t k = 0; k < sizes.size(); ++k) {
          SCOPED_TRACE("WRITE_WITH_IMM of " + std::to_string(sizes[k]) + " bytes");
          fill_pattern(src->data() + layout.offsets[k], sizes[k], seed_of(k + 50));
          std::vector<ibv_sge> sg;
          if (sizes[k] > 0) sg.push_back(src->sge(layout.offsets[k], sizes[k]));
          Wr w = wr_write_imm(k, sg, remote.at(layout.offsets[k]), 0x01020304u * (k + 1));
          ASSERT_TRUE(run_wr(ep->qp(), w));
        }
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        auto dst = Region::create(ep->pd.get(), layout.total);
        auto rbuf = Region::create(ep->pd.get(), 256);
        ASSERT_TRUE(dst && rbuf);
        ASSERT_TRUE(p.peer().send(dst->remote()));
        // Even wr_ids: a receive without SGEs; odd: with a buffer that must stay untouched.
        for (size_t k = 0; k < sizes.size(); ++k) {
          std::vector<ibv_sge> sg;
          if (k % 2 == 1) sg.push_back(rbuf->sge(0, 256));
          ASSERT_TRUE(post_recv(qp, 40 + k, sg));
        }
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qp.recv_cq(), sizes.size(), &wcs));
        std::vector<Span> spans;
        for (size_t k = 0; k < sizes.size(); ++k) {
          SCOPED_TRACE("WRITE_WITH_IMM of " + std::to_string(sizes[k]) + " bytes");
          WcExpect want;
          want.wr_id = 40 + k;
          want.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
          want.qp_num = qp.qpn();
          want.imm = 0x01020304u * static_cast<uint32_t>(k + 1);
          // byte_len of an RDMA WRITE with immediate is the length written (as rxe and mlx5 report).
          want.byte_len = static_cast<uint32_t>(sizes[k]);
          EXPECT_TRUE(check_wc(wcs[k], want));
          EXPECT_TRUE(expect_pattern(dst->data() + layout.offsets[k], sizes[k], seed_of(k + 50),
                                     "written data"));
          spans.push_back({layout.offsets[k], sizes[k]});
        }
        EXPECT_TRUE(expect_guard_outside(dst->data(), dst->size(), spans, "target MR"));
        EXPECT_TRUE(expect_fill(rbuf->data(), 256, kGuardByte, "receive buffer of a WRITE_WITH_IMM"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// A WRITE gathering from four SGEs in two MRs lands contiguously.
TEST(RcWrite, GatherList) {
  QpConfig cfg;
  cfg.max_send_sge = 4;
  const std::vector<std::pair<int, Span>> gather = {
      {0, {3, 1}}, {1, {0, 4095}}, {0, {4096, 4097}}, {1, {9000, 1000}}};
  size_t total = 0;
  for (const auto& g : gather) total += g.second.len;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        std::unique_ptr<Region> mrs[2] = {Region::create(ep->pd.get(), 16384),
                                          Region::create(ep->pd.get(), 16384)};
        ASSERT_TRUE(mrs[0] && mrs[1]);
        fill_pattern(mrs[0]->data(), 16384, 0x6A0);
        fill_pattern(mrs[1]->data(), 16384, 0x6A1);
        std::vector<ibv_sge> sg;
        for (const auto& [mr, span] : gather) sg.push_back(mrs[mr]->sge(span.offset, span.len));
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        Wr w = wr_write(1, sg, remote.at(13));
        ASSERT_TRUE(run_wr(ep->qp(), w));
        ASSERT_TRUE(p.peer().signal("written"));
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto dst = Region::create(ep->pd.get(), total + 64);
        ASSERT_NE(nullptr, dst);
        ASSERT_TRUE(p.peer().send(dst->remote()));
        ASSERT_TRUE(p.peer().wait("written"));
        size_t at = 13;
        for (const auto& [mr, span] : gather) {
          EXPECT_TRUE(expect_pattern(dst->data() + at, span.len, 0x6A0 + mr, "gathered piece", span.offset));
          at += span.len;
        }
        EXPECT_TRUE(expect_guard_outside(dst->data(), dst->size(), {{13, total}}, "target MR"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// IBV_SEND_INLINE WRITEs from unregistered memory (no L_Key check), reused
// right after ibv_post_send returns.
TEST(RcWrite, InlineFromUnregisteredMemory) {
  QpConfig cfg;
  cfg.max_inline_data = 64;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        const uint32_t max_inline = ep->qp().cap().max_inline_data;
        ASSERT_TRUE(p.peer().send(max_inline));
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        std::vector<uint8_t> heap(max_inline);
        const std::vector<uint32_t> sizes = {1, 7, max_inline};
        size_t at = 0;
        for (size_t k = 0; k < sizes.size(); ++k) {
          fill_pattern(heap.data(), sizes[k], 0x1B0 + k);
          Wr w = wr_write(k, {ibv_sge{reinterpret_cast<uintptr_t>(heap.data()), sizes[k], 0}},
                          remote.at(at), IBV_SEND_SIGNALED | IBV_SEND_INLINE);
          ASSERT_TRUE(post(ep->qp(), w));
          std::fill(heap.begin(), heap.end(), 0);
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(ep->qp().send_cq(), &wc));
          EXPECT_TRUE(check_wc(wc, {.wr_id = k, .opcode = IBV_WC_RDMA_WRITE, .qp_num = ep->qp().qpn()}));
          at += sizes[k] + 64;
        }
        ASSERT_TRUE(p.peer().signal("written"));
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        uint32_t max_inline = 0;
        ASSERT_TRUE(p.peer().recv(&max_inline));
        auto dst = Region::create(ep->pd.get(), 3 * (max_inline + 64));
        ASSERT_NE(nullptr, dst);
        ASSERT_TRUE(p.peer().send(dst->remote()));
        ASSERT_TRUE(p.peer().wait("written"));
        const std::vector<uint32_t> sizes = {1, 7, max_inline};
        size_t at = 0;
        std::vector<Span> spans;
        for (size_t k = 0; k < sizes.size(); ++k) {
          EXPECT_TRUE(expect_pattern(dst->data() + at, sizes[k], 0x1B0 + k, "inline WRITE"));
          spans.push_back({at, sizes[k]});
          at += sizes[k] + 64;
        }
        EXPECT_TRUE(expect_guard_outside(dst->data(), dst->size(), spans, "target MR"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// IBA C9-88: a zero-length RDMA WRITE or READ need not carry a valid address
// or R_Key, and the responder does not check them. WRITE_WITH_IMM of zero
// bytes with a bogus R_Key still delivers its immediate.
TEST(RcWrite, ZeroLengthIgnoresRkey) {
  const RemoteBuf bogus{0, 0x00BADBAD, 0, 0};
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        ASSERT_TRUE(p.peer().wait("posted"));
        Wr write = wr_write(1, {}, bogus);
        ASSERT_TRUE(run_wr(ep->qp(), write));
        Wr read = wr_read(2, {}, bogus);
        ASSERT_TRUE(run_wr(ep->qp(), read));
        Wr imm = wr_write_imm(3, {}, bogus, 0xFEEDF00D);
        ASSERT_TRUE(run_wr(ep->qp(), imm));
        EXPECT_EQ(IBV_QPS_RTS, ep->qp().state());
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        ASSERT_TRUE(post_recv(ep->qp(), 9, {}));
        ASSERT_TRUE(p.peer().signal("posted"));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp().recv_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 9,
                                  .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
                                  .byte_len = 0,
                                  .qp_num = ep->qp().qpn(),
                                  .imm = 0xFEEDF00D}));
        EXPECT_EQ(IBV_QPS_RTS, ep->qp().state());
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

}  // namespace
}  // namespace softverbs::integration
