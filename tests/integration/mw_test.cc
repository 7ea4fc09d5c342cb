// Memory windows (IBA 10.6.7; ibv_alloc_mw(3), ibv_bind_mw(3)): type 1
// windows bound with ibv_bind_mw, type 2 windows bound, invalidated locally
// and by SEND WITH INVALIDATE through ibv_post_send; remote READ, WRITE and
// atomics through a window's R_Key; the bind checks and their
// IBV_WC_MW_BIND_ERR; deallocation and deregistration while bound.
//
// The "owner" process holds the memory and the windows, the "peer" accesses
// them. An access error ends a connection (both QPs go to Error), so every
// access expected to fail uses a QP pair of its own.
#include <gtest/gtest.h>

#include <cstring>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr int kMrAccess = kAllAccess | IBV_ACCESS_MW_BIND;
constexpr unsigned kRemoteRw = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
constexpr size_t kSize = 16384;

// The 8 pattern bytes from `index` on, as the word an atomic sees.
uint64_t pattern_word(uint64_t seed, uint64_t index) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = pattern_byte(seed, index + i);
  uint64_t v = 0;
  std::memcpy(&v, b, 8);
  return v;
}

struct DeallocMw {
  void operator()(ibv_mw* m) const { EXPECT_EQ(0, ibv_dealloc_mw(m)) << "ibv_dealloc_mw"; }
};
using MwPtr = std::unique_ptr<ibv_mw, DeallocMw>;

MwPtr alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  MwPtr mw(ibv_alloc_mw(pd, type));
  if (mw == nullptr) ADD_FAILURE() << "ibv_alloc_mw: " << errno_name(errno);
  return mw;
}

// ibv_bind_mw(3) (type 1), then its completion with `want`.
bool bind1(TestQp& qp, ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t length, unsigned access,
           ibv_wc_status want = IBV_WC_SUCCESS) {
  ibv_mw_bind b{};
  b.wr_id = 0xB1;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info.mr = mr;
  b.bind_info.addr = addr;
  b.bind_info.length = length;
  b.bind_info.mw_access_flags = access;
  const int rc = ibv_bind_mw(qp.get(), mw, &b);
  if (rc != 0) {
    ADD_FAILURE() << "ibv_bind_mw: " << errno_name(rc);
    return false;
  }
  ibv_wc wc{};
  if (!poll_one(qp.send_cq(), &wc, scaled(kOpTimeout), "for the bind")) return false;
  return check_wc(wc, {.wr_id = 0xB1, .status = want, .opcode = IBV_WC_BIND_MW, .qp_num = qp.qpn()});
}

Wr wr_bind(ibv_mw* mw, uint32_t rkey, ibv_mr* mr, uint64_t addr, uint64_t length, unsigned access) {
  Wr w;
  w.wr.wr_id = 0xB2;
  w.wr.opcode = IBV_WR_BIND_MW;
  w.wr.bind_mw.mw = mw;
  w.wr.bind_mw.rkey = rkey;
  w.wr.bind_mw.bind_info = {mr, addr, length, access};
  return w;
}

Wr wr_local_inv(uint32_t rkey) {
  Wr w;
  w.wr.wr_id = 0x1A;
  w.wr.opcode = IBV_WR_LOCAL_INV;
  w.wr.invalidate_rkey = rkey;
  return w;
}

Wr wr_send_inv(uint64_t id, ibv_sge sge, uint32_t rkey) {
  Wr w = wr_send(id, {sge});
  w.wr.opcode = IBV_WR_SEND_WITH_INV;
  w.wr.invalidate_rkey = rkey;
  return w;
}

