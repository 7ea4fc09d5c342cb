// Parent and thread domains (ibv_alloc_parent_domain(3), ibv_alloc_td(3)):
// a parent domain works wherever its protection domain does, the
// application's allocator supplies a QP's send queue (and is told when it is
// freed), IBV_ALLOCATOR_USE_DEFAULT declines, and the lifetime rules hold.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

// What softverbs passes as resource_type for a send queue (src/verbs/pd.h).
constexpr uint64_t kSendQueueResource = 0x5356'0000'0000'0001ull;

struct Allocator {
  enum class Mode { kAllocate, kDecline, kFail } mode = Mode::kAllocate;
  std::vector<void*> live;
  int allocs = 0, frees = 0;
  uint64_t last_type = 0;
  ibv_pd* last_pd = nullptr;
};

void* alloc_cb(ibv_pd* pd, void* ctx, size_t size, size_t alignment, uint64_t type) {
  auto* a = static_cast<Allocator*>(ctx);
  ++a->allocs;
  a->last_type = type;
  a->last_pd = pd;
  switch (a->mode) {
    case Allocator::Mode::kDecline: return IBV_ALLOCATOR_USE_DEFAULT;
    case Allocator::Mode::kFail: return nullptr;
    case Allocator::Mode::kAllocate: break;
  }
  void* p = nullptr;
  if (posix_memalign(&p, alignment < sizeof(void*) ? sizeof(void*) : alignment, size) != 0) return nullptr;
  a->live.push_back(p);
  return p;
}

void free_cb(ibv_pd*, void* ctx, void* ptr, uint64_t type) {
  auto* a = static_cast<Allocator*>(ctx);
  ++a->frees;
  a->last_type = type;
  for (auto it = a->live.begin(); it != a->live.end(); ++it) {
    if (*it == ptr) {
      a->live.erase(it);
      std::free(ptr);
      return;
    }
  }
  ADD_FAILURE() << "free of memory the allocator did not hand out";
}

ibv_qp* create_rc(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 16;
  init.cap.max_recv_wr = 16;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  return ibv_create_qp(pd, &init);
}

TEST(ParentDomain, AllocatorSuppliesTheSendQueueAndTrafficFlows) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ibv_td_init_attr td_attr{};
    ibv_td* td = ibv_alloc_td(ep->ctx.get(), &td_attr);
    ASSERT_NE(nullptr, td) << errno_name(errno);
    Allocator alloc;
    ibv_parent_domain_init_attr attr{};
    attr.pd = ep->pd.get();
    attr.td = td;
    attr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    attr.alloc = alloc_cb;
    attr.free = free_cb;
    attr.pd_context = &alloc;
    ibv_pd* parent = ibv_alloc_parent_domain(ep->ctx.get(), &attr);
    ASSERT_NE(nullptr, parent) << errno_name(errno);
    EXPECT_EQ(EBUSY, ibv_dealloc_pd(ep->pd.get())) << "the parent domain holds its protection domain";
    EXPECT_EQ(EBUSY, ibv_dealloc_td(td)) << "the parent domain holds its thread domain";

    // A QP on the parent domain, its send queue from the allocator, talking
    // to a QP on the protection domain, with MRs of either.
    {
      TestQp* plain = ep->add_qp({});
      ASSERT_NE(nullptr, plain);
      QpConfig on_parent;
      auto qp = TestQp::create(ep->ctx.get(), parent, ep->port, on_parent);
      ASSERT_NE(nullptr, qp);
      EXPECT_GE(alloc.allocs, 1);
      EXPECT_EQ(kSendQueueResource, alloc.last_type);
      EXPECT_EQ(parent, alloc.last_pd);
      EXPECT_EQ(1u, alloc.live.size());
      ASSERT_TRUE(connect_local(*qp, *plain));
      auto src = Region::create(parent, 4096);  // an MR of the parent domain
      auto dst = Region::create(ep->pd.get(), 4096);
      ASSERT_NE(nullptr, src);
      ASSERT_NE(nullptr, dst);
      fill_pattern(src->data(), 4096, 5);
      ASSERT_TRUE(post_recv(*plain, 1, {dst->sge(0, 4096)}));
      Wr s = wr_send(2, {src->sge(0, 4096)});
      ASSERT_TRUE(run_wr(*qp, s));
      ibv_wc wc{};
      ASSERT_TRUE(poll_one(plain->recv_cq(), &wc));
      EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
      EXPECT_TRUE(expect_pattern(dst->data(), 4096, 5, "sent from the parent domain's QP"));
      Wr w = wr_write(3, {src->sge(0, 4096)}, dst->remote());
      ASSERT_TRUE(run_wr(*qp, w)) << "a WRITE into the protection domain's MR";
      EXPECT_EQ(EBUSY, ibv_dealloc_pd(parent)) << "a QP and an MR use the parent domain";
    }
    EXPECT_EQ(alloc.allocs, alloc.frees) << "every send queue given back";
    EXPECT_TRUE(alloc.live.empty());

    // Declining hands the send queue to softverbs; failing fails the QP.
    CqPtr cq = create_cq(ep->ctx.get(), 16);
    ASSERT_NE(nullptr, cq);
    alloc.mode = Allocator::Mode::kDecline;
    ibv_qp* declined = create_rc(parent, cq.get());
    EXPECT_NE(nullptr, declined) << "IBV_ALLOCATOR_USE_DEFAULT: " << errno_name(errno);
    if (declined != nullptr) {
      EXPECT_EQ(0, ibv_destroy_qp(declined));
    }
    alloc.mode = Allocator::Mode::kFail;
    const int frees_before = alloc.frees;
    errno = 0;
    EXPECT_EQ(nullptr, create_rc(parent, cq.get()));
    EXPECT_EQ(ENOMEM, errno);
    EXPECT_EQ(frees_before, alloc.frees) << "nothing to free after a failed allocation";

    EXPECT_EQ(0, ibv_dealloc_pd(parent));
    EXPECT_EQ(0, ibv_dealloc_td(td));
  });
}

TEST(ParentDomain, BadArguments) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ibv_parent_domain_init_attr attr{};
    errno = 0;
    EXPECT_EQ(nullptr, ibv_alloc_parent_domain(ep->ctx.get(), &attr)) << "no protection domain";
    EXPECT_EQ(EINVAL, errno);
    attr.pd = ep->pd.get();
    attr.comp_mask = 1u << 7;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_alloc_parent_domain(ep->ctx.get(), &attr)) << "an unknown comp_mask bit";
    EXPECT_EQ(EINVAL, errno);
    attr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
    attr.alloc = alloc_cb;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_alloc_parent_domain(ep->ctx.get(), &attr)) << "an allocator without its free";
    EXPECT_EQ(EINVAL, errno);
    attr.comp_mask = 0;
    ibv_pd* parent = ibv_alloc_parent_domain(ep->ctx.get(), &attr);
    ASSERT_NE(nullptr, parent);
    ibv_parent_domain_init_attr nested{};
    nested.pd = parent;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_alloc_parent_domain(ep->ctx.get(), &nested)) << "a parent domain of a parent domain";
    EXPECT_EQ(EINVAL, errno);
    ibv_td_init_attr td_attr{};
    td_attr.comp_mask = 1;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_alloc_td(ep->ctx.get(), &td_attr));
    EXPECT_EQ(EINVAL, errno);
    EXPECT_EQ(0, ibv_dealloc_pd(parent));
  });
}

}  // namespace
}  // namespace softverbs::integration
