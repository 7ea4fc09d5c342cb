// XRC (IBA Annex A14; ibv_open_xrcd(3), ibv_create_srq_ex(3),
// ibv_create_qp_ex(3), ibv_open_qp(3)): an XRC_SEND QP's SEND, WRITE, READ
// and atomic reach the peer's XRC_RECV QP and the XRC SRQ each WR names;
// an SRQ outside the XRC_RECV QP's domain, or none at all, is refused with
// a NAK (IBV_WC_REM_INV_REQ_ERR at the requester); the domain verbs' error
// returns; and (XrcShared, host device only) two processes sharing one
// domain through one file, a third sending into it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

struct CloseXrcd {
  void operator()(ibv_xrcd* x) const {
    if (x != nullptr) {
      EXPECT_EQ(0, ibv_close_xrcd(x)) << "ibv_close_xrcd";
    }
  }
};
struct DestroySrq {
  void operator()(ibv_srq* s) const {
    if (s != nullptr) {
      EXPECT_EQ(0, ibv_destroy_srq(s)) << "ibv_destroy_srq";
    }
  }
};
using XrcdPtr = std::unique_ptr<ibv_xrcd, CloseXrcd>;
using SrqPtr = std::unique_ptr<ibv_srq, DestroySrq>;

Millis quiet() { return scaled(Millis(300)); }

ibv_xrcd* try_open_xrcd(ibv_context* ctx, int fd, int oflags) {
  ibv_xrcd_init_attr a{};
  a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  a.fd = fd;
  a.oflags = oflags;
  errno = 0;
  return ibv_open_xrcd(ctx, &a);
}

XrcdPtr open_xrcd(ibv_context* ctx, int fd, int oflags) {
  XrcdPtr x(try_open_xrcd(ctx, fd, oflags));
  if (!x) ADD_FAILURE() << "ibv_open_xrcd(fd " << fd << ", oflags " << oflags << "): " << errno_name(errno);
  return x;
}

ibv_srq* try_xrc_srq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq, uint32_t comp_mask) {
  ibv_srq_init_attr_ex a{};
  a.attr.max_wr = 16;
  a.attr.max_sge = 1;
  a.comp_mask = comp_mask;
  a.srq_type = IBV_SRQT_XRC;
  a.pd = pd;
  a.xrcd = xrcd;
  a.cq = cq;
  errno = 0;
  return ibv_create_srq_ex(ctx, &a);
}

constexpr uint32_t kXrcSrqMask =
    IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;

SrqPtr xrc_srq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq) {
  SrqPtr s(try_xrc_srq(ctx, pd, xrcd, cq, kXrcSrqMask));
  if (!s) ADD_FAILURE() << "ibv_create_srq_ex(IBV_SRQT_XRC): " << errno_name(errno);
  return s;
}

uint32_t srq_num(ibv_srq* srq) {
  uint32_t n = 0;
  EXPECT_EQ(0, ibv_get_srq_num(srq, &n)) << "ibv_get_srq_num";
  return n;
}

QpPtr xrc_recv_qp(ibv_context* ctx, ibv_xrcd* xrcd) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_RECV;
  a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  a.xrcd = xrcd;
  errno = 0;
  QpPtr qp(ibv_create_qp_ex(ctx, &a));
  if (!qp) ADD_FAILURE() << "ibv_create_qp_ex(IBV_QPT_XRC_RECV): " << errno_name(errno);
  return qp;
}

QpPtr xrc_send_qp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_SEND;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  a.send_cq = cq;
  a.cap.max_send_wr = 16;
  a.cap.max_send_sge = 1;
  errno = 0;
  QpPtr qp(ibv_create_qp_ex(ctx, &a));
  if (!qp) ADD_FAILURE() << "ibv_create_qp_ex(IBV_QPT_XRC_SEND): " << errno_name(errno);
  return qp;
}

