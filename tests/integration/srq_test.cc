// Shared receive queues: QPs (RC, UD) of one process taking their receive
// WQEs from one SRQ, in the SRQ's order, each completion on the taking QP's
// recv CQ with that QP's qp_num; the limit event (one-shot, re-armed by
// ibv_modify_srq); IBV_EVENT_QP_LAST_WQE_REACHED for an RC QP on an SRQ that
// goes to Error, whose WQEs stay with the SRQ; RNR NAK while the SRQ is
// empty; and the verbs' error returns (ibv_create_srq(3), ibv_modify_srq(3),
// ibv_post_srq_recv(3), ibv_destroy_srq(3)).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr uint32_t kGrh = 40;
constexpr uint32_t kQkey = 0x11111111;
// How long "no event / no completion" is watched for.
Millis quiet() { return scaled(Millis(300)); }

struct DestroySrq {
  void operator()(ibv_srq* s) const {
    if (s != nullptr) {
      EXPECT_EQ(0, ibv_destroy_srq(s)) << "ibv_destroy_srq";
    }
  }
};
using SrqPtr = std::unique_ptr<ibv_srq, DestroySrq>;
using QpList = std::vector<std::unique_ptr<TestQp>>;

SrqPtr create_srq(ibv_pd* pd, uint32_t max_wr, uint32_t max_sge) {
  ibv_srq_init_attr init{};
  init.attr.max_wr = max_wr;
  init.attr.max_sge = max_sge;
  errno = 0;
  SrqPtr srq(ibv_create_srq(pd, &init));
  if (!srq) {
    ADD_FAILURE() << "ibv_create_srq(" << max_wr << ", " << max_sge << "): " << errno_name(errno);
    return nullptr;
  }
  // ibv_create_srq(3): attr holds the actual values, at least those asked for.
  EXPECT_GE(init.attr.max_wr, max_wr);
  EXPECT_GE(init.attr.max_sge, max_sge);
  return srq;
}

bool post_srq(ibv_srq* srq, uint64_t id, std::vector<ibv_sge> sges) {
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = sges.empty() ? nullptr : sges.data();
  wr.num_sge = static_cast<int>(sges.size());
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_srq_recv(srq, &wr, &bad);
  if (rc != 0) {
    ADD_FAILURE() << "ibv_post_srq_recv(wr_id " << id << "): " << errno_name(rc);
    return false;
  }
  return true;
}

bool arm_limit(ibv_srq* srq, uint32_t limit) {
  ibv_srq_attr a{};
  a.srq_limit = limit;
  const int rc = ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT);
  if (rc != 0) ADD_FAILURE() << "ibv_modify_srq(IBV_SRQ_LIMIT " << limit << "): " << errno_name(rc);
  return rc == 0;
}

