// Sharing a context (ibv_import_device(3), ibv_import_pd(3), ibv_import_mr(3)):
// a context imported from a dup of another's cmd_fd, in this process or in
// another one, shares its PD handles; a QP on an imported PD is in that
// protection domain; imported MRs carry the original keys; and what names
// nothing is refused with EINVAL.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

ContextPtr import_context(int cmd_fd) {
  ContextPtr ctx(ibv_import_device(cmd_fd));
  EXPECT_NE(nullptr, ctx) << "ibv_import_device: " << errno_name(errno);
  return ctx;
}

TEST(Import, SameProcessSharesPdsAndMrs) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    auto region = Region::create(ep->pd.get(), 4096);
    ASSERT_NE(nullptr, region);
    ContextPtr twin = import_context(dup(ep->ctx->cmd_fd));
    ASSERT_NE(nullptr, twin);
    ibv_pd* pd = ibv_import_pd(twin.get(), ep->pd->handle);
    ASSERT_NE(nullptr, pd) << errno_name(errno);
    EXPECT_EQ(ep->pd->handle, pd->handle);
    ibv_mr* mr = ibv_import_mr(pd, region->mr()->handle);
    ASSERT_NE(nullptr, mr) << errno_name(errno);
    EXPECT_EQ(region->lkey(), mr->lkey);
    EXPECT_EQ(region->rkey(), mr->rkey);
    EXPECT_EQ(region->mr()->length, mr->length);
    EXPECT_EQ(nullptr, mr->addr) << "ibv_import_mr(3): addr is not applicable";

    // A QP of the imported context on the imported PD sends from the MR
    // (through its imported lkey) to a QP of the original context.
    {
      PortInfo port;
      ASSERT_TRUE(query_port_info(twin.get(), &port));
      auto a = TestQp::create(twin.get(), pd, port, {});
      ASSERT_NE(nullptr, a);
      TestQp* b = ep->add_qp({});
      ASSERT_NE(nullptr, b);
      ASSERT_TRUE(connect_local(*a, *b));
      auto dst = Region::create(ep->pd.get(), 4096);
      ASSERT_NE(nullptr, dst);
      fill_pattern(region->data(), 4096, 31);
      ASSERT_TRUE(post_recv(*b, 1, {dst->sge(0, 4096)}));
      Wr s = wr_send(2, {ibv_sge{region->addr(), 4096, mr->lkey}});
      ASSERT_TRUE(run_wr(*a, s));
      ibv_wc wc{};
      ASSERT_TRUE(poll_one(b->recv_cq(), &wc));
      EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
      EXPECT_TRUE(expect_pattern(dst->data(), 4096, 31, "sent through the imported lkey"));
      // And as the source of an RDMA WRITE.
      Wr w = wr_write(3, {ibv_sge{region->addr(), 64, mr->lkey}}, dst->remote());
      EXPECT_TRUE(run_wr(*a, w));
    }
    ibv_unimport_mr(mr);
    EXPECT_NE(0u, region->mr()->rkey) << "unimporting leaves the registration alone";
    ibv_unimport_pd(pd);
    // Deallocating an imported PD ends its handle for every context.
    ibv_pd* again = ibv_import_pd(twin.get(), ep->pd->handle);
    ASSERT_NE(nullptr, again);
    EXPECT_EQ(0, ibv_dealloc_pd(again));
    errno = 0;
    EXPECT_EQ(nullptr, ibv_import_pd(twin.get(), ep->pd->handle));
    EXPECT_EQ(EINVAL, errno);
  });
}

TEST(Import, WhatNamesNothingIsRefused) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    errno = 0;
    EXPECT_EQ(nullptr, ibv_import_device(-1));
    EXPECT_EQ(EINVAL, errno);
    const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ASSERT_GE(null_fd, 0);
    errno = 0;
    EXPECT_EQ(nullptr, ibv_import_device(null_fd)) << "not a softverbs context";
    EXPECT_EQ(EINVAL, errno);
    EXPECT_EQ(0, ::close(null_fd)) << "a failed import leaves the descriptor to the caller";
    errno = 0;
    EXPECT_EQ(nullptr, ibv_import_pd(ep->ctx.get(), 0xfffff));
    EXPECT_EQ(EINVAL, errno);
    PdPtr other(ibv_alloc_pd(ep->ctx.get()));
    ASSERT_NE(nullptr, other);
    auto region = Region::create(ep->pd.get(), 64);
    ASSERT_NE(nullptr, region);
    errno = 0;
    EXPECT_EQ(nullptr, ibv_import_mr(other.get(), region->mr()->handle)) << "an MR of another PD";
    EXPECT_EQ(EINVAL, errno);
    errno = 0;
    EXPECT_EQ(nullptr, ibv_import_mr(ep->pd.get(), 0xfffff)) << "no such MR";
    EXPECT_EQ(EINVAL, errno);
  });
}

