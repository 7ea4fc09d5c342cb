// Every verb the library receives control for, called with NULLs, impossible
// sizes, wrong states and objects that do not belong together: an error
// (NULL + errno, or a non-zero return), never a crash. Each test runs in a
// child, so a crash is reported as "killed by signal N".
//
// Not called with NULL: the first argument of the static inline verbs in
// verbs.h (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq,
// ibv_query_port...), which dereference it before the library is reached.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <cstring>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

// Releases an object a verb returned although it should have failed, so that
// one wrong answer does not turn into EBUSY noise at teardown.
void release_unexpected(ibv_context* p) { ibv_close_device(p); }
void release_unexpected(ibv_pd* p) { ibv_dealloc_pd(p); }
void release_unexpected(ibv_mr* p) { ibv_dereg_mr(p); }
void release_unexpected(ibv_cq* p) { ibv_destroy_cq(p); }
void release_unexpected(ibv_qp* p) { ibv_destroy_qp(p); }
void release_unexpected(ibv_comp_channel* p) { ibv_destroy_comp_channel(p); }

// A pointer-returning verb failed: NULL and errno set.
#define EXPECT_NULL_WITH_ERRNO(call)                                          \
  do {                                                                        \
    errno = 0;                                                                \
    auto* result_ = (call);                                                   \
    const int errno_ = errno;                                                 \
    EXPECT_EQ(nullptr, result_) << #call;                                     \
    if (result_ != nullptr) {                                                 \
      release_unexpected(result_);                                            \
    } else {                                                                  \
      EXPECT_NE(0, errno_) << #call << " returned NULL without errno";        \
    }                                                                         \
  } while (0)

// Stores an integer into an enum-typed field a C caller could fill with any
// value (a static_cast to an out-of-range enum value is undefined in C++).
template <typename Enum>
void set_raw(Enum* field, uint32_t value) {
  static_assert(sizeof(Enum) == sizeof(uint32_t));
  std::memcpy(field, &value, sizeof value);
}

TEST(BadInput, NullArguments) {
  run_solo("solo", [](Proc&) {
    EXPECT_NULL_WITH_ERRNO(ibv_open_device(nullptr));
    EXPECT_NE(0, ibv_close_device(nullptr));
    EXPECT_EQ(nullptr, ibv_get_device_name(nullptr));
    ibv_free_device_list(nullptr);  // must not crash
    EXPECT_NULL_WITH_ERRNO(ibv_alloc_pd(nullptr));
    EXPECT_NE(0, ibv_dealloc_pd(nullptr));
    EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(nullptr, nullptr, 4096, 0));
    EXPECT_NE(0, ibv_dereg_mr(nullptr));
    EXPECT_NULL_WITH_ERRNO(ibv_create_cq(nullptr, 16, nullptr, nullptr, 0));
    EXPECT_NE(0, ibv_destroy_cq(nullptr));
    EXPECT_NULL_WITH_ERRNO(ibv_create_comp_channel(nullptr));
    EXPECT_NE(0, ibv_destroy_comp_channel(nullptr));
    ibv_qp_init_attr init{};
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(nullptr, &init));
    EXPECT_NE(0, ibv_destroy_qp(nullptr));
    ibv_qp_attr attr{};
    EXPECT_NE(0, ibv_modify_qp(nullptr, &attr, IBV_QP_STATE));
    EXPECT_NE(0, ibv_query_qp(nullptr, &attr, IBV_QP_STATE, &init));
    ibv_device_attr dev{};
    EXPECT_NE(0, ibv_query_device(nullptr, &dev));
    ibv_gid gid{};
    EXPECT_NE(0, ibv_query_gid(nullptr, kPort, 0, &gid));
    EXPECT_EQ(EINVAL, ibv_attach_mcast(nullptr, &gid, 0xc001));
    EXPECT_EQ(EINVAL, ibv_detach_mcast(nullptr, &gid, 0xc001));
    __be16 pkey = 0;
    EXPECT_NE(0, ibv_query_pkey(nullptr, kPort, 0, &pkey));
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    EXPECT_NE(0, ibv_get_cq_event(nullptr, &cq, &cq_ctx));
    ibv_async_event ev{};
    EXPECT_NE(0, ibv_get_async_event(nullptr, &ev));
    ibv_ack_async_event(nullptr);    // must not crash
    ibv_ack_cq_events(nullptr, 1);  // must not crash

    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ibv_context* ctx = ep->ctx.get();
    EXPECT_NE(0, ibv_query_device(ctx, nullptr));
    EXPECT_NE(0, (ibv_query_port)(ctx, kPort, nullptr));  // the exported symbol, not the inline wrapper
    EXPECT_NE(0, ibv_query_gid(ctx, kPort, 0, nullptr));
    EXPECT_NE(0, ibv_query_pkey(ctx, kPort, 0, nullptr));
    // Non-blocking fds, so that a library that reads before it checks fails
    // with EAGAIN instead of blocking.
    ASSERT_EQ(0, ::fcntl(ctx->async_fd, F_SETFL, ::fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK));
    EXPECT_NE(0, ibv_get_async_event(ctx, nullptr));
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(ep->pd.get(), nullptr));
    EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(ep->pd.get(), nullptr, 0, IBV_ACCESS_LOCAL_WRITE));
    EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(ep->pd.get(), nullptr, 4096, IBV_ACCESS_LOCAL_WRITE));
    TestQp* qp = ep->add_qp(QpConfig{});
    ASSERT_NE(nullptr, qp);
    EXPECT_NE(0, ibv_modify_qp(qp->get(), nullptr, IBV_QP_STATE));
    EXPECT_NE(0, ibv_query_qp(qp->get(), nullptr, IBV_QP_STATE, &init));
    EXPECT_NE(0, ibv_query_qp(qp->get(), &attr, IBV_QP_STATE, nullptr));
    EXPECT_EQ(IBV_QPS_RESET, qp->state()) << "the QP survived the bad calls";
    ChannelPtr channel(ibv_create_comp_channel(ctx));
    ASSERT_NE(nullptr, channel);
    ASSERT_EQ(0, ::fcntl(channel->fd, F_SETFL, ::fcntl(channel->fd, F_GETFL) | O_NONBLOCK));
    EXPECT_NE(0, ibv_get_cq_event(channel.get(), nullptr, nullptr));
  });
}