// What a peer needs of one XRC QP; sent over a Link.
struct XrcInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t srqn = 0;  // the XRC SRQ to name, where it matters
  uint16_t lid = 0;
  uint16_t reserved = 0;
  uint8_t gid[16] = {};
  RemoteBuf buf;
};

XrcInfo info_of(ibv_qp* qp, const PortInfo& port, uint32_t psn) {
  XrcInfo i;
  i.qpn = qp->qp_num;
  i.psn = psn;
  i.lid = port.attr.lid;
  std::memcpy(i.gid, port.gid.raw, sizeof i.gid);
  return i;
}

// RESET→INIT→RTR→RTS with the attribute sets of the kernel's XRC_INI /
// XRC_TGT rows (what ibv_xsrq_pingpong passes).
bool connect_xrc(ibv_qp* qp, const PortInfo& port, uint32_t my_psn, const XrcInfo& remote) {
  const bool recv = qp->qp_type == IBV_QPT_XRC_RECV;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = kPort;
  a.qp_access_flags = recv ? kAllAccess & ~IBV_ACCESS_LOCAL_WRITE : 0;
  int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    ADD_FAILURE() << "to INIT: " << errno_name(rc);
    return false;
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = kPort;
  a.ah_attr.dlid = port.roce() ? 0 : remote.lid;
  if (port.roce()) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
    a.ah_attr.grh.hop_limit = 1;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (recv) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  rc = ibv_modify_qp(qp, &a, mask);
  if (rc != 0) {
    ADD_FAILURE() << "to RTR: " << errno_name(rc);
    return false;
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  a.sq_psn = my_psn;
  mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
  if (!recv) mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  rc = ibv_modify_qp(qp, &a, mask);
  if (rc != 0) ADD_FAILURE() << "to RTS: " << errno_name(rc);
  return rc == 0;
}

// Posts one signalled WR naming XRC SRQ `srqn` and waits for its completion.
bool run_xrc(ibv_qp* qp, ibv_cq* cq, Wr& w, uint32_t srqn, ibv_wc_status want, ibv_wc* out = nullptr) {
  ibv_send_wr* wr = w.get();
  wr->qp_type.xrc.remote_srqn = srqn;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp, wr, &bad);
  if (rc != 0) {
    ADD_FAILURE() << "ibv_post_send: " << errno_name(rc);
    return false;
  }
  ibv_wc wc{};
  if (!poll_one(cq, &wc, scaled(kOpTimeout), "for an XRC WR")) return false;
  if (out != nullptr) *out = wc;
  EXPECT_EQ(w.wr.wr_id, wc.wr_id);
  EXPECT_EQ(want, wc.status) << describe(wc);
  return wc.wr_id == w.wr.wr_id && wc.status == want;
}

bool post_xrc_recv(ibv_srq* srq, uint64_t id, ibv_sge sge) {
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_srq_recv(srq, &wr, &bad);
  if (rc != 0) ADD_FAILURE() << "ibv_post_srq_recv: " << errno_name(rc);
  return rc == 0;
}

// The next asynchronous event within `timeout` (not acked); false if none came.
bool next_event(ibv_context* ctx, ibv_async_event* ev, Millis timeout) {
  const int flags = ::fcntl(ctx->async_fd, F_GETFL);
  ::fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
  const Deadline deadline(timeout);
  for (;;) {
    if (ibv_get_async_event(ctx, ev) == 0) return true;
    if (deadline.expired()) return false;
    pollfd pfd{ctx->async_fd, POLLIN, 0};
    (void)::poll(&pfd, 1, deadline.poll_ms(50));
  }
}

constexpr uint32_t kSendPsn = 0x1000, kRecvPsn = 0x2000;
constexpr size_t kMsg = 3000;
constexpr size_t kAtomicAt = 3 * 4096 + 8;

