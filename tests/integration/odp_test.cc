// On-demand paging (issue 18): the ODP capabilities, explicit and implicit
// ODP registrations (nothing pinned or remapped), ibv_advise_mr, and accesses
// to pages the application unmapped after registering them: a remote access
// error at the requester for a peer's WRITE, READ or atomic, a local
// protection error for a local SGE, a failed receive for a receive buffer —
// never a crash.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kPages = 4;
constexpr size_t kHole = 2;  // the page the owner unmaps
constexpr int kOdpAccess = kAllAccess | IBV_ACCESS_ON_DEMAND;
constexpr uint64_t kSeed = 0x0D9;

// Memory of our own mapping, so that pages can be unmapped under an MR.
struct Pages {
  explicit Pages(size_t n) : size(n * kPage) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(MAP_FAILED, p);
    base = static_cast<uint8_t*>(p == MAP_FAILED ? nullptr : p);
  }
  ~Pages() {
    if (base != nullptr) munmap(base, size);
  }
  uint64_t addr(size_t offset = 0) const { return reinterpret_cast<uint64_t>(base) + offset; }
  bool unmap_page(size_t i) { return munmap(base + i * kPage, kPage) == 0; }
  uint8_t* base = nullptr;
  size_t size;
};

TEST(Odp, CapsRegistrationAndAdvice) {
  run_solo("solo", [](Proc&) {
    auto ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    ibv_device_attr_ex a{};
    ASSERT_EQ(0, ibv_query_device_ex(ctx.get(), nullptr, &a));
    EXPECT_TRUE(a.odp_caps.general_caps & IBV_ODP_SUPPORT);
    EXPECT_TRUE(a.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT);
    const uint32_t rc = a.odp_caps.per_transport_caps.rc_odp_caps;
    for (uint32_t cap : {IBV_ODP_SUPPORT_SEND, IBV_ODP_SUPPORT_RECV, IBV_ODP_SUPPORT_WRITE, IBV_ODP_SUPPORT_READ,
                         IBV_ODP_SUPPORT_ATOMIC})
      EXPECT_TRUE(rc & cap) << "RC ODP capability " << cap;
    EXPECT_TRUE(a.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND);

    auto pd = std::unique_ptr<ibv_pd, DeallocPd>(ibv_alloc_pd(ctx.get()));
    ASSERT_NE(nullptr, pd);
    Pages pages(kPages);
    ASSERT_TRUE(pages.unmap_page(kHole));
    // Without ODP the pages must be there (pinned); with ODP they need not.
    errno = 0;
    EXPECT_EQ(nullptr, ibv_reg_mr(pd.get(), pages.base, pages.size, kAllAccess));
    EXPECT_EQ(EFAULT, errno);
    MrPtr odp(ibv_reg_mr(pd.get(), pages.base, pages.size, kOdpAccess));
    ASSERT_NE(nullptr, odp) << errno_name(errno);
    MrPtr implicit(ibv_reg_mr(pd.get(), nullptr, SIZE_MAX, kOdpAccess));
    ASSERT_NE(nullptr, implicit) << errno_name(errno);
    EXPECT_EQ(SIZE_MAX, implicit->length);
    MrPtr ro(ibv_reg_mr(pd.get(), pages.base, kPage, IBV_ACCESS_ON_DEMAND));
    ASSERT_NE(nullptr, ro) << errno_name(errno);
    auto plain = Region::create(pd.get(), kPage);
    ASSERT_NE(nullptr, plain);

    auto advise = [&](int advice, uint32_t flags, ibv_sge sge) {
      return ibv_advise_mr(pd.get(), static_cast<ibv_advise_mr_advice>(advice), flags, &sge, 1);
    };
    const ibv_sge first{pages.addr(), static_cast<uint32_t>(2 * kPage), odp->lkey};
    const ibv_sge hole{pages.addr(kHole * kPage), 64, odp->lkey};
    EXPECT_EQ(0, advise(IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, first));
    EXPECT_EQ(0, advise(IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, first));
    EXPECT_EQ(0, advise(IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH,
                        ibv_sge{pages.addr(kPage), 8, implicit->lkey}));
    EXPECT_EQ(EFAULT, advise(IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, hole)) << "unmapped";
    EXPECT_EQ(0, advise(IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, hole)) << "no fault, no error";
    EXPECT_EQ(EFAULT, advise(IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
                             ibv_sge{pages.addr(kPage * kPages - 8), 16, odp->lkey}))
        << "past the MR";
    EXPECT_EQ(EFAULT, advise(IBV_ADVISE_MR_ADVICE_PREFETCH, 0, ibv_sge{pages.addr(), 8, odp->lkey ^ 0x10000}))
        << "bad L_Key";
    EXPECT_EQ(EFAULT, advise(IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, ibv_sge{pages.addr(), 8, ro->lkey}))
        << "PREFETCH_WRITE without LOCAL_WRITE";
    EXPECT_EQ(EINVAL, advise(IBV_ADVISE_MR_ADVICE_PREFETCH, 0, plain->sge(0, 8))) << "not an ODP MR";
    EXPECT_EQ(EINVAL, advise(IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, first)) << "unknown flag";
    EXPECT_EQ(EOPNOTSUPP, advise(77, 0, first)) << "unknown advice";
    EXPECT_EQ(EINVAL, ibv_advise_mr(pd.get(), IBV_ADVISE_MR_ADVICE_PREFETCH, 0, nullptr, 0));
  });
}