TEST(BadInput, RegMrInvalid) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    Buffer buf(8192);
    ibv_pd* pd = ep->pd.get();
    EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(pd, buf.data(), 0, IBV_ACCESS_LOCAL_WRITE));  // length 0
    // Beyond what the process has mapped (the kernel's ib_umem_get fails to pin it).
    EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(pd, buf.data(), size_t{1} << 40, IBV_ACCESS_LOCAL_WRITE));
    if (ep->dev.max_mr_size < SIZE_MAX) {
      EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(pd, buf.data(), ep->dev.max_mr_size + 1, IBV_ACCESS_LOCAL_WRITE));
    }
    EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(pd, buf.data(), SIZE_MAX, IBV_ACCESS_LOCAL_WRITE));
    EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(pd, reinterpret_cast<void*>(uintptr_t{0xFFFFFFFFFFFFF000ull}), 4096,
                                        IBV_ACCESS_LOCAL_WRITE));
    // A mandatory access bit nobody defines (outside the optional range).
    EXPECT_NULL_WITH_ERRNO((ibv_reg_mr)(pd, buf.data(), 4096, IBV_ACCESS_LOCAL_WRITE | (1 << 15)));
    // The PD is still fine.
    MrPtr ok((ibv_reg_mr)(pd, buf.data(), 8192, kAllAccess));
    EXPECT_NE(nullptr, ok) << errno_name(errno);
  });
}