// One XRC_SEND QP to one XRC_RECV QP: SEND into the named SRQ (its CQ, the
// XRC_RECV QP's number, the sender's as src_qp; the SRQ's limit event, to
// the SRQ's owner), then WRITE, READ and FETCH_ADD on memory of the SRQ's PD.
TEST(Xrc, SendWriteReadAtomicThroughTheNamedSrq) {
  run_pair(
      "target",
      [](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        EXPECT_NE(0, ep->dev.device_cap_flags & IBV_DEVICE_XRC);
        CqPtr cq = create_cq(ep->ctx.get(), 16);
        ASSERT_NE(nullptr, cq);
        XrcdPtr xrcd = open_xrcd(ep->ctx.get(), -1, O_CREAT);
        ASSERT_NE(nullptr, xrcd);
        SrqPtr srq = xrc_srq(ep->ctx.get(), ep->pd.get(), xrcd.get(), cq.get());
        ASSERT_NE(nullptr, srq);
        auto mem = Region::create(ep->pd.get(), 4 * 4096);
        ASSERT_NE(nullptr, mem);
        std::memset(mem->data() + kAtomicAt, 0, 8);
        ASSERT_TRUE(post_xrc_recv(srq.get(), 77, mem->sge(0, 4096)));
        ASSERT_TRUE(post_xrc_recv(srq.get(), 78, mem->sge(0, 4096)));
        ibv_srq_attr limit{};
        limit.srq_limit = 2;  // one taken leaves one: below the limit
        ASSERT_EQ(0, ibv_modify_srq(srq.get(), &limit, IBV_SRQ_LIMIT));
        QpPtr qp = xrc_recv_qp(ep->ctx.get(), xrcd.get());
        ASSERT_NE(nullptr, qp);
        XrcInfo mine = info_of(qp.get(), ep->port, kRecvPsn);
        mine.srqn = srq_num(srq.get());
        mine.buf = mem->remote();
        XrcInfo theirs;
        ASSERT_TRUE(p.peer().send(mine));
        ASSERT_TRUE(p.peer().recv(&theirs));
        ASSERT_TRUE(connect_xrc(qp.get(), ep->port, kRecvPsn, theirs));
        {
          // Before any traffic: on UDP the receive thread's responder writes
          // the expected PSN that ibv_query_qp reads (rq_psn), unsynchronised.
          ibv_qp_attr attr{};
          ibv_qp_init_attr init{};
          ASSERT_EQ(0, ibv_query_qp(qp.get(), &attr, IBV_QP_STATE | IBV_QP_DEST_QPN, &init));
          EXPECT_EQ(IBV_QPS_RTS, attr.qp_state);
          EXPECT_EQ(theirs.qpn, attr.dest_qp_num);
          EXPECT_EQ(IBV_QPT_XRC_RECV, init.qp_type);
        }
        ASSERT_TRUE(p.peer().signal("ready"));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(cq.get(), &wc, scaled(kOpTimeout), "for the SEND, on the SRQ's CQ"));
        WcExpect want;
        want.wr_id = 77;
        want.opcode = IBV_WC_RECV;
        want.byte_len = kMsg;
        want.qp_num = qp->qp_num;  // the XRC_RECV QP's, as mlx5 reports
        EXPECT_TRUE(check_wc(wc, want));
        EXPECT_EQ(theirs.qpn, wc.src_qp) << "src_qp: the XRC_SEND QP";
        EXPECT_TRUE(expect_pattern(mem->data(), kMsg, 0x51, "the SEND's data"));
        ibv_async_event ev{};
        ASSERT_TRUE(next_event(ep->ctx.get(), &ev, scaled(kOpTimeout))) << "no SRQ limit event";
        EXPECT_EQ(IBV_EVENT_SRQ_LIMIT_REACHED, ev.event_type);
        if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
          EXPECT_EQ(srq.get(), ev.element.srq);
        }
        ibv_ack_async_event(&ev);
        ASSERT_TRUE(p.peer().wait("done"));
        EXPECT_TRUE(expect_pattern(mem->data() + 4096, 4096, 0x52, "the WRITE's data"));
        uint64_t word = 0;
        std::memcpy(&word, mem->data() + kAtomicAt, 8);
        EXPECT_EQ(5u, word) << "the FETCH_ADD";
        EXPECT_TRUE(expect_no_completion(cq.get(), quiet(), "after the SEND"));
        ASSERT_TRUE(p.peer().signal("checked"));
      },
      "initiator",
      [](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        CqPtr cq = create_cq(ep->ctx.get(), 16);
        ASSERT_NE(nullptr, cq);
        auto mem = Region::create(ep->pd.get(), 4 * 4096);
        ASSERT_NE(nullptr, mem);
        QpPtr qp = xrc_send_qp(ep->ctx.get(), ep->pd.get(), cq.get());
        ASSERT_NE(nullptr, qp);
        XrcInfo theirs;
        ASSERT_TRUE(p.peer().recv(&theirs));
        ASSERT_TRUE(p.peer().send(info_of(qp.get(), ep->port, kSendPsn)));
        ASSERT_TRUE(connect_xrc(qp.get(), ep->port, kSendPsn, theirs));
        ASSERT_TRUE(p.peer().wait("ready"));
        fill_pattern(mem->data(), kMsg, 0x51);
        Wr send = wr_send(1, {mem->sge(0, kMsg)});
        ASSERT_TRUE(run_xrc(qp.get(), cq.get(), send, theirs.srqn, IBV_WC_SUCCESS));
        fill_pattern(mem->data() + 4096, 4096, 0x52);
        Wr write = wr_write(2, {mem->sge(4096, 4096)}, theirs.buf.at(4096));
        ASSERT_TRUE(run_xrc(qp.get(), cq.get(), write, theirs.srqn, IBV_WC_SUCCESS));
        Wr read = wr_read(3, {mem->sge(2 * 4096, 4096)}, theirs.buf.at(4096));
        ASSERT_TRUE(run_xrc(qp.get(), cq.get(), read, theirs.srqn, IBV_WC_SUCCESS));
        EXPECT_TRUE(expect_pattern(mem->data() + 2 * 4096, 4096, 0x52, "the READ's data"));
        Wr faa = wr_faa(4, mem->sge(kAtomicAt, 8), theirs.buf.at(kAtomicAt), 5);
        ASSERT_TRUE(run_xrc(qp.get(), cq.get(), faa, theirs.srqn, IBV_WC_SUCCESS));
        uint64_t original = 1;
        std::memcpy(&original, mem->data() + kAtomicAt, 8);
        EXPECT_EQ(0u, original);
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      });
}