// A peer's WRITE, READ and atomic on an explicit ODP MR and through an
// implicit one; then the same on a page the owner has unmapped, each on a
// QP of its own since the error breaks the connection.
TEST(Odp, PeerAccessAndUnmappedPage) {
  constexpr int kQps = 4;  // 0: good work, 1: WRITE, 2: READ, 3: atomic into the hole
  run_pair(
      "owner",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), {}, kQps);
        ASSERT_NE(nullptr, ep);
        Pages pages(kPages);
        fill_pattern(pages.base, pages.size, kSeed);
        Pages other(1);
        MrPtr odp(ibv_reg_mr(ep->pd.get(), pages.base, pages.size, kOdpAccess));
        ASSERT_NE(nullptr, odp) << errno_name(errno);
        MrPtr implicit(ibv_reg_mr(ep->pd.get(), nullptr, SIZE_MAX, kOdpAccess));
        ASSERT_NE(nullptr, implicit) << errno_name(errno);
        std::vector<RemoteBuf> unused;
        ASSERT_TRUE(exchange(p.peer(),
                             std::vector<RemoteBuf>{{pages.addr(), odp->rkey, 0, pages.size},
                                                    {other.addr(), implicit->rkey, 0, kPage}},
                             &unused));
        ASSERT_TRUE(p.peer().wait("good done"));
        EXPECT_TRUE(expect_pattern(pages.base + 100, 1000, kSeed + 1, "the peer's WRITE"));
        EXPECT_TRUE(expect_pattern(other.base, 512, kSeed + 2, "the peer's WRITE through the implicit MR"));
        uint64_t word = 0, want = 0;
        std::memcpy(&word, pages.base + kPage + 64, 8);
        std::vector<uint8_t> orig(kPage * kPages);
        fill_pattern(orig.data(), orig.size(), kSeed);
        std::memcpy(&want, orig.data() + kPage + 64, 8);
        EXPECT_EQ(want + 9, word) << "the peer's fetch-and-add";
        ASSERT_TRUE(pages.unmap_page(kHole));
        ASSERT_TRUE(p.peer().signal("unmapped"));
        ASSERT_TRUE(p.peer().wait("bad done"));
      },
      "peer",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), {}, kQps);
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), 4 * kPage);
        ASSERT_NE(nullptr, local);
        std::vector<RemoteBuf> remote;
        ASSERT_TRUE(exchange(p.peer(), std::vector<RemoteBuf>{local->remote()}, &remote));
        ASSERT_EQ(2u, remote.size());
        const RemoteBuf& odp = remote[0];
        const RemoteBuf& implicit = remote[1];

        Wr read = wr_read(1, {local->sge(0, 2 * kPage)}, odp);
        ASSERT_TRUE(run_wr(ep->qp(0), read));
        EXPECT_TRUE(expect_pattern(local->data(), 2 * kPage, kSeed, "READ of the ODP MR"));
        fill_pattern(local->data() + 2 * kPage, 1000, kSeed + 1);
        Wr write = wr_write(2, {local->sge(2 * kPage, 1000)}, odp.at(100));
        ASSERT_TRUE(run_wr(ep->qp(0), write));
        fill_pattern(local->data() + 3 * kPage, 512, kSeed + 2);
        Wr through = wr_write(3, {local->sge(3 * kPage, 512)}, implicit);
        ASSERT_TRUE(run_wr(ep->qp(0), through));
        Wr faa = wr_faa(4, local->sge(3 * kPage + 1024, 8), odp.at(kPage + 64), 9);
        ASSERT_TRUE(run_wr(ep->qp(0), faa));
        ASSERT_TRUE(p.peer().signal("good done"));
        ASSERT_TRUE(p.peer().wait("unmapped"));

        const RemoteBuf hole = odp.at(kHole * kPage + 8);
        Wr bad_write = wr_write(5, {local->sge(0, 64)}, hole);
        EXPECT_TRUE(run_wr_expect(ep->qp(1), bad_write, IBV_WC_REM_ACCESS_ERR));
        Wr bad_read = wr_read(6, {local->sge(0, 64)}, hole);
        EXPECT_TRUE(run_wr_expect(ep->qp(2), bad_read, IBV_WC_REM_ACCESS_ERR));
        Wr bad_faa = wr_faa(7, local->sge(1024, 8), hole, 1);
        EXPECT_TRUE(run_wr_expect(ep->qp(3), bad_faa, IBV_WC_REM_ACCESS_ERR));
        ASSERT_TRUE(p.peer().signal("bad done"));
      });
}