uint32_t srq_limit(ibv_srq* srq) {
  ibv_srq_attr a{};
  EXPECT_EQ(0, ibv_query_srq(srq, &a));
  return a.srq_limit;
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

// Expects exactly one event of `type` (for `srq` or `qp`) within the op
// timeout, acks it, then none at all for quiet().
bool expect_one_event(ibv_context* ctx, ibv_event_type type, ibv_srq* srq, ibv_qp* qp, std::string_view what) {
  ibv_async_event ev{};
  if (!next_event(ctx, &ev, scaled(kOpTimeout))) {
    ADD_FAILURE() << "no asynchronous event " << what;
    return false;
  }
  EXPECT_EQ(type, ev.event_type) << what;
  if (ev.event_type == type && srq != nullptr) {
    EXPECT_EQ(srq, ev.element.srq) << what << ": names another SRQ";
  }
  if (ev.event_type == type && qp != nullptr) {
    EXPECT_EQ(qp, ev.element.qp) << what << ": names another QP";
  }
  ibv_ack_async_event(&ev);
  if (next_event(ctx, &ev, quiet())) {
    ADD_FAILURE() << "a second asynchronous event (" << ev.event_type << ") " << what;
    ibv_ack_async_event(&ev);
    return false;
  }
  return ev.event_type == type;
}

bool expect_no_event(ibv_context* ctx, std::string_view what) {
  ibv_async_event ev{};
  if (!next_event(ctx, &ev, quiet())) return true;
  ADD_FAILURE() << "unexpected asynchronous event " << ev.event_type << " " << what;
  ibv_ack_async_event(&ev);
  return false;
}

QpConfig on_srq(QpConfig c, ibv_srq* srq) {
  c.srq = srq;
  return c;
}

// The sender's side: `count` QPs of `config` connected to the peer's.
std::unique_ptr<Endpoint> sender(Link& link, const std::vector<QpConfig>& configs) {
  auto ep = Endpoint::open();
  if (ep == nullptr) return nullptr;
  std::vector<TestQp*> qps;
  for (const QpConfig& c : configs) {
    TestQp* qp = ep->add_qp(c);
    if (qp == nullptr) return nullptr;
    qps.push_back(qp);
  }
  if (!connect_over(link, qps)) return nullptr;
  return ep;
}

// Several RC QPs of the receiver share one SRQ: message i (sent on QP i % 3,
// each after the previous one completed) lands in the SRQ's i-th WQE,
// scattered over its two SGEs, and completes on the shared recv CQ with the
// QP it came through.
TEST(Srq, RcQpsShareOneSrqInOrder) {
  constexpr int kQps = 3;
  constexpr int kMsgs = 30;
  constexpr size_t kSlot = 4096;
  auto size_of = [](int i) { return static_cast<uint32_t>(1 + (i * 397) % 4000); };
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = sender(p.peer(), std::vector<QpConfig>(kQps));
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), kSlot);
        ASSERT_NE(nullptr, src);
        ASSERT_TRUE(p.peer().wait("posted"));
        for (int i = 0; i < kMsgs; ++i) {
          fill_pattern(src->data(), size_of(i), 0x5000 + i);
          Wr w = i % 4 == 3 ? wr_send_imm(i, {src->sge(0, size_of(i))}, 0xA000 + i) : wr_send(i, {src->sge(0, size_of(i))});
          ASSERT_TRUE(run_wr(ep->qp(i % kQps), w)) << "message " << i;
        }
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        EXPECT_GE(ep->dev.max_srq, 1);
        EXPECT_GE(ep->dev.max_srq_wr, kMsgs);
        EXPECT_GE(ep->dev.max_srq_sge, 2);
        SrqPtr srq = create_srq(ep->pd.get(), 64, 2);
        ASSERT_NE(nullptr, srq);
        CqPtr rcq = create_cq(ep->ctx.get(), 256);
        ASSERT_NE(nullptr, rcq);
        auto dst = Region::create(ep->pd.get(), kSlot * kMsgs);
        ASSERT_NE(nullptr, dst);
        QpList qps;  // declared last: destroyed before the SRQ and the CQ
        std::vector<TestQp*> raw;
        for (int q = 0; q < kQps; ++q) {
          qps.push_back(TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, on_srq({}, srq.get()), nullptr, rcq.get()));
          ASSERT_NE(nullptr, qps.back());
          raw.push_back(qps.back().get());
          // ibv_query_qp(3) reports the SRQ; the QP has no receive queue of its own.
          ibv_qp_attr attr{};
          ibv_qp_init_attr init{};
          ASSERT_EQ(0, ibv_query_qp(qps.back()->get(), &attr, IBV_QP_CAP, &init));
          EXPECT_EQ(srq.get(), init.srq);
          EXPECT_EQ(srq.get(), qps.back()->get()->srq);
          EXPECT_EQ(0u, init.cap.max_recv_wr);
        }
        // Two SGEs per WQE: the first 100 bytes, then the rest of the slot.
        for (int i = 0; i < kMsgs; ++i)
          ASSERT_TRUE(post_srq(srq.get(), 1000 + i, {dst->sge(i * kSlot, 100), dst->sge(i * kSlot + 100, kSlot - 100)}));
        ASSERT_TRUE(connect_over(p.peer(), raw));
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(rcq.get(), kMsgs, &wcs, scaled(kOpTimeout), "for the SENDs"));
        for (int i = 0; i < kMsgs; ++i) {
          SCOPED_TRACE("message " + std::to_string(i));
          WcExpect want;
          want.wr_id = 1000 + i;
          want.opcode = IBV_WC_RECV;
          want.byte_len = size_of(i);
          want.qp_num = qps[i % kQps]->qpn();
          if (i % 4 == 3) want.imm = 0xA000 + i;
          else want.no_imm = true;
          EXPECT_TRUE(check_wc(wcs[i], want));
          EXPECT_TRUE(expect_pattern(dst->data() + i * kSlot, size_of(i), 0x5000 + i, "payload"));
          EXPECT_TRUE(expect_fill(dst->data() + i * kSlot + size_of(i), kSlot - size_of(i), kGuardByte, "past it"));
        }
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// A UD QP on an SRQ: datagrams land after the GRH room of the SRQ's WQEs.
TEST(Srq, UdQpOnSrq) {
  constexpr int kMsgs = 6;
  QpConfig ud;
  ud.qp_type = IBV_QPT_UD;
  ud.qkey = kQkey;
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = sender(p.peer(), {ud});
        ASSERT_NE(nullptr, ep);
        QpInfo peer;
        ASSERT_TRUE(p.peer().send(ep->qp().info()) && p.peer().recv(&peer));
        ibv_ah_attr a{};
        a.dlid = peer.lid;
        a.port_num = peer.port;
        if (ep->port.roce()) {
          a.is_global = 1;
          std::memcpy(a.grh.dgid.raw, peer.gid, 16);
          a.grh.hop_limit = 1;
        }
        ibv_ah* ah = ibv_create_ah(ep->pd.get(), &a);
        ASSERT_NE(nullptr, ah) << errno_name(errno);
        auto src = Region::create(ep->pd.get(), 2048);
        ASSERT_NE(nullptr, src);
        ASSERT_TRUE(p.peer().wait("posted"));
        for (int i = 0; i < kMsgs; ++i) {
          fill_pattern(src->data(), 100 + i * 300, 0x7700 + i);
          Wr w = wr_send(i, {src->sge(0, 100 + i * 300)});
          w.wr.wr.ud.ah = ah;
          w.wr.wr.ud.remote_qpn = peer.qpn;
          w.wr.wr.ud.remote_qkey = kQkey;
          ASSERT_TRUE(run_wr(ep->qp(), w));
        }
        ASSERT_TRUE(p.peer().wait("verified"));
        EXPECT_EQ(0, ibv_destroy_ah(ah));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        SrqPtr srq = create_srq(ep->pd.get(), 16, 1);
        ASSERT_NE(nullptr, srq);
        constexpr size_t kSlot = 4096;
        auto dst = Region::create(ep->pd.get(), kSlot * kMsgs);
        ASSERT_NE(nullptr, dst);
        QpList qps;
        qps.push_back(TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, on_srq(ud, srq.get())));
        ASSERT_NE(nullptr, qps[0]);
        ASSERT_TRUE(connect_over(p.peer(), {qps[0].get()}));
        QpInfo peer;
        ASSERT_TRUE(p.peer().send(qps[0]->info()) && p.peer().recv(&peer));
        for (int i = 0; i < kMsgs; ++i) ASSERT_TRUE(post_srq(srq.get(), 50 + i, {dst->sge(i * kSlot, kSlot)}));
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qps[0]->recv_cq(), kMsgs, &wcs, scaled(kOpTimeout), "for the datagrams"));
        for (int i = 0; i < kMsgs; ++i) {
          SCOPED_TRACE("datagram " + std::to_string(i));
          WcExpect want;
          want.wr_id = 50 + i;
          want.opcode = IBV_WC_RECV;
          want.byte_len = kGrh + 100 + i * 300;
          want.qp_num = qps[0]->qpn();
          want.src_qp = peer.qpn;
          EXPECT_TRUE(check_wc(wcs[i], want));
          EXPECT_TRUE(expect_pattern(dst->data() + i * kSlot + kGrh, 100 + i * 300, 0x7700 + i, "payload"));
        }
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// IBV_EVENT_SRQ_LIMIT_REACHED (ibv_modify_srq(3)): once, when a receive takes
// the SRQ below the armed limit; the limit then reads 0 (disarmed) and later
// receives raise nothing until ibv_modify_srq arms it again.
TEST(Srq, LimitEventFiresOnceUntilRearmed) {
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = sender(p.peer(), {QpConfig{}});
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, src);
        for (uint64_t id = 0;;) {
          uint32_t n = 0;
          ASSERT_TRUE(p.peer().recv(&n, Deadline::op(), "how many to send"));
          if (n == 0) break;
          for (uint32_t k = 0; k < n; ++k, ++id) {
            Wr w = wr_send(id, {src->sge(0, 64)});
            ASSERT_TRUE(run_wr(ep->qp(), w));
          }
          ASSERT_TRUE(p.peer().signal("sent"));
        }
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        SrqPtr srq = create_srq(ep->pd.get(), 16, 1);
        ASSERT_NE(nullptr, srq);
        auto dst = Region::create(ep->pd.get(), 64 * 32);
        ASSERT_NE(nullptr, dst);
        QpList qps;
        qps.push_back(TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, on_srq({}, srq.get())));
        ASSERT_NE(nullptr, qps[0]);
        ASSERT_TRUE(connect_over(p.peer(), {qps[0].get()}));
        uint64_t posted = 0;
        auto post = [&](int n) {
          for (int k = 0; k < n; ++k, ++posted)
            if (!post_srq(srq.get(), posted, {dst->sge(posted * 64, 64)})) return false;
          return true;
        };
        auto receive = [&](uint32_t n) {
          if (!p.peer().send(n) || !p.peer().wait("sent")) return false;
          std::vector<ibv_wc> wcs;
          return poll_n(qps[0]->recv_cq(), n, &wcs, scaled(kOpTimeout), "for the SENDs");
        };
        ibv_context* ctx = ep->ctx.get();
        ASSERT_TRUE(post(8));
        EXPECT_EQ(0u, srq_limit(srq.get())) << "a new SRQ is not armed";
        ASSERT_TRUE(arm_limit(srq.get(), 4));
        EXPECT_EQ(4u, srq_limit(srq.get()));
        ASSERT_TRUE(receive(3));  // 5 left
        EXPECT_TRUE(expect_no_event(ctx, "with 5 WQEs left, limit 4"));
        ASSERT_TRUE(receive(1));  // 4 left: not below the limit
        EXPECT_TRUE(expect_no_event(ctx, "with 4 WQEs left, limit 4"));
        ASSERT_TRUE(receive(1));  // 3 left
        EXPECT_TRUE(expect_one_event(ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq.get(), nullptr, "with 3 WQEs left, limit 4"));
        EXPECT_EQ(0u, srq_limit(srq.get())) << "the event disarms the limit";
        ASSERT_TRUE(receive(2));  // 1 left: disarmed, nothing
        EXPECT_TRUE(expect_no_event(ctx, "after the event, before re-arming"));
        ASSERT_TRUE(post(8));  // 9 left
        ASSERT_TRUE(arm_limit(srq.get(), 6));
        ASSERT_TRUE(receive(3));  // 6 left
        EXPECT_TRUE(expect_no_event(ctx, "with 6 WQEs left, limit 6"));
        ASSERT_TRUE(receive(1));  // 5 left
        EXPECT_TRUE(expect_one_event(ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq.get(), nullptr, "re-armed at 6, 5 left"));
        ASSERT_TRUE(receive(5));  // drained, disarmed
        EXPECT_TRUE(expect_no_event(ctx, "draining a disarmed SRQ"));
        ASSERT_TRUE(p.peer().send(uint32_t{0}));
      });
}