// Type 1: bound with ibv_bind_mw, READ, WRITE and an atomic go through it;
// a rebind gives a new R_Key (ibv_inc_rkey of the old) and the old one
// fails; an access outside the window (inside the MR) fails; a zero-length
// bind unbinds it.
TEST(MemoryWindows, Type1BindAccessRebindUnbind) {
  enum { kMain, kOldKey, kOutside, kUnbound, kQps };
  run_pair(
      "owner",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kQps);
        ASSERT_NE(nullptr, ep);
        auto mem = Region::create(ep->pd.get(), kSize, kMrAccess);
        ASSERT_NE(nullptr, mem);
        fill_pattern(mem->data(), kSize, 0x31);
        MwPtr mw = alloc_mw(ep->pd.get(), IBV_MW_TYPE_1);
        ASSERT_NE(nullptr, mw);
        EXPECT_EQ(IBV_MW_TYPE_1, mw->type);
        const uint32_t unbound_key = mw->rkey;
        ASSERT_TRUE(bind1(ep->qp(kMain), mw.get(), mem->mr(), mem->addr(4096), 4096,
                          kRemoteRw | IBV_ACCESS_REMOTE_ATOMIC));
        EXPECT_EQ(ibv_inc_rkey(unbound_key), mw->rkey) << "ibv_bind_mw(3): the new R_Key in mw->rkey";
        EXPECT_NE(mem->rkey(), mw->rkey);
        ASSERT_TRUE(p.peer().send(RemoteBuf{mem->addr(4096), mw->rkey, 0, 4096}));
        ASSERT_TRUE(p.peer().wait("accessed"));
        EXPECT_TRUE(expect_pattern(mem->data() + 4096, 512, 0x77, "written through the window"));
        uint64_t word = 0;
        std::memcpy(&word, mem->data() + 4096 + 1024, 8);
        EXPECT_EQ(pattern_word(0x31, 4096 + 1024) + 5, word) << "fetch-and-add through the window";
        // Rebind to the first page: a new key, the old one dead.
        const uint32_t first_key = mw->rkey;
        ASSERT_TRUE(bind1(ep->qp(kMain), mw.get(), mem->mr(), mem->addr(0), 4096, IBV_ACCESS_REMOTE_READ));
        EXPECT_EQ(ibv_inc_rkey(first_key), mw->rkey);
        ASSERT_TRUE(p.peer().send(RemoteBuf{mem->addr(0), mw->rkey, 0, 4096}));
        ASSERT_TRUE(p.peer().wait("rebound checked"));
        // ibv_bind_mw(3): a zero length, no MR: unbound.
        ASSERT_TRUE(bind1(ep->qp(kMain), mw.get(), nullptr, 0, 0, 0));
        ASSERT_TRUE(p.peer().signal("unbound"));
        ASSERT_TRUE(p.peer().wait("done"));
      },
      "peer",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kQps);
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), kSize);
        ASSERT_NE(nullptr, local);
        RemoteBuf win;
        ASSERT_TRUE(p.peer().recv(&win));
        Wr r = wr_read(1, {local->sge(0, 4096)}, win);
        ASSERT_TRUE(run_wr(ep->qp(kMain), r));
        EXPECT_TRUE(expect_pattern(local->data(), 4096, 0x31, "read through the window", 4096));
        fill_pattern(local->data(), 512, 0x77);
        Wr w = wr_write(2, {local->sge(0, 512)}, win);
        ASSERT_TRUE(run_wr(ep->qp(kMain), w));
        Wr a = wr_faa(3, local->sge(8192, 8), win.at(1024), 5);
        ASSERT_TRUE(run_wr(ep->qp(kMain), a));
        ASSERT_TRUE(p.peer().signal("accessed"));

        RemoteBuf second;
        ASSERT_TRUE(p.peer().recv(&second));
        Wr r2 = wr_read(4, {local->sge(0, 4096)}, second);
        ASSERT_TRUE(run_wr(ep->qp(kMain), r2));
        EXPECT_TRUE(expect_pattern(local->data(), 4096, 0x31, "read through the rebound window"));
        Wr stale = wr_read(5, {local->sge(0, 64)}, win);
        EXPECT_TRUE(run_wr_expect(ep->qp(kOldKey), stale, IBV_WC_REM_ACCESS_ERR)) << "the key before the rebind";
        Wr outside = wr_read(6, {local->sge(0, 64)}, RemoteBuf{second.addr + 4096, second.rkey, 0, 64});
        EXPECT_TRUE(run_wr_expect(ep->qp(kOutside), outside, IBV_WC_REM_ACCESS_ERR)) << "past the window's end";
        ASSERT_TRUE(p.peer().signal("rebound checked"));
        ASSERT_TRUE(p.peer().wait("unbound"));
        Wr gone = wr_read(7, {local->sge(0, 64)}, second);
        EXPECT_TRUE(run_wr_expect(ep->qp(kUnbound), gone, IBV_WC_REM_ACCESS_ERR)) << "after the unbind";
        ASSERT_TRUE(p.peer().signal("done"));
      });
}