// IBA Annex A14: the XRCETH must name an XRC SRQ of the XRC_RECV QP's
// domain. One of another domain, and a number no SRQ has, are NAKed
// (invalid request); neither SRQ takes a WQE.
TEST(Xrc, AnSrqOutsideTheDomainIsRefused) {
  run_pair(
      "target",
      [](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        CqPtr cq = create_cq(ep->ctx.get(), 16);
        ASSERT_NE(nullptr, cq);
        XrcdPtr ours = open_xrcd(ep->ctx.get(), -1, O_CREAT);
        XrcdPtr other = open_xrcd(ep->ctx.get(), -1, O_CREAT);
        ASSERT_TRUE(ours && other);
        SrqPtr our_srq = xrc_srq(ep->ctx.get(), ep->pd.get(), ours.get(), cq.get());
        SrqPtr other_srq = xrc_srq(ep->ctx.get(), ep->pd.get(), other.get(), cq.get());
        ASSERT_TRUE(our_srq && other_srq);
        auto mem = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, mem);
        ASSERT_TRUE(post_xrc_recv(our_srq.get(), 1, mem->sge(0, 2048)));
        ASSERT_TRUE(post_xrc_recv(other_srq.get(), 2, mem->sge(2048, 2048)));
        QpPtr qps[2] = {xrc_recv_qp(ep->ctx.get(), ours.get()), xrc_recv_qp(ep->ctx.get(), ours.get())};
        ASSERT_TRUE(qps[0] && qps[1]);
        for (int i = 0; i < 2; ++i) {
          XrcInfo mine = info_of(qps[i].get(), ep->port, kRecvPsn);
          // The first is told of the other domain's SRQ, the second of none.
          mine.srqn = i == 0 ? srq_num(other_srq.get()) : 0xfffff0;
          XrcInfo theirs;
          ASSERT_TRUE(p.peer().send(mine));
          ASSERT_TRUE(p.peer().recv(&theirs));
          ASSERT_TRUE(connect_xrc(qps[i].get(), ep->port, kRecvPsn, theirs));
        }
        ASSERT_TRUE(p.peer().signal("ready"));
        ASSERT_TRUE(p.peer().wait("refused"));
        EXPECT_TRUE(expect_no_completion(cq.get(), quiet(), "from a refused request"));
        drain_async_events(ep->ctx.get());
      },
      "initiator",
      [](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        CqPtr cq = create_cq(ep->ctx.get(), 16);
        ASSERT_NE(nullptr, cq);
        auto mem = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, mem);
        QpPtr qps[2] = {xrc_send_qp(ep->ctx.get(), ep->pd.get(), cq.get()),
                        xrc_send_qp(ep->ctx.get(), ep->pd.get(), cq.get())};
        ASSERT_TRUE(qps[0] && qps[1]);
        uint32_t srqns[2];
        for (int i = 0; i < 2; ++i) {
          XrcInfo theirs;
          ASSERT_TRUE(p.peer().recv(&theirs));
          ASSERT_TRUE(p.peer().send(info_of(qps[i].get(), ep->port, kSendPsn)));
          ASSERT_TRUE(connect_xrc(qps[i].get(), ep->port, kSendPsn, theirs));
          srqns[i] = theirs.srqn;
        }
        ASSERT_TRUE(p.peer().wait("ready"));
        for (int i = 0; i < 2; ++i) {
          SCOPED_TRACE(i == 0 ? "an SRQ of another domain" : "no such SRQ");
          Wr send = wr_send(10 + i, {mem->sge(0, 100)});
          ASSERT_TRUE(run_xrc(qps[i].get(), cq.get(), send, srqns[i], IBV_WC_REM_INV_REQ_ERR));
        }
        ASSERT_TRUE(p.peer().signal("refused"));
        drain_async_events(ep->ctx.get());
      });
}