TEST(BadInput, CreateCqInvalid) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ibv_context* ctx = ep->ctx.get();
    EXPECT_NULL_WITH_ERRNO(ibv_create_cq(ctx, -1, nullptr, nullptr, 0));
    EXPECT_NULL_WITH_ERRNO(ibv_create_cq(ctx, INT_MAX, nullptr, nullptr, 0));
    if (ep->dev.max_cqe < INT_MAX) {
      EXPECT_NULL_WITH_ERRNO(ibv_create_cq(ctx, ep->dev.max_cqe + 1, nullptr, nullptr, 0));
    }
    EXPECT_NULL_WITH_ERRNO(ibv_create_cq(ctx, 16, nullptr, nullptr, ctx->num_comp_vectors));
    EXPECT_NULL_WITH_ERRNO(ibv_create_cq(ctx, 16, nullptr, nullptr, -1));
    // A completion channel of another context.
    auto other = open_device();
    ASSERT_NE(nullptr, other);
    ChannelPtr foreign(ibv_create_comp_channel(other.get()));
    ASSERT_NE(nullptr, foreign);
    EXPECT_NULL_WITH_ERRNO(ibv_create_cq(ctx, 16, nullptr, foreign.get(), 0));
    CqPtr fine(ibv_create_cq(ctx, 16, nullptr, nullptr, 0));
    EXPECT_NE(nullptr, fine);
  });
}

TEST(BadInput, CreateQpInvalid) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ibv_context* ctx = ep->ctx.get();
    CqPtr cq = create_cq(ctx, 64);
    ASSERT_NE(nullptr, cq);
    auto other = open_device();
    ASSERT_NE(nullptr, other);
    CqPtr foreign_cq = create_cq(other.get(), 64);
    ASSERT_NE(nullptr, foreign_cq);
    auto base = [&] {
      ibv_qp_init_attr a{};
      a.send_cq = cq.get();
      a.recv_cq = cq.get();
      a.cap.max_send_wr = 16;
      a.cap.max_recv_wr = 16;
      a.cap.max_send_sge = 1;
      a.cap.max_recv_sge = 1;
      a.qp_type = IBV_QPT_RC;
      return a;
    };
    ibv_pd* pd = ep->pd.get();
    ibv_qp_init_attr a = base();
    a.send_cq = nullptr;
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.recv_cq = nullptr;
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.send_cq = foreign_cq.get();
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.recv_cq = foreign_cq.get();
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    set_raw(&a.qp_type, 0x7f);
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.cap.max_send_wr = static_cast<uint32_t>(ep->dev.max_qp_wr) + 1;
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.cap.max_recv_wr = static_cast<uint32_t>(ep->dev.max_qp_wr) + 1;
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.cap.max_send_sge = static_cast<uint32_t>(ep->dev.max_sge) + 1;
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.cap.max_recv_sge = static_cast<uint32_t>(ep->dev.max_sge) + 1;
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.cap.max_inline_data = 1u << 30;
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    a = base();
    a.cap.max_send_wr = UINT32_MAX;
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(pd, &a));
    // A PD of one context with CQs of another.
    PdPtr other_pd(ibv_alloc_pd(other.get()));
    ASSERT_NE(nullptr, other_pd);
    a = base();
    EXPECT_NULL_WITH_ERRNO(ibv_create_qp(other_pd.get(), &a));
    // The largest legal request works.
    a = base();
    a.cap.max_send_wr = static_cast<uint32_t>(ep->dev.max_qp_wr);
    a.cap.max_send_sge = static_cast<uint32_t>(ep->dev.max_sge);
    QpPtr big(ibv_create_qp(pd, &a));
    EXPECT_NE(nullptr, big) << "max_qp_wr and max_sge themselves: " << errno_name(errno);
  });
}

// Two QPs of this process, connected to each other, in RTS.
struct LocalPair {
  std::unique_ptr<Endpoint> ep;
  TestQp* a = nullptr;
  TestQp* b = nullptr;
  std::unique_ptr<Region> buf;
};

bool make_local_pair(LocalPair* lp, const QpConfig& cfg = {}) {
  lp->ep = Endpoint::open();
  if (!lp->ep) return false;
  lp->a = lp->ep->add_qp(cfg);
  lp->b = lp->ep->add_qp(cfg);
  if (lp->a == nullptr || lp->b == nullptr || !connect_local(*lp->a, *lp->b)) return false;
  lp->buf = Region::create(lp->ep->pd.get(), 65536);
  return lp->buf != nullptr;
}

// Posts `wr`; expects an immediate error naming `wr` in bad_wr.
void expect_post_send_rejected(TestQp& qp, ibv_send_wr* wr, ibv_send_wr* expect_bad, const std::string& what) {
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp.get(), wr, &bad);
  EXPECT_NE(0, rc) << what;
  EXPECT_EQ(expect_bad, bad) << what << ": bad_wr";
}