// Type 2: bound by a BIND_MW WR to one QP; the window works through that QP
// only (IBA 10.6.7.2.2); binding it again while valid fails; LOCAL_INV
// invalidates it; LOCAL_INV of a type 1 window is a local QP operation error.
TEST(MemoryWindows, Type2BindOtherQpLocalInvalidate) {
  enum { kMain, kOtherQp, kRebind, kInvType1, kQps };
  run_pair(
      "owner",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kQps);
        ASSERT_NE(nullptr, ep);
        auto mem = Region::create(ep->pd.get(), kSize, kMrAccess);
        ASSERT_NE(nullptr, mem);
        fill_pattern(mem->data(), kSize, 0x52);
        MwPtr mw = alloc_mw(ep->pd.get(), IBV_MW_TYPE_2);
        ASSERT_NE(nullptr, mw);
        const uint32_t key = ibv_inc_rkey(mw->rkey);
        Wr bind = wr_bind(mw.get(), key, mem->mr(), mem->addr(0), kSize, kRemoteRw);
        ASSERT_TRUE(run_wr(ep->qp(kMain), bind));
        mw->rkey = key;  // ibv_post_send leaves that to the application
        ASSERT_TRUE(p.peer().send(RemoteBuf{mem->addr(0), key, 0, kSize}));
        ASSERT_TRUE(p.peer().wait("accessed"));
        // C10-…: a valid type 2 window cannot be bound again.
        Wr again = wr_bind(mw.get(), ibv_inc_rkey(key), mem->mr(), mem->addr(0), 4096, kRemoteRw);
        EXPECT_TRUE(run_wr_expect(ep->qp(kRebind), again, IBV_WC_MW_BIND_ERR));
        EXPECT_TRUE(ep->qp(kRebind).wait_state(IBV_QPS_ERR));
        Wr inv = wr_local_inv(key);
        ASSERT_TRUE(run_wr(ep->qp(kMain), inv));
        MwPtr type1 = alloc_mw(ep->pd.get(), IBV_MW_TYPE_1);
        ASSERT_NE(nullptr, type1);
        ASSERT_TRUE(bind1(ep->qp(kMain), type1.get(), mem->mr(), mem->addr(0), 4096, IBV_ACCESS_REMOTE_READ));
        Wr inv1 = wr_local_inv(type1->rkey);
        EXPECT_TRUE(run_wr_expect(ep->qp(kInvType1), inv1, IBV_WC_LOC_QP_OP_ERR)) << "LOCAL_INV of a type 1 window";
        ASSERT_TRUE(p.peer().signal("invalidated"));
        ASSERT_TRUE(p.peer().wait("done"));
      },
      "peer",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kQps);
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), kSize);
        ASSERT_NE(nullptr, local);
        RemoteBuf win;
        ASSERT_TRUE(p.peer().recv(&win));
        Wr r = wr_read(1, {local->sge(0, kSize)}, win);
        ASSERT_TRUE(run_wr(ep->qp(kMain), r));
        EXPECT_TRUE(expect_pattern(local->data(), kSize, 0x52, "read through the type 2 window"));
        Wr other = wr_read(2, {local->sge(0, 64)}, win);
        EXPECT_TRUE(run_wr_expect(ep->qp(kOtherQp), other, IBV_WC_REM_ACCESS_ERR)) << "through another QP";
        ASSERT_TRUE(p.peer().signal("accessed"));
        ASSERT_TRUE(p.peer().wait("invalidated"));
        Wr after = wr_read(3, {local->sge(0, 64)}, win);
        EXPECT_TRUE(run_wr_expect(ep->qp(kMain), after, IBV_WC_REM_ACCESS_ERR)) << "after LOCAL_INV";
        ASSERT_TRUE(p.peer().signal("done"));
      });
}

// SEND WITH INVALIDATE: the receive completion says IBV_WC_WITH_INV and names
// the R_Key (invalidated_rkey; ibv_wc_read_invalidated_rkey on an extended
// CQ reads the same field), and the window is gone for later accesses. An
// R_Key that names no valid type 2 window: a remote invalid request error on
// both sides.
// Three packets at a 4096-byte MTU: FIRST, MIDDLE, LAST WITH INVALIDATE.
constexpr uint32_t kInvSendBytes = 10000;