// Regression (issue 18: an SRQ's asynchronous events were counted when raised,
// so ibv_destroy_srq waited forever for the acknowledgement of one nobody
// fetched): ibv_destroy_srq(3) waits only for fetched events, and the
// unfetched one is skipped afterwards instead of naming a freed SRQ.
TEST(Srq, DestroyDoesNotWaitForAnUnfetchedLimitEvent) {
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = sender(p.peer(), {QpConfig{}});
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, src);
        ASSERT_TRUE(p.peer().wait("armed"));
        for (uint64_t id = 0; id < 2; ++id) {
          Wr w = wr_send(id, {src->sge(0, 64)});
          ASSERT_TRUE(run_wr(ep->qp(), w));
        }
        ASSERT_TRUE(p.peer().signal("sent"));
        ASSERT_TRUE(p.peer().wait("destroyed"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        ibv_srq_init_attr init{};
        init.attr.max_wr = 8;
        init.attr.max_sge = 1;
        ibv_srq* srq = ibv_create_srq(ep->pd.get(), &init);
        ASSERT_NE(nullptr, srq);
        auto dst = Region::create(ep->pd.get(), 64 * 8);
        ASSERT_NE(nullptr, dst);
        auto qp = TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, on_srq({}, srq));
        ASSERT_NE(nullptr, qp);
        ASSERT_TRUE(connect_over(p.peer(), {qp.get()}));
        for (uint64_t id = 0; id < 4; ++id) ASSERT_TRUE(post_srq(srq, id, {dst->sge(id * 64, 64)}));
        ASSERT_TRUE(arm_limit(srq, 3));
        ASSERT_TRUE(p.peer().signal("armed"));
        ASSERT_TRUE(p.peer().wait("sent"));  // 2 left, below the limit
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qp->recv_cq(), 2, &wcs));
        pollfd pfd{ep->ctx->async_fd, POLLIN, 0};
        ASSERT_EQ(1, ::poll(&pfd, 1, static_cast<int>(scaled(kOpTimeout).count()))) << "no limit event to leave unread";
        EXPECT_EQ(0, qp->destroy_undrained());
        qp.reset();
        const auto start = Clock::now();
        EXPECT_EQ(0, ibv_destroy_srq(srq));  // its limit event is still unread
        EXPECT_LT(ms_since(start), 5000.0) << "ibv_destroy_srq waited for an event never fetched";
        EXPECT_TRUE(expect_no_event(ep->ctx.get(), "after the SRQ it named was destroyed"));
        ASSERT_TRUE(p.peer().signal("destroyed"));
      });
}