// ibv_open_xrcd(3), ibv_close_xrcd(3), ibv_open_qp(3), ibv_get_srq_num(3)
// and the XRC cases of ibv_create_srq_ex(3) / ibv_create_qp_ex(3), with the
// kernel's error codes.
TEST(Xrc, DomainVerbsAndTheirErrors) {
  run_solo("domains", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ibv_context* ctx = ep->ctx.get();
    CqPtr cq = create_cq(ctx, 16);
    ASSERT_NE(nullptr, cq);

    // fd -1 makes a new domain, and only with O_CREAT.
    EXPECT_EQ(nullptr, try_open_xrcd(ctx, -1, 0));
    EXPECT_EQ(EINVAL, errno);
    ibv_xrcd_init_attr no_flags{};
    no_flags.comp_mask = IBV_XRCD_INIT_ATTR_FD;
    no_flags.fd = -1;
    EXPECT_EQ(nullptr, ibv_open_xrcd(ctx, &no_flags));
    EXPECT_EQ(EINVAL, errno);

    char path[] = "/tmp/softverbs-xrcd-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    // A file's domain: none yet without O_CREAT; O_EXCL refuses an existing one.
    EXPECT_EQ(nullptr, try_open_xrcd(ctx, fd, 0));
    EXPECT_EQ(EINVAL, errno);
    XrcdPtr first = open_xrcd(ctx, fd, O_CREAT);
    ASSERT_NE(nullptr, first);
    EXPECT_EQ(ctx, first->context);
    EXPECT_EQ(nullptr, try_open_xrcd(ctx, fd, O_CREAT | O_EXCL));
    EXPECT_EQ(EINVAL, errno);
    XrcdPtr second = open_xrcd(ctx, fd, 0);  // the same domain
    ASSERT_NE(nullptr, second);
    XrcdPtr lone = open_xrcd(ctx, -1, O_CREAT);
    ASSERT_NE(nullptr, lone);

    // An XRC SRQ needs its domain and CQ; only XRC SRQs have numbers.
    EXPECT_EQ(nullptr, try_xrc_srq(ctx, ep->pd.get(), first.get(), nullptr, kXrcSrqMask & ~IBV_SRQ_INIT_ATTR_CQ));
    EXPECT_EQ(EINVAL, errno);
    EXPECT_EQ(nullptr, try_xrc_srq(ctx, ep->pd.get(), nullptr, cq.get(), kXrcSrqMask & ~IBV_SRQ_INIT_ATTR_XRCD));
    EXPECT_EQ(EINVAL, errno);
    SrqPtr srq = xrc_srq(ctx, ep->pd.get(), first.get(), cq.get());
    ASSERT_NE(nullptr, srq);
    ibv_srq_init_attr basic_init{};
    basic_init.attr.max_wr = 4;
    basic_init.attr.max_sge = 1;
    SrqPtr basic(ibv_create_srq(ep->pd.get(), &basic_init));
    ASSERT_NE(nullptr, basic);
    uint32_t n = 0;
    EXPECT_NE(0, ibv_get_srq_num(basic.get(), &n));
    const uint32_t srqn = srq_num(srq.get());
    EXPECT_EQ(srqn, srqn & 0xffffff);

    // XRC_RECV: a domain and nothing else; XRC_SEND: a PD and a send CQ.
    ibv_qp_init_attr_ex bad{};
    bad.qp_type = IBV_QPT_XRC_RECV;
    EXPECT_EQ(nullptr, ibv_create_qp_ex(ctx, &bad));
    EXPECT_EQ(EINVAL, errno);
    bad = {};
    bad.qp_type = IBV_QPT_XRC_SEND;
    bad.comp_mask = IBV_QP_INIT_ATTR_PD;
    bad.pd = ep->pd.get();
    EXPECT_EQ(nullptr, ibv_create_qp_ex(ctx, &bad));
    EXPECT_EQ(EINVAL, errno);
    QpPtr recv = xrc_recv_qp(ctx, second.get());
    ASSERT_NE(nullptr, recv);
    EXPECT_EQ(nullptr, recv->pd);
    EXPECT_EQ(nullptr, recv->send_cq);
    EXPECT_EQ(nullptr, recv->recv_cq);
    {
      ibv_qp_attr attr{};
      ibv_qp_init_attr init{};
      ASSERT_EQ(0, ibv_query_qp(recv.get(), &attr, IBV_QP_CAP, &init));
      EXPECT_EQ(0u, init.cap.max_send_wr) << "an XRC_RECV QP has no send queue";
      EXPECT_EQ(0u, init.cap.max_recv_wr) << "nor a receive queue";
    }
    QpPtr send = xrc_send_qp(ctx, ep->pd.get(), cq.get());
    ASSERT_NE(nullptr, send);
    ibv_recv_wr rwr{};
    ibv_recv_wr* bad_rwr = nullptr;
    EXPECT_NE(0, ibv_post_recv(send.get(), &rwr, &bad_rwr)) << "an XRC_SEND QP has no receive queue";

    // ibv_open_qp: an XRC_RECV QP of the handle's domain, by number.
    ibv_qp_open_attr oa{};
    oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_CONTEXT;
    oa.qp_type = IBV_QPT_XRC_RECV;
    oa.xrcd = first.get();
    oa.qp_context = &oa;
    oa.qp_num = 0xfffff0;
    EXPECT_EQ(nullptr, ibv_open_qp(ctx, &oa)) << "an unknown QP number";
    EXPECT_EQ(EINVAL, errno);
    oa.qp_num = send->qp_num;
    EXPECT_EQ(nullptr, ibv_open_qp(ctx, &oa)) << "not an XRC_RECV QP";
    EXPECT_EQ(EINVAL, errno);
    oa.qp_num = recv->qp_num;
    oa.xrcd = lone.get();
    EXPECT_EQ(nullptr, ibv_open_qp(ctx, &oa)) << "another domain's QP";
    EXPECT_EQ(EINVAL, errno);
    oa.xrcd = first.get();
    QpPtr opened(ibv_open_qp(ctx, &oa));
    ASSERT_NE(nullptr, opened) << errno_name(errno);
    EXPECT_EQ(recv->qp_num, opened->qp_num);
    EXPECT_EQ(IBV_QPT_XRC_RECV, opened->qp_type);
    EXPECT_EQ(&oa, opened->qp_context);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(0, ibv_query_qp(opened.get(), &attr, IBV_QP_STATE, &init));
    EXPECT_EQ(IBV_QPS_RESET, attr.qp_state);
    attr = {};
    attr.qp_state = IBV_QPS_INIT;
    EXPECT_EQ(EOPNOTSUPP, ibv_modify_qp(opened.get(), &attr, IBV_QP_STATE)) << "modify through an opened handle";

    // ibv_close_xrcd: EBUSY while an SRQ or QP of the handle uses the domain.
    EXPECT_EQ(EBUSY, ibv_close_xrcd(first.get())) << "its SRQ and opened QP";
    EXPECT_EQ(EBUSY, ibv_close_xrcd(second.get())) << "its XRC_RECV QP";
    opened.reset();
    srq.reset();
    EXPECT_EQ(0, ibv_close_xrcd(first.release()));
    recv.reset();
    EXPECT_EQ(0, ibv_close_xrcd(second.release()));
    // Every handle closed, the domain is gone: without O_CREAT nothing is found.
    EXPECT_EQ(nullptr, try_open_xrcd(ctx, fd, 0));
    EXPECT_EQ(EINVAL, errno);
    ::close(fd);
    ::unlink(path);
  });
}