// Another process imports the context through /proc/<pid>/fd/<cmd_fd> (as it
// would from SCM_RIGHTS) and the owner's PD and MR by handle; its QP on the
// imported PD serves the owner's WRITE into an MR it registered on that PD.
// An MR's pages are its registering process's: the owner's own MR is not
// reachable through the importer's QP (README, "ibv_import_*").
TEST(Import, AnotherProcessJoinsTheProtectionDomain) {
  struct Offer {
    int32_t pid, cmd_fd;
    uint32_t pd_handle, mr_handle, lkey, rkey;
  };
  run_pair(
      "owner",
      [](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        auto region = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, region);
        TestQp* qp = ep->add_qp({});
        ASSERT_NE(nullptr, qp);
        Offer offer{getpid(), ep->ctx->cmd_fd, ep->pd->handle, region->mr()->handle, region->lkey(), region->rkey()};
        ASSERT_TRUE(p.peer().send(offer));
        ASSERT_TRUE(connect_over(p.peer(), {qp}));
        RemoteBuf theirs;
        ASSERT_TRUE(p.peer().recv(&theirs));
        fill_pattern(region->data(), 4096, 41);
        Wr ok = wr_write(1, {region->sge(0, 4096)}, theirs);
        EXPECT_TRUE(run_wr(*qp, ok)) << "into the importer's MR on the shared PD";
        ASSERT_TRUE(p.peer().signal("written"));
        ASSERT_TRUE(p.peer().wait("checked"));
        Wr foreign = wr_write(2, {region->sge(0, 64)}, region->remote(1024));
        EXPECT_TRUE(run_wr_expect(*qp, foreign, IBV_WC_REM_ACCESS_ERR))
            << "the owner's MR through the importer's QP";
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "importer",
      [](Proc& p) {
        Offer offer{};
        ASSERT_TRUE(p.peer().recv(&offer));
        const std::string path = "/proc/" + std::to_string(offer.pid) + "/fd/" + std::to_string(offer.cmd_fd);
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        ASSERT_GE(fd, 0) << path << ": " << errno_name(errno);
        ContextPtr ctx = import_context(fd);
        ASSERT_NE(nullptr, ctx);
        ibv_pd* pd = ibv_import_pd(ctx.get(), offer.pd_handle);
        ASSERT_NE(nullptr, pd) << errno_name(errno);
        ibv_mr* mr = ibv_import_mr(pd, offer.mr_handle);
        ASSERT_NE(nullptr, mr) << errno_name(errno);
        EXPECT_EQ(offer.lkey, mr->lkey);
        EXPECT_EQ(offer.rkey, mr->rkey);
        {
          PortInfo port;
          ASSERT_TRUE(query_port_info(ctx.get(), &port));
          auto qp = TestQp::create(ctx.get(), pd, port, {});
          ASSERT_NE(nullptr, qp);
          ASSERT_TRUE(connect_over(p.peer(), {qp.get()}));
          auto mine = Region::create(pd, 4096);
          ASSERT_NE(nullptr, mine);
          ASSERT_TRUE(p.peer().send(mine->remote()));
          ASSERT_TRUE(p.peer().wait("written"));
          EXPECT_TRUE(expect_pattern(mine->data(), 4096, 41, "the owner's WRITE"));
          ASSERT_TRUE(p.peer().signal("checked"));
          ASSERT_TRUE(p.peer().wait("done"));
        }
        ibv_unimport_mr(mr);
        ibv_unimport_pd(pd);
      });
}

}  // namespace
}  // namespace softverbs::integration