TEST(MemoryWindows, SendWithInvalidate) {
  enum { kMain, kBadKey, kQps };
  run_pair(
      "owner",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kQps);
        ASSERT_NE(nullptr, ep);
        auto mem = Region::create(ep->pd.get(), kSize, kMrAccess);
        ASSERT_NE(nullptr, mem);
        fill_pattern(mem->data(), kSize, 0x64);
        MwPtr mw = alloc_mw(ep->pd.get(), IBV_MW_TYPE_2);
        ASSERT_NE(nullptr, mw);
        const uint32_t key = ibv_inc_rkey(mw->rkey);
        Wr bind = wr_bind(mw.get(), key, mem->mr(), mem->addr(0), 8192, kRemoteRw);
        ASSERT_TRUE(run_wr(ep->qp(kMain), bind));
        auto inbox = Region::create(ep->pd.get(), kSize);
        ASSERT_NE(nullptr, inbox);
        ASSERT_TRUE(post_recv(ep->qp(kMain), 50, {inbox->sge(0, kInvSendBytes)}));
        ASSERT_TRUE(post_recv(ep->qp(kBadKey), 51, {inbox->sge(kInvSendBytes, 256)}));
        ASSERT_TRUE(p.peer().send(RemoteBuf{mem->addr(0), key, 0, 8192}));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp(kMain).recv_cq(), &wc, scaled(kOpTimeout), "for the SEND WITH INVALIDATE"));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 50, .opcode = IBV_WC_RECV, .byte_len = kInvSendBytes,
                                  .qp_num = ep->qp().qpn(), .no_imm = true}));
        EXPECT_TRUE(expect_pattern(inbox->data(), kInvSendBytes, 0x65, "the SEND WITH INVALIDATE's data"));
        EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV) << "wc_flags " << wc.wc_flags;
        EXPECT_EQ(key, wc.invalidated_rkey);
        ASSERT_TRUE(poll_one(ep->qp(kBadKey).recv_cq(), &wc, scaled(kOpTimeout), "for the bad invalidation"));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 51, .status = IBV_WC_REM_INV_REQ_ERR, .qp_num = ep->qp(kBadKey).qpn()}));
        EXPECT_TRUE(ep->qp(kBadKey).wait_state(IBV_QPS_ERR));
        ASSERT_TRUE(p.peer().wait("done"));
        // Invalidated remotely: the MR has no window left and deregisters.
        EXPECT_TRUE(mem->deregister());
      },
      "peer",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kQps);
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), kSize);
        ASSERT_NE(nullptr, local);
        RemoteBuf win;
        ASSERT_TRUE(p.peer().recv(&win));
        Wr r = wr_read(1, {local->sge(0, 8192)}, win);
        ASSERT_TRUE(run_wr(ep->qp(kMain), r));
        EXPECT_TRUE(expect_pattern(local->data(), 8192, 0x64, "read before the invalidation"));
        fill_pattern(local->data(), kInvSendBytes, 0x65);
        Wr s = wr_send_inv(2, local->sge(0, kInvSendBytes), win.rkey);
        ASSERT_TRUE(run_wr(ep->qp(kMain), s));
        Wr after = wr_read(3, {local->sge(0, 64)}, win);
        EXPECT_TRUE(run_wr_expect(ep->qp(kMain), after, IBV_WC_REM_ACCESS_ERR)) << "after SEND WITH INVALIDATE";
        Wr bad = wr_send_inv(4, local->sge(0, 100), win.rkey ^ 0x1);
        EXPECT_TRUE(run_wr_expect(ep->qp(kBadKey), bad, IBV_WC_REM_INV_REQ_ERR)) << "invalidating no window";
        ASSERT_TRUE(p.peer().signal("done"));
      });
}