// Two processes open one file's domain: the second finds the first's
// XRC_RECV QP with ibv_open_qp and adds an XRC SRQ; a third process's
// XRC_SEND QP reaches that SRQ through the first's QP (host device only:
// on RoCE each process of the suite is a host with a device of its own).
TEST(XrcShared, TwoProcessesShareADomainThroughAFile) {
  char path[] = "/tmp/softverbs-xrcd-XXXXXX";
  const int tmp = ::mkstemp(path);
  ASSERT_GE(tmp, 0);
  ::close(tmp);
  const std::string file = path;
  std::vector<ProcSpec> procs;
  procs.push_back({"qp-owner", [&](Proc& p) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    const int fd = ::open(file.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    XrcdPtr xrcd = open_xrcd(ep->ctx.get(), fd, O_CREAT);
    ASSERT_NE(nullptr, xrcd);
    QpPtr qp = xrc_recv_qp(ep->ctx.get(), xrcd.get());
    ASSERT_NE(nullptr, qp);
    const XrcInfo mine = info_of(qp.get(), ep->port, kRecvPsn);
    ASSERT_TRUE(p.link(1).send(mine));
    XrcInfo theirs;
    ASSERT_TRUE(p.link(2).send(mine));
    ASSERT_TRUE(p.link(2).recv(&theirs));
    ASSERT_TRUE(connect_xrc(qp.get(), ep->port, kRecvPsn, theirs));
    ASSERT_TRUE(p.link(2).signal("connected"));
    ASSERT_TRUE(p.barrier("received"));
    qp.reset();
    xrcd.reset();
    ::close(fd);
  }});
  procs.push_back({"srq-owner", [&](Proc& p) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    CqPtr cq = create_cq(ep->ctx.get(), 16);
    ASSERT_NE(nullptr, cq);
    XrcInfo target;
    ASSERT_TRUE(p.link(0).recv(&target));
    const int fd = ::open(file.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    XrcdPtr xrcd = open_xrcd(ep->ctx.get(), fd, 0);  // the first process's domain
    ASSERT_NE(nullptr, xrcd);
    ibv_qp_open_attr oa{};
    oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
    oa.qp_type = IBV_QPT_XRC_RECV;
    oa.xrcd = xrcd.get();
    oa.qp_num = target.qpn;
    QpPtr opened(ibv_open_qp(ep->ctx.get(), &oa));
    ASSERT_NE(nullptr, opened) << errno_name(errno);
    EXPECT_EQ(target.qpn, opened->qp_num);
    SrqPtr srq = xrc_srq(ep->ctx.get(), ep->pd.get(), xrcd.get(), cq.get());
    ASSERT_NE(nullptr, srq);
    auto mem = Region::create(ep->pd.get(), 4096);
    ASSERT_NE(nullptr, mem);
    ASSERT_TRUE(post_xrc_recv(srq.get(), 5, mem->sge(0, 4096)));
    XrcInfo mine;
    mine.srqn = srq_num(srq.get());
    ASSERT_TRUE(p.link(2).send(mine));
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(cq.get(), &wc, scaled(kOpTimeout), "for the SEND through the other process's QP"));
    WcExpect want;
    want.wr_id = 5;
    want.opcode = IBV_WC_RECV;
    want.byte_len = kMsg;
    want.qp_num = target.qpn;
    EXPECT_TRUE(check_wc(wc, want));
    EXPECT_TRUE(expect_pattern(mem->data(), kMsg, 0x53, "the SEND's data"));
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(0, ibv_query_qp(opened.get(), &attr, IBV_QP_STATE, &init));
    EXPECT_EQ(IBV_QPS_RTS, attr.qp_state) << "the creator's modify, seen through the opened handle";
    ASSERT_TRUE(p.barrier("received"));
    opened.reset();
    srq.reset();
    xrcd.reset();
    ::close(fd);
  }});
  procs.push_back({"sender", [&](Proc& p) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    CqPtr cq = create_cq(ep->ctx.get(), 16);
    ASSERT_NE(nullptr, cq);
    auto mem = Region::create(ep->pd.get(), 4096);
    ASSERT_NE(nullptr, mem);
    QpPtr qp = xrc_send_qp(ep->ctx.get(), ep->pd.get(), cq.get());
    ASSERT_NE(nullptr, qp);
    XrcInfo target, srq;
    ASSERT_TRUE(p.link(0).recv(&target));
    ASSERT_TRUE(p.link(0).send(info_of(qp.get(), ep->port, kSendPsn)));
    ASSERT_TRUE(connect_xrc(qp.get(), ep->port, kSendPsn, target));
    ASSERT_TRUE(p.link(0).wait("connected"));
    ASSERT_TRUE(p.link(1).recv(&srq));
    fill_pattern(mem->data(), kMsg, 0x53);
    Wr send = wr_send(1, {mem->sge(0, kMsg)});
    ASSERT_TRUE(run_xrc(qp.get(), cq.get(), send, srq.srqn, IBV_WC_SUCCESS));
    ASSERT_TRUE(p.barrier("received"));
  }});
  run_procs(std::move(procs));
  ::unlink(file.c_str());
}

}  // namespace
}  // namespace softverbs::integration