// IBA 11.6.3: an RC QP on an SRQ that goes to Error raises Last WQE Reached
// once; the SRQ's WQEs are not flushed (no completion at all) and another QP
// on the SRQ still receives into the first of them.
TEST(Srq, LastWqeReachedAfterErr) {
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = sender(p.peer(), {QpConfig{}, QpConfig{}});
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, src);
        fill_pattern(src->data(), 64, 0xE1);
        ASSERT_TRUE(p.peer().wait("qp0 in error"));
        Wr w = wr_send(7, {src->sge(0, 64)});
        ASSERT_TRUE(run_wr(ep->qp(1), w));
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        SrqPtr srq = create_srq(ep->pd.get(), 8, 1);
        ASSERT_NE(nullptr, srq);
        CqPtr rcq = create_cq(ep->ctx.get(), 16);
        ASSERT_NE(nullptr, rcq);
        auto dst = Region::create(ep->pd.get(), 128);
        ASSERT_NE(nullptr, dst);
        QpList qps;
        for (int q = 0; q < 2; ++q) {
          qps.push_back(TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, on_srq({}, srq.get()), nullptr, rcq.get()));
          ASSERT_NE(nullptr, qps.back());
        }
        ASSERT_TRUE(connect_over(p.peer(), {qps[0].get(), qps[1].get()}));
        ASSERT_TRUE(post_srq(srq.get(), 100, {dst->sge(0, 64)}));
        ASSERT_TRUE(post_srq(srq.get(), 101, {dst->sge(64, 64)}));
        ASSERT_TRUE(qps[0]->to_state(IBV_QPS_ERR));
        EXPECT_TRUE(expect_one_event(ep->ctx.get(), IBV_EVENT_QP_LAST_WQE_REACHED, nullptr, qps[0]->get(),
                                     "after the QP on the SRQ went to Error"));
        ASSERT_TRUE(qps[0]->to_state(IBV_QPS_ERR));  // Error again: still once
        EXPECT_TRUE(expect_no_event(ep->ctx.get(), "after a second move to Error"));
        EXPECT_TRUE(expect_no_completion(rcq.get(), quiet(), "the SRQ's WQEs are not the QP's to flush"));
        ASSERT_TRUE(p.peer().signal("qp0 in error"));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(rcq.get(), &wc, scaled(kOpTimeout), "for the SEND on the other QP"));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 100, .opcode = IBV_WC_RECV, .byte_len = 64, .qp_num = qps[1]->qpn()}));
        EXPECT_TRUE(expect_pattern(dst->data(), 64, 0xE1, "payload"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// IBA 9.7.5.2.8: an empty SRQ answers an RC SEND with RNR NAKs: with
// rnr_retry 0 the SEND fails (IBV_WC_RNR_RETRY_EXC_ERR); with 7 it waits,
// and completes once a WQE is posted to the SRQ.
TEST(Srq, RnrNakWhenEmptyThenSuccess) {
  run_pair(
      "sender",
      [&](Proc& p) {
        QpConfig no_retry;
        no_retry.rnr_retry = 0;
        auto ep = sender(p.peer(), {no_retry, QpConfig{}});
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, src);
        fill_pattern(src->data(), 64, 0x22);
        Wr lost = wr_send(1, {src->sge(0, 64)});
        ASSERT_TRUE(run_wr_expect(ep->qp(0), lost, IBV_WC_RNR_RETRY_EXC_ERR));
        Wr waits = wr_send(2, {src->sge(0, 64)});
        ASSERT_TRUE(post(ep->qp(1), waits));
        EXPECT_TRUE(expect_no_completion(ep->qp(1).send_cq(), quiet(), "while the SRQ is empty"));
        ASSERT_TRUE(p.peer().signal("waiting"));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp(1).send_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 2, .opcode = IBV_WC_SEND}));
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        SrqPtr srq = create_srq(ep->pd.get(), 8, 1);
        ASSERT_NE(nullptr, srq);
        CqPtr rcq = create_cq(ep->ctx.get(), 16);
        ASSERT_NE(nullptr, rcq);
        auto dst = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, dst);
        QpList qps;
        for (int q = 0; q < 2; ++q) {
          QpConfig c = on_srq({}, srq.get());
          c.min_rnr_timer = 1;  // 0.01 ms
          qps.push_back(TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, c, nullptr, rcq.get()));
          ASSERT_NE(nullptr, qps.back());
        }
        ASSERT_TRUE(connect_over(p.peer(), {qps[0].get(), qps[1].get()}));
        ASSERT_TRUE(p.peer().wait("waiting"));
        EXPECT_TRUE(expect_no_completion(rcq.get(), Millis(0), "before any WQE was posted"));
        ASSERT_TRUE(post_srq(srq.get(), 9, {dst->sge(0, 64)}));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(rcq.get(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 9, .opcode = IBV_WC_RECV, .byte_len = 64, .qp_num = qps[1]->qpn()}));
        EXPECT_TRUE(expect_pattern(dst->data(), 64, 0x22, "payload"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// ibv_modify_srq(3) with IBV_SRQ_MAX_WR grows an SRQ (IBV_DEVICE_SRQ_RESIZE)
// while a peer's responder takes from it: every WQE posted before or after
// a growth is consumed exactly once, in order, and the new size is usable.
TEST(Srq, GrowsWhileAPeerSends) {
  constexpr int kMessages = 600;
  run_pair(
      "sender",
      [&](Proc& p) {
        QpConfig forever;
        forever.rnr_retry = 7;  // IBA 9.7.5.2.8: an empty SRQ only delays
        auto ep = sender(p.peer(), {forever});
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 8);
        ASSERT_NE(nullptr, src);
        for (int i = 0; i < kMessages; ++i) {
          std::memcpy(src->data(), &i, sizeof i);
          Wr w = wr_send(static_cast<uint64_t>(i), {src->sge(0, sizeof i)});
          ASSERT_TRUE(run_wr_expect(ep->qp(0), w, IBV_WC_SUCCESS)) << "message " << i;
        }
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        ASSERT_NE(0, ep->dev.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
        SrqPtr srq = create_srq(ep->pd.get(), 2, 1);
        ASSERT_NE(nullptr, srq);
        CqPtr rcq = create_cq(ep->ctx.get(), 1024);
        ASSERT_NE(nullptr, rcq);
        auto dst = Region::create(ep->pd.get(), 8 * 1024);
        ASSERT_NE(nullptr, dst);
        QpConfig c = on_srq({}, srq.get());
        c.min_rnr_timer = 1;  // 0.01 ms
        QpList qps;
        qps.push_back(TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, c, nullptr, rcq.get()));
        ASSERT_NE(nullptr, qps.back());
        ASSERT_TRUE(connect_over(p.peer(), {qps[0].get()}));
        uint32_t size = 2;
        int posted = 0;
        int received = 0;
        int grown_at = -1;
        auto post_upto = [&](int n) {
          for (; posted < n && posted < kMessages; ++posted)
            ASSERT_TRUE(post_srq(srq.get(), static_cast<uint64_t>(posted),
                                 {dst->sge(static_cast<uint64_t>(posted % 1024) * 8, 8)}));
        };
        post_upto(2);
        while (received < kMessages) {
          // Keep the SRQ full, growing it every 50 messages up to 512.
          if (received % 50 == 0 && received != grown_at && size < 512) {
            grown_at = received;
            ibv_srq_attr m{};
            m.max_wr = size * 2;
            ASSERT_EQ(0, ibv_modify_srq(srq.get(), &m, IBV_SRQ_MAX_WR));
            ibv_srq_attr q{};
            ASSERT_EQ(0, ibv_query_srq(srq.get(), &q));
            ASSERT_EQ(size * 2, q.max_wr);
            size *= 2;
          }
          post_upto(received + static_cast<int>(size));
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(rcq.get(), &wc));
          ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
          ASSERT_EQ(static_cast<uint64_t>(received), wc.wr_id) << "in order, once each";
          int got = -1;
          std::memcpy(&got, dst->data() + (received % 1024) * 8, sizeof got);
          ASSERT_EQ(received, got);
          ++received;
        }
        EXPECT_EQ(512u, size);
        EXPECT_TRUE(expect_no_completion(rcq.get(), Millis(0), "after the last message"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// ibv_post_srq_recv(3): a WR with more SGEs than the SRQ's max_sge fails with
// EINVAL, bad_wr names it, the WRs before it are posted and those after it
// not; a full SRQ refuses with ENOMEM.
TEST(Srq, PostSrqRecvBadWr) {
  run_solo("owner", [&](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    SrqPtr srq = create_srq(ep->pd.get(), 4, 2);
    ASSERT_NE(nullptr, srq);
    ibv_srq_attr attr{};
    ASSERT_EQ(0, ibv_query_srq(srq.get(), &attr));
    ASSERT_EQ(2u, attr.max_sge) << "this test needs max_sge exactly 2";
    auto buf = Region::create(ep->pd.get(), 4096);
    ASSERT_NE(nullptr, buf);
    QpConfig tx;
    tx.rnr_retry = 0;
    QpList qps;
    qps.push_back(TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, tx));
    qps.push_back(TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, on_srq({}, srq.get())));
    ASSERT_NE(nullptr, qps[0]);
    ASSERT_NE(nullptr, qps[1]);
    ASSERT_TRUE(connect_local(*qps[0], *qps[1]));

    std::vector<ibv_sge> one = {buf->sge(1024, 64)};
    std::vector<ibv_sge> three = {buf->sge(2048, 8), buf->sge(2056, 8), buf->sge(2064, 8)};
    ibv_recv_wr w[3]{};
    w[0] = {.wr_id = 1, .next = &w[1], .sg_list = one.data(), .num_sge = 1};
    w[1] = {.wr_id = 2, .next = &w[2], .sg_list = three.data(), .num_sge = 3};
    w[2] = {.wr_id = 3, .next = nullptr, .sg_list = one.data(), .num_sge = 1};
    ibv_recv_wr* bad = nullptr;
    EXPECT_EQ(EINVAL, ibv_post_srq_recv(srq.get(), &w[0], &bad));
    EXPECT_EQ(&w[1], bad) << "bad_wr must name the WR with too many SGEs";
    // A QP on an SRQ has no receive queue of its own.
    bad = nullptr;
    EXPECT_EQ(EINVAL, ibv_post_recv(qps[1]->get(), &w[2], &bad));
    EXPECT_EQ(&w[2], bad);

    // Exactly WR 1 was posted: the first SEND takes it, the second finds the SRQ empty.
    fill_pattern(buf->data(), 64, 0x31);
    Wr s1 = wr_send(11, {buf->sge(0, 64)});
    ASSERT_TRUE(run_wr(*qps[0], s1));
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(qps[1]->recv_cq(), &wc));
    EXPECT_TRUE(check_wc(wc, {.wr_id = 1, .opcode = IBV_WC_RECV, .byte_len = 64, .qp_num = qps[1]->qpn()}));
    EXPECT_TRUE(expect_pattern(buf->data() + 1024, 64, 0x31, "payload"));
    Wr s2 = wr_send(12, {buf->sge(0, 64)});
    ASSERT_TRUE(run_wr_expect(*qps[0], s2, IBV_WC_RNR_RETRY_EXC_ERR)) << "WR 3 must not have been posted";

    // Full: capacity WRs fit, the next is refused and named.
    std::vector<ibv_recv_wr> many(attr.max_wr + 1);
    for (size_t i = 0; i < many.size(); ++i)
      many[i] = {.wr_id = 100 + i, .next = i + 1 < many.size() ? &many[i + 1] : nullptr, .sg_list = one.data(), .num_sge = 1};
    bad = nullptr;
    EXPECT_EQ(ENOMEM, ibv_post_srq_recv(srq.get(), many.data(), &bad));
    EXPECT_EQ(&many.back(), bad);
  });
}

// ibv_destroy_srq(3) fails with EBUSY while a QP uses the SRQ (and the PD
// with EBUSY while the SRQ lives); bad attributes get EINVAL (an XRC SRQ
// without its domain and CQ too); growing an SRQ is not supported (EOPNOTSUPP).
TEST(Srq, DestroyBusyAndBadInput) {
  run_solo("owner", [&](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ibv_pd* pd = ep->pd.get();
    auto create_fails = [&](uint32_t max_wr, uint32_t max_sge, int err) {
      ibv_srq_init_attr init{};
      init.attr.max_wr = max_wr;
      init.attr.max_sge = max_sge;
      errno = 0;
      ibv_srq* s = ibv_create_srq(pd, &init);
      EXPECT_EQ(nullptr, s) << "max_wr " << max_wr << ", max_sge " << max_sge;
      if (s != nullptr) ibv_destroy_srq(s);
      EXPECT_EQ(err, errno) << errno_name(errno);
    };
    create_fails(0, 1, EINVAL);
    create_fails(static_cast<uint32_t>(ep->dev.max_srq_wr) + 1, 1, EINVAL);
    create_fails(4, static_cast<uint32_t>(ep->dev.max_srq_sge) + 1, EINVAL);
    {
      ibv_srq_init_attr_ex ex{};
      ex.attr.max_wr = 4;
      ex.attr.max_sge = 1;
      ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
      ex.srq_type = IBV_SRQT_XRC;
      ex.pd = pd;
      ex.cq = nullptr;
      errno = 0;
      EXPECT_EQ(nullptr, ibv_create_srq_ex(ep->ctx.get(), &ex));
      EXPECT_EQ(EINVAL, errno) << errno_name(errno);
      // A basic SRQ through the extended verb works.
      ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
      ex.srq_type = IBV_SRQT_BASIC;
      SrqPtr basic(ibv_create_srq_ex(ep->ctx.get(), &ex));
      EXPECT_NE(nullptr, basic) << errno_name(errno);
    }
    SrqPtr srq = create_srq(pd, 10, 1);
    ASSERT_NE(nullptr, srq);
    ibv_srq_attr attr{};
    ASSERT_EQ(0, ibv_query_srq(srq.get(), &attr));
    EXPECT_GE(attr.max_wr, 10u);
    EXPECT_EQ(0u, attr.srq_limit);
    ibv_srq_attr m{};
    m.max_wr = attr.max_wr;
    EXPECT_EQ(0, ibv_modify_srq(srq.get(), &m, IBV_SRQ_MAX_WR)) << "a size it has";
    m.max_wr = static_cast<uint32_t>(ep->dev.max_srq_wr) + 1;
    EXPECT_EQ(EINVAL, ibv_modify_srq(srq.get(), &m, IBV_SRQ_MAX_WR)) << "above the device's max_srq_wr";
    m.srq_limit = attr.max_wr + 1;
    EXPECT_EQ(EINVAL, ibv_modify_srq(srq.get(), &m, IBV_SRQ_LIMIT)) << "a limit above max_wr";
    EXPECT_EQ(0u, srq_limit(srq.get())) << "a failed modify changes nothing";
    EXPECT_EQ(EINVAL, ibv_modify_srq(srq.get(), &m, 0)) << "an empty mask";

    auto qp = TestQp::create(ep->ctx.get(), pd, ep->port, on_srq({}, srq.get()));
    ASSERT_NE(nullptr, qp);
    EXPECT_EQ(EBUSY, ibv_destroy_srq(srq.get())) << "a QP uses it";
    qp->destroy();
    // The PD is busy while the SRQ lives.
    EXPECT_EQ(EBUSY, ibv_dealloc_pd(pd));
    EXPECT_EQ(0, ibv_destroy_srq(srq.release()));
  });
}

}  // namespace
}  // namespace softverbs::integration