// The extended posting interface: ibv_wr_bind_mw, ibv_wr_send_inv and
// ibv_wr_local_inv, between two QPs of one process.
TEST(MemoryWindows, ExtendedPosting) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    QpConfig config;
    config.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |
                            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
    TestQp* a = ep->add_qp(config);
    TestQp* b = ep->add_qp(config);
    ASSERT_TRUE(a && b && connect_local(*a, *b));
    auto mem = Region::create(ep->pd.get(), kSize, kMrAccess);
    auto local = Region::create(ep->pd.get(), kSize);
    ASSERT_TRUE(mem && local);
    fill_pattern(mem->data(), kSize, 0x7E);
    MwPtr mw = alloc_mw(ep->pd.get(), IBV_MW_TYPE_2);
    ASSERT_NE(nullptr, mw);
    const uint32_t key = ibv_inc_rkey(mw->rkey);
    ibv_qp_ex* qa = ibv_qp_to_qp_ex(a->get());
    ibv_qp_ex* qb = ibv_qp_to_qp_ex(b->get());
    ASSERT_TRUE(qa && qb);
    const ibv_mw_bind_info info{mem->mr(), mem->addr(0), kSize, IBV_ACCESS_REMOTE_READ};
    ibv_wr_start(qa);
    qa->wr_id = 1;
    qa->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_bind_mw(qa, mw.get(), key, &info);
    ASSERT_EQ(0, ibv_wr_complete(qa));
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(a->send_cq(), &wc));
    EXPECT_TRUE(check_wc(wc, {.wr_id = 1, .opcode = IBV_WC_BIND_MW, .qp_num = a->qpn()}));
    Wr r = wr_read(2, {local->sge(0, 4096)}, RemoteBuf{mem->addr(0), key, 0, kSize});
    ASSERT_TRUE(run_wr(*b, r));
    EXPECT_TRUE(expect_pattern(local->data(), 4096, 0x7E, "read through the window"));
    // b invalidates a's window by a SEND WITH INVALIDATE; a binds again, then
    // invalidates locally.
    ASSERT_TRUE(post_recv(*a, 3, {local->sge(8192, 64)}));
    ibv_wr_start(qb);
    qb->wr_id = 4;
    qb->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_inv(qb, key);
    ibv_wr_set_sge(qb, local->lkey(), local->addr(0), 64);
    ASSERT_EQ(0, ibv_wr_complete(qb));
    ASSERT_TRUE(poll_one(b->send_cq(), &wc));
    EXPECT_TRUE(check_wc(wc, {.wr_id = 4, .opcode = IBV_WC_SEND, .qp_num = b->qpn()}));
    ASSERT_TRUE(poll_one(a->recv_cq(), &wc));
    EXPECT_TRUE(check_wc(wc, {.wr_id = 3, .opcode = IBV_WC_RECV, .byte_len = 64, .qp_num = a->qpn()}));
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
    EXPECT_EQ(key, wc.invalidated_rkey);
    const uint32_t key2 = ibv_inc_rkey(key);
    ibv_wr_start(qa);
    qa->wr_id = 5;
    qa->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_bind_mw(qa, mw.get(), key2, &info);
    qa->wr_id = 6;
    ibv_wr_local_inv(qa, key2);
    ASSERT_EQ(0, ibv_wr_complete(qa));
    std::vector<ibv_wc> wcs;
    ASSERT_TRUE(poll_n(a->send_cq(), 2, &wcs));
    EXPECT_TRUE(check_wc(wcs[0], {.wr_id = 5, .opcode = IBV_WC_BIND_MW, .qp_num = a->qpn()}));
    EXPECT_TRUE(check_wc(wcs[1], {.wr_id = 6, .opcode = IBV_WC_LOCAL_INV, .qp_num = a->qpn()}));
    EXPECT_TRUE(mem->deregister()) << "no window bound any more";
  });
}