void expect_post_recv_rejected(TestQp& qp, ibv_recv_wr* wr, ibv_recv_wr* expect_bad, const std::string& what) {
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(qp.get(), wr, &bad);
  EXPECT_NE(0, rc) << what;
  EXPECT_EQ(expect_bad, bad) << what << ": bad_wr";
}

TEST(BadInput, PostSendInvalid) {
  run_solo("solo", [](Proc&) {
    QpConfig cfg;
    cfg.max_send_sge = 2;
    cfg.max_inline_data = 32;
    LocalPair lp;
    ASSERT_TRUE(make_local_pair(&lp, cfg));
    TestQp& qp = *lp.a;
    Region& buf = *lp.buf;
    ibv_send_wr* bad = nullptr;
    EXPECT_NE(0, ibv_post_send(qp.get(), nullptr, &bad)) << "NULL wr";

    Wr w = wr_send(1, {buf.sge(0, 64)});
    w.wr.sg_list = nullptr;  // num_sge stays 1
    expect_post_send_rejected(qp, &w.wr, &w.wr, "sg_list NULL with num_sge 1");

    std::vector<ibv_sge> many(qp.cap().max_send_sge + 1, buf.sge(0, 8));
    Wr too_many = wr_send(2, many);
    expect_post_send_rejected(qp, too_many.get(), too_many.get(), "num_sge > max_send_sge");

    Wr negative = wr_send(3, {buf.sge(0, 8)});
    negative.get()->num_sge = -1;
    expect_post_send_rejected(qp, &negative.wr, &negative.wr, "num_sge -1");

    Wr opcode = wr_send(4, {buf.sge(0, 8)});
    set_raw(&opcode.wr.opcode, 0x7f);
    expect_post_send_rejected(qp, opcode.get(), opcode.get(), "undefined opcode");

    Wr tso = wr_send(5, {buf.sge(0, 8)});
    tso.wr.opcode = IBV_WR_TSO;
    expect_post_send_rejected(qp, tso.get(), tso.get(), "IBV_WR_TSO on an RC QP");

    const uint32_t max_inline = qp.cap().max_inline_data;
    Wr big_inline = wr_send(6, {buf.sge(0, max_inline), buf.sge(0, 1)}, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    expect_post_send_rejected(qp, big_inline.get(), big_inline.get(), "inline data over max_inline_data in two SGEs");

    // bad_wr == NULL with a bad WR: still just an error.
    EXPECT_NE(0, ibv_post_send(qp.get(), too_many.get(), nullptr)) << "bad WR with bad_wr NULL";

    // A list whose second WR is bad: the first is posted and completes, the
    // second is named in bad_wr, nothing after it is posted.
    ASSERT_TRUE(post_recv(*lp.b, 70, {buf.sge(32768, 64)}));
    Wr first = wr_send(10, {buf.sge(0, 64)});
    Wr second = wr_send(11, many);
    Wr third = wr_send(12, {buf.sge(0, 64)});
    first.get()->next = second.get();
    second.get()->next = third.get();
    bad = nullptr;
    EXPECT_NE(0, ibv_post_send(qp.get(), first.get(), &bad));
    EXPECT_EQ(second.get(), bad) << "bad_wr must name the second WR";
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(qp.send_cq(), &wc));
    EXPECT_TRUE(check_wc(wc, {.wr_id = 10, .opcode = IBV_WC_SEND, .qp_num = qp.qpn()}));
    EXPECT_TRUE(expect_no_completion(qp.send_cq(), Millis(100), "(WRs after the bad one were not posted)"));
    ASSERT_TRUE(poll_one(lp.b->recv_cq(), &wc));
    EXPECT_TRUE(check_wc(wc, {.wr_id = 70, .opcode = IBV_WC_RECV, .byte_len = 64, .qp_num = lp.b->qpn()}));
    EXPECT_EQ(IBV_QPS_RTS, qp.state()) << "immediate errors leave the QP alone";
  });
}