// Local SGEs in unmapped ODP pages: the gather of a WRITE fails with a local
// protection error; a receive buffer there fails the receive (and the SEND
// that needed it).
TEST(Odp, LocalSgeOnUnmappedPage) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    for (int i = 0; i < 4; ++i) ASSERT_NE(nullptr, ep->add_qp({}));
    ASSERT_TRUE(connect_local(ep->qp(0), ep->qp(1)));
    ASSERT_TRUE(connect_local(ep->qp(2), ep->qp(3)));
    Pages pages(kPages);
    MrPtr odp(ibv_reg_mr(ep->pd.get(), pages.base, pages.size, kOdpAccess));
    ASSERT_NE(nullptr, odp) << errno_name(errno);
    auto target = Region::create(ep->pd.get(), kPage);
    ASSERT_NE(nullptr, target);
    ASSERT_TRUE(pages.unmap_page(kHole));
    const ibv_sge hole{pages.addr(kHole * kPage), 64, odp->lkey};
    const ibv_sge fine{pages.addr(0), 64, odp->lkey};

    // A WRITE from mapped ODP memory works; from the hole it fails locally.
    Wr good = wr_write(1, {fine}, target->remote());
    ASSERT_TRUE(run_wr(ep->qp(0), good));
    Wr from_hole = wr_write(2, {hole}, target->remote());
    ibv_wc wc{};
    EXPECT_TRUE(run_wr_expect(ep->qp(0), from_hole, IBV_WC_LOC_PROT_ERR, scaled(kOpTimeout), &wc));

    // A receive buffer in the hole: the receive fails, and so does the SEND.
    ASSERT_TRUE(post_recv(ep->qp(3), 10, {hole}));
    Wr send = wr_send(11, {target->sge(0, 64)});
    ASSERT_TRUE(post(ep->qp(2), send));
    ibv_wc recv{};
    ASSERT_TRUE(poll_one(ep->qp(3).recv_cq(), &recv));
    EXPECT_EQ(IBV_WC_LOC_PROT_ERR, recv.status) << describe(recv);
    ibv_wc sent{};
    ASSERT_TRUE(poll_one(ep->qp(2).send_cq(), &sent));
    EXPECT_NE(IBV_WC_SUCCESS, sent.status) << describe(sent);
  });
}

}  // namespace
}  // namespace softverbs::integration