// One process, QPs connected to each other: the bind checks (IBA 10.6.7.2.1,
// ibv_bind_mw(3)) each fail the bind with IBV_WC_MW_BIND_ERR and the QP goes
// to Error; deallocating a bound window and deregistering an MR with a window
// bound (EBUSY); the device's capabilities.
TEST(MemoryWindows, BindChecksDeallocDereg) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    EXPECT_TRUE(ep->dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
    EXPECT_TRUE(ep->dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
    EXPECT_GT(ep->dev.max_mw, 0);
    ibv_device_attr_ex ex{};
    ASSERT_EQ(0, ibv_query_device_ex(ep->ctx.get(), nullptr, &ex));
    EXPECT_TRUE(ex.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW_TYPE_2B);

    auto no_bind = Region::create(ep->pd.get(), kSize, kAllAccess);
    auto read_only = Region::create(ep->pd.get(), kSize, IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_READ);
    auto mem = Region::create(ep->pd.get(), kSize, kMrAccess);
    ASSERT_TRUE(no_bind && read_only && mem);
    MwPtr mw = alloc_mw(ep->pd.get(), IBV_MW_TYPE_1);
    MwPtr mw2 = alloc_mw(ep->pd.get(), IBV_MW_TYPE_2);
    ASSERT_TRUE(mw && mw2);
    EXPECT_EQ(nullptr, ibv_alloc_mw(ep->pd.get(), static_cast<ibv_mw_type>(7)));
    EXPECT_EQ(EINVAL, errno);

    struct Case {
      const char* what;
      ibv_mr* mr;
      uint64_t offset, length;
      unsigned access;
    };
    const Case cases[] = {
        {"an MR without IBV_ACCESS_MW_BIND", no_bind->mr(), 0, 4096, IBV_ACCESS_REMOTE_READ},
        {"past the MR's end", mem->mr(), kSize - 4096, 8192, IBV_ACCESS_REMOTE_READ},
        {"before the MR's start", mem->mr(), 0, 4096, IBV_ACCESS_REMOTE_READ},
        {"remote write on an MR without local write", read_only->mr(), 0, 4096, kRemoteRw},
        {"remote atomic on an MR without local write", read_only->mr(), 0, 4096, IBV_ACCESS_REMOTE_ATOMIC},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.what);
      TestQp* a = ep->add_qp(QpConfig{});
      TestQp* b = ep->add_qp(QpConfig{});
      ASSERT_TRUE(a && b && connect_local(*a, *b));
      const uint64_t start = c.mr->addr == nullptr ? 0 : reinterpret_cast<uint64_t>(c.mr->addr);
      const uint64_t addr = std::strcmp(c.what, "before the MR's start") == 0 ? start - 4096 : start + c.offset;
      const uint32_t before = mw->rkey;
      EXPECT_TRUE(bind1(*a, mw.get(), c.mr, addr, c.length, c.access, IBV_WC_MW_BIND_ERR));
      mw->rkey = before;  // ibv_bind_mw(3): the caller restores the key of a failed bind
      EXPECT_TRUE(a->wait_state(IBV_QPS_ERR));
    }
    {
      SCOPED_TRACE("type 2 bind with a new R_Key of another window");
      TestQp* a = ep->add_qp(QpConfig{});
      TestQp* b = ep->add_qp(QpConfig{});
      ASSERT_TRUE(a && b && connect_local(*a, *b));
      Wr w = wr_bind(mw2.get(), ibv_inc_rkey(mw->rkey), mem->mr(), mem->addr(0), 4096, kRemoteRw);
      EXPECT_TRUE(run_wr_expect(*a, w, IBV_WC_MW_BIND_ERR));
    }

    TestQp* a = ep->add_qp(QpConfig{});
    TestQp* b = ep->add_qp(QpConfig{});
    ASSERT_TRUE(a && b && connect_local(*a, *b));
    // A bound window keeps its MR registered (ibv_alloc_mw(3) NOTES).
    ASSERT_TRUE(bind1(*a, mw.get(), mem->mr(), mem->addr(0), 4096, kRemoteRw));
    Wr w2 = wr_bind(mw2.get(), ibv_inc_rkey(mw2->rkey), mem->mr(), mem->addr(4096), 4096, kRemoteRw);
    ASSERT_TRUE(run_wr(*a, w2));
    mw2->rkey = ibv_inc_rkey(mw2->rkey);
    ibv_mr* raw = mem->mr();
    EXPECT_EQ(EBUSY, ibv_dereg_mr(raw));
    // Through the loopback connection, a READ via each window works.
    auto local = Region::create(ep->pd.get(), kSize);
    ASSERT_NE(nullptr, local);
    fill_pattern(mem->data(), kSize, 0x19);
    Wr r1 = wr_read(1, {local->sge(0, 4096)}, RemoteBuf{mem->addr(0), mw->rkey, 0, 4096});
    ASSERT_TRUE(run_wr(*b, r1));
    EXPECT_TRUE(expect_pattern(local->data(), 4096, 0x19, "read through the type 1 window"));
    // The type 2 window is bound to QP a: a READ arriving there comes from b.
    Wr r2 = wr_read(2, {local->sge(0, 4096)}, RemoteBuf{mem->addr(4096), mw2->rkey, 0, 4096});
    ASSERT_TRUE(run_wr(*b, r2));
    EXPECT_TRUE(expect_pattern(local->data(), 4096, 0x19, "read through the type 2 window", 4096));
    // ibv_dealloc_mw(3): a bound window is unbound and freed.
    EXPECT_EQ(0, ibv_dealloc_mw(mw.release()));
    EXPECT_EQ(EBUSY, ibv_dereg_mr(raw)) << "the type 2 window is still bound";
    Wr inv = wr_local_inv(mw2->rkey);
    ASSERT_TRUE(run_wr(*a, inv));
    EXPECT_TRUE(mem->deregister()) << "no window bound any more";
  });
}

}  // namespace
}  // namespace softverbs::integration