// Lengths no message can have (beyond the MR, beyond 2^31, beyond 4 GiB in
// total): refused at post time or completed in error — never a successful
// completion, never a crash.
TEST(BadInput, HugeLengths) {
  run_solo("solo", [](Proc&) {
    QpConfig cfg;
    cfg.max_send_sge = 4;
    const char* const names[] = {"SEND with a 4 GiB - 1 SGE", "WRITE of 4 x 2 GiB", "READ of 4 GiB - 1"};
    for (int c = 0; c < 3; ++c) {
      SCOPED_TRACE(names[c]);
      // Each on a fresh pair: an error completion ends the connection.
      LocalPair lp;
      ASSERT_TRUE(make_local_pair(&lp, cfg));
      auto target = Region::create(lp.ep->pd.get(), 65536);
      ASSERT_NE(nullptr, target);
      ASSERT_TRUE(post_recv(*lp.b, 1, {target->sge(0, 65536)}));
      Wr w;
      switch (c) {
        case 0: w = wr_send(c, {lp.buf->sge(0, 0xFFFFFFFFu)}); break;
        case 1: w = wr_write(c, std::vector<ibv_sge>(4, lp.buf->sge(0, 0x80000000u)), target->remote()); break;
        default: w = wr_read(c, {lp.buf->sge(0, 0xFFFFFFFFu)}, target->remote()); break;
      }
      ibv_send_wr* bad = nullptr;
      const int rc = ibv_post_send(lp.a->get(), w.get(), &bad);
      if (rc != 0) {
        EXPECT_EQ(w.get(), bad);
        continue;
      }
      ibv_wc wc{};
      ASSERT_TRUE(poll_one(lp.a->send_cq(), &wc));
      EXPECT_NE(IBV_WC_SUCCESS, wc.status) << "accepted and completed successfully: " << describe(wc);
      EXPECT_EQ(static_cast<uint64_t>(c), wc.wr_id);
      EXPECT_TRUE(expect_fill(target->data(), 65536, kGuardByte, "target memory"));
    }
  });
}

TEST(BadInput, PostRecvInvalid) {
  run_solo("solo", [](Proc&) {
    QpConfig cfg;
    cfg.max_recv_sge = 2;
    LocalPair lp;
    ASSERT_TRUE(make_local_pair(&lp, cfg));
    TestQp& qp = *lp.b;
    Region& buf = *lp.buf;
    ibv_recv_wr* bad = nullptr;
    EXPECT_NE(0, ibv_post_recv(qp.get(), nullptr, &bad)) << "NULL wr";
    ibv_recv_wr wr{};
    wr.wr_id = 1;
    wr.num_sge = 1;
    wr.sg_list = nullptr;
    expect_post_recv_rejected(qp, &wr, &wr, "sg_list NULL with num_sge 1");
    std::vector<ibv_sge> many(qp.cap().max_recv_sge + 1, buf.sge(0, 8));
    wr.sg_list = many.data();
    wr.num_sge = static_cast<int>(many.size());
    expect_post_recv_rejected(qp, &wr, &wr, "num_sge > max_recv_sge");
    wr.num_sge = -1;
    expect_post_recv_rejected(qp, &wr, &wr, "num_sge -1");
    EXPECT_NE(0, ibv_post_recv(qp.get(), &wr, nullptr)) << "bad WR with bad_wr NULL";
    // Second WR of a list bad: the first is posted (and takes a message).
    ibv_sge good = buf.sge(0, 64);
    ibv_recv_wr first{};
    first.wr_id = 10;
    first.sg_list = &good;
    first.num_sge = 1;
    ibv_recv_wr second = wr;
    second.wr_id = 11;
    second.num_sge = static_cast<int>(many.size());
    first.next = &second;
    bad = nullptr;
    EXPECT_NE(0, ibv_post_recv(qp.get(), &first, &bad));
    EXPECT_EQ(&second, bad);
    Wr send = wr_send(5, {buf.sge(4096, 64)});
    ASSERT_TRUE(run_wr(*lp.a, send));
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(qp.recv_cq(), &wc));
    EXPECT_TRUE(check_wc(wc, {.wr_id = 10, .opcode = IBV_WC_RECV, .byte_len = 64, .qp_num = qp.qpn()}));
  });
}

