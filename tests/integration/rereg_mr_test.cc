// ibv_rereg_mr(3): after each kind of change (access, translation, PD) the
// MR's new keys carry traffic on a QP of its PD, and the data lands where
// the MR now points.
#include <gtest/gtest.h>

#include <cstring>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr size_t kBytes = 4096;

struct Pair {
  std::unique_ptr<Endpoint> ep;
  TestQp* a = nullptr;
  TestQp* b = nullptr;
};

bool make_pair(Pair* p) {
  p->ep = Endpoint::open();
  if (p->ep == nullptr) return false;
  p->a = p->ep->add_qp({});
  p->b = p->ep->add_qp({});
  return p->a != nullptr && p->b != nullptr && connect_local(*p->a, *p->b);
}

RemoteBuf remote_of(const ibv_mr* mr) {
  return RemoteBuf{reinterpret_cast<uint64_t>(mr->addr), mr->rkey, 0, mr->length};
}

// WRITEs kBytes of pattern `seed` from `src` through `qp` into `dst`, then
// SENDs them into a receive posted with dst's lkey; checks both landings.
void traffic_through(Pair& p, Region& src, ibv_mr* dst, uint32_t seed) {
  fill_pattern(src.data(), kBytes, seed);
  auto* bytes = static_cast<uint8_t*>(dst->addr);
  std::memset(bytes, 0, kBytes);
  Wr w = wr_write(1, {src.sge(0, kBytes)}, remote_of(dst));
  ASSERT_TRUE(run_wr(*p.a, w)) << "RDMA WRITE with the new rkey";
  EXPECT_TRUE(expect_pattern(bytes, kBytes, seed, "written through the new rkey"));
  std::memset(bytes, 0, kBytes);
  ASSERT_TRUE(post_recv(*p.b, 2, {ibv_sge{reinterpret_cast<uint64_t>(bytes), kBytes, dst->lkey}}));
  Wr s = wr_send(3, {src.sge(0, kBytes)});
  ASSERT_TRUE(run_wr(*p.a, s)) << "SEND into a receive with the new lkey";
  ibv_wc wc{};
  ASSERT_TRUE(poll_one(p.b->recv_cq(), &wc));
  EXPECT_TRUE(check_wc(wc, {.wr_id = 2, .opcode = IBV_WC_RECV, .byte_len = kBytes}));
  EXPECT_TRUE(expect_pattern(bytes, kBytes, seed, "received through the new lkey"));
}

// Regression (issue 18: after ibv_rereg_mr, traffic on the QP completed with
// WR flush errors).
TEST(ReregMr, TrafficFlowsAfterEachKindOfChange) {
  run_solo("solo", [](Proc&) {
    Pair p;
    ASSERT_TRUE(make_pair(&p));
    auto src = Region::create(p.ep->pd.get(), kBytes);
    ASSERT_NE(nullptr, src);

    // Access: local write only, then remote write too.
    auto dst = Region::create(p.ep->pd.get(), kBytes, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, dst);
    const uint32_t old_rkey = dst->mr()->rkey;
    ASSERT_EQ(0, ibv_rereg_mr(dst->mr(), IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kAllAccess));
    EXPECT_NE(old_rkey, dst->mr()->rkey) << "a new registration has new keys";
    traffic_through(p, *src, dst->mr(), 11);

    // Translation: the same MR over another buffer.
    Buffer other(kBytes);
    ASSERT_EQ(0, ibv_rereg_mr(dst->mr(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other.data(), kBytes, 0));
    EXPECT_EQ(other.data(), dst->mr()->addr);
    traffic_through(p, *src, dst->mr(), 12);

    // PD: registered on another PD, moved onto the QPs' one.
    PdPtr pd2(ibv_alloc_pd(p.ep->ctx.get()));
    ASSERT_NE(nullptr, pd2);
    auto moved = Region::create(pd2.get(), kBytes);
    ASSERT_NE(nullptr, moved);
    ASSERT_EQ(0, ibv_rereg_mr(moved->mr(), IBV_REREG_MR_CHANGE_PD, p.ep->pd.get(), nullptr, 0, 0));
    EXPECT_EQ(p.ep->pd.get(), moved->mr()->pd);
    traffic_through(p, *src, moved->mr(), 13);

    // All three at once, and the QPs still work afterwards.
    ASSERT_EQ(0, ibv_rereg_mr(dst->mr(),
                              IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD,
                              p.ep->pd.get(), dst->data(), kBytes, kAllAccess));
    traffic_through(p, *src, dst->mr(), 14);
  });
}

// The same across processes: a peer that has written through the MR (and
// may keep its memory mapped) writes through the new keys after the owner
// moves the MR to another buffer, and the bytes land in the new one.
TEST(ReregMr, PeerWritesLandInTheNewBufferAfterATranslationChange) {
  run_pair(
      "initiator",
      [](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), kBytes);
        ASSERT_NE(nullptr, src);
        for (uint32_t round = 0; round < 3; ++round) {
          SCOPED_TRACE("round " + std::to_string(round));
          RemoteBuf dst;
          ASSERT_TRUE(p.peer().recv(&dst));
          fill_pattern(src->data(), kBytes, 20 + round);
          Wr w = wr_write(round, {src->sge(0, kBytes)}, dst);
          ASSERT_TRUE(run_wr(ep->qp(), w));
          ASSERT_TRUE(p.peer().signal("written"));
        }
      },
      "owner",
      [](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto dst = Region::create(ep->pd.get(), kBytes);
        ASSERT_NE(nullptr, dst);
        Buffer second(kBytes), third(kBytes);
        uint8_t* targets[] = {dst->data(), second.data(), third.data()};
        for (uint32_t round = 0; round < 3; ++round) {
          SCOPED_TRACE("round " + std::to_string(round));
          if (round > 0) {
            ASSERT_EQ(0, ibv_rereg_mr(dst->mr(), IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
                                      nullptr, targets[round], kBytes, kAllAccess));
          }
          std::memset(targets[round], 0, kBytes);
          ASSERT_TRUE(p.peer().send(remote_of(dst->mr())));
          ASSERT_TRUE(p.peer().wait("written"));
          EXPECT_TRUE(expect_pattern(targets[round], kBytes, 20 + round, "in the MR's current buffer"));
        }
        // Back onto the Region's own buffer before the others go away.
        ASSERT_EQ(0, ibv_rereg_mr(dst->mr(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, dst->data(), kBytes, 0));
      });
}

}  // namespace
}  // namespace softverbs::integration