// IBA 10.3.1: posting to the send queue before RTS is an immediate error;
// posting receives is an error in RESET and allowed from INIT on.
TEST(BadInput, PostInWrongState) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    TestQp* qp = ep->add_qp(QpConfig{});
    TestQp* peer = ep->add_qp(QpConfig{});
    ASSERT_TRUE(qp && peer);
    auto buf = Region::create(ep->pd.get(), 4096);
    ASSERT_NE(nullptr, buf);
    auto try_send = [&](const char* state) {
      Wr w = wr_send(1, {buf->sge(0, 64)});
      ibv_send_wr* bad = nullptr;
      EXPECT_NE(0, ibv_post_send(qp->get(), w.get(), &bad)) << "post_send in " << state;
      EXPECT_EQ(w.get(), bad) << state;
    };
    ibv_sge sge = buf->sge(0, 64);
    ibv_recv_wr rwr{};
    rwr.wr_id = 2;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    try_send("RESET");
    EXPECT_NE(0, ibv_post_recv(qp->get(), &rwr, &rbad)) << "post_recv in RESET";
    ASSERT_TRUE(qp->to_init());
    try_send("INIT");
    EXPECT_EQ(0, ibv_post_recv(qp->get(), &rwr, &rbad)) << "post_recv in INIT";
    ASSERT_TRUE(qp->to_rtr(peer->info()));
    try_send("RTR");
    EXPECT_TRUE(expect_no_completion(qp->send_cq(), Millis(50), "(nothing was posted)"));
  });
}

// Objects that do not belong together on the data path: an L_Key of an MR in
// another PD than the QP's is a local protection error.
TEST(BadInput, MrOfAnotherPdOnTheDataPath) {
  run_solo("solo", [](Proc&) {
    LocalPair lp;
    ASSERT_TRUE(make_local_pair(&lp));
    PdPtr other(ibv_alloc_pd(lp.ep->ctx.get()));
    ASSERT_NE(nullptr, other);
    auto foreign = Region::create(other.get(), 4096);
    ASSERT_NE(nullptr, foreign);
    ASSERT_TRUE(post_recv(*lp.b, 1, {lp.buf->sge(0, 4096)}));
    Wr w = wr_send(1, {foreign->sge(0, 64)});
    ASSERT_TRUE(run_wr_expect(*lp.a, w, IBV_WC_LOC_PROT_ERR));
    EXPECT_TRUE(lp.a->wait_state(IBV_QPS_ERR));
  });
}

}  // namespace
}  // namespace softverbs::integration

namespace softverbs::integration {
namespace {

// What softverbs does not offer fails the documented way and, with
// SOFTVERBS_LOG=debug, says which verb it was (issue 18: "unsupported verbs
// log nothing").
TEST(BadInput, UnsupportedVerbsNameThemselvesInTheDebugLog) {
  run_solo("solo", [](Proc&) {
    ASSERT_EQ(0, ::setenv("SOFTVERBS_LOG", "debug", 1));  // before the library's first log call
    int pipe_fds[2];
    ASSERT_EQ(0, ::pipe(pipe_fds));
    const int saved = ::dup(STDERR_FILENO);
    ASSERT_GE(saved, 0);
    ASSERT_EQ(STDERR_FILENO, ::dup2(pipe_fds[1], STDERR_FILENO));
    auto ep = Endpoint::open();
    errno = 0;
    ibv_mr* dmabuf = ep ? ibv_reg_dmabuf_mr(ep->pd.get(), 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE) : nullptr;
    const int dmabuf_errno = errno;
    ibv_wq_init_attr wq_attr{};
    errno = 0;
    ibv_wq* wq = ep ? ibv_create_wq(ep->ctx.get(), &wq_attr) : nullptr;
    const int wq_errno = errno;
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    ::close(pipe_fds[1]);
    std::string log;
    char buf[4096];
    for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) log.append(buf, static_cast<size_t>(n));
    ::close(pipe_fds[0]);
    ASSERT_NE(nullptr, ep);
    EXPECT_EQ(nullptr, dmabuf);
    EXPECT_EQ(EOPNOTSUPP, dmabuf_errno);
    EXPECT_EQ(nullptr, wq);
    EXPECT_EQ(EOPNOTSUPP, wq_errno);
    EXPECT_NE(std::string::npos, log.find("ibv_reg_dmabuf_mr")) << log;
    EXPECT_NE(std::string::npos, log.find("ibv_create_wq")) << log;
  });
}

}  // namespace
}  // namespace softverbs::integration
