// Completion channels (ibv_req_notify_cq, ibv_get_cq_event, ibv_ack_cq_events)
// and asynchronous events (ibv_get_async_event, ibv_ack_async_event).
//
// Notification is one-shot (ibv_req_notify_cq(3)); solicited-only arming fires
// for a receive of a message with the Solicited Event bit and for any error
// completion, never for other successful completions.
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <thread>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

// poll(2) on fd for POLLIN: 1 readable, 0 not within timeout, -1 error.
int wait_readable(int fd, Millis timeout) {
  const Deadline deadline(timeout);
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, deadline.poll_ms());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r > 0) return (pfd.revents & POLLIN) != 0 ? 1 : -1;
    if (deadline.expired()) return 0;
  }
}

// Gets one event from `channel` that must be for `cq` with `cq_context`, and acks it.
bool get_and_ack(ibv_comp_channel* channel, ibv_cq* cq, void* cq_context) {
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) != 0) {
    ADD_FAILURE() << "ibv_get_cq_event: " << errno_name(errno);
    return false;
  }
  EXPECT_EQ(cq, ev_cq) << "event for the wrong CQ";
  EXPECT_EQ(cq_context, ev_ctx) << "event with the wrong cq_context";
  ibv_ack_cq_events(ev_cq, 1);
  return ev_cq == cq && ev_ctx == cq_context;
}

// The requester's half of a remote access error: a WRITE (or a FetchAdd) to
// the buffer the peer sent, under a corrupted R_Key, completes with
// IBV_WC_REM_ACCESS_ERR.
bool fail_with_bad_rkey(Proc& p, Endpoint& ep, bool atomic) {
  auto buf = Region::create(ep.pd.get(), 64);
  if (buf == nullptr) {
    ADD_FAILURE() << "Region::create";
    return false;
  }
  RemoteBuf remote;
  if (!p.peer().recv(&remote)) return false;
  remote.rkey ^= 0x5A5A5A00;
  Wr w = atomic ? wr_faa(1, buf->sge(0, 8), remote, 1) : wr_write(1, {buf->sge(0, 64)}, remote);
  return run_wr_expect(ep.qp(), w, IBV_WC_REM_ACCESS_ERR);
}

ChannelPtr make_channel(ibv_context* ctx) {
  errno = 0;
  ChannelPtr ch(ibv_create_comp_channel(ctx));
  if (!ch) {
    ADD_FAILURE() << "ibv_create_comp_channel: " << errno_name(errno);
  }
  return ch;
}

// A thread blocked in poll() on channel->fd wakes when the peer's SEND
// arrives; the event names the CQ and its cq_context. Without re-arming, the
// next completion raises no event; after re-arming it does. The sender's send
// CQ is armed as well and raises an event for its send completion. After
// acking, the CQs and the channels are destroyed without error.
TEST(Events, CompletionChannelWakesBlockedPoll) {
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        ChannelPtr channel = make_channel(ep->ctx.get());
        ASSERT_NE(nullptr, channel);
        int marker = 0;
        CqPtr scq = create_cq(ep->ctx.get(), 64, channel.get(), &marker);
        ASSERT_NE(nullptr, scq);
        auto qp = TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, QpConfig{}, scq.get(), nullptr);
        ASSERT_NE(nullptr, qp);
        ASSERT_TRUE(connect_over(p.peer(), {qp.get()}));
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        fill_pattern(buf->data(), 4096, 0xE7);
        for (int round = 0; round < 3; ++round) {
          ASSERT_TRUE(p.peer().wait("armed"));
          if (round == 0) {
            ASSERT_EQ(0, ibv_req_notify_cq(scq.get(), 0));
          }
          Wr w = wr_send(round, {buf->sge(0, 4096)});
          ASSERT_TRUE(post(*qp, w));
          if (round == 0) {
            ASSERT_EQ(1, wait_readable(channel->fd, scaled(kOpTimeout))) << "no event for the send completion";
            ASSERT_TRUE(get_and_ack(channel.get(), scq.get(), &marker));
          }
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(scq.get(), &wc));
          EXPECT_TRUE(check_wc(wc, {.wr_id = static_cast<uint64_t>(round), .opcode = IBV_WC_SEND, .qp_num = qp->qpn()}));
        }
        ASSERT_TRUE(p.peer().wait("done"));
        qp.reset();
        EXPECT_EQ(0, ibv_destroy_cq(scq.release())) << "destroying an acked CQ";
        EXPECT_EQ(0, ibv_destroy_comp_channel(channel.release()));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        ChannelPtr channel = make_channel(ep->ctx.get());
        ASSERT_NE(nullptr, channel);
        int marker = 0;
        CqPtr rcq = create_cq(ep->ctx.get(), 64, channel.get(), &marker);
        ASSERT_NE(nullptr, rcq);
        auto qp = TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, QpConfig{}, nullptr, rcq.get());
        ASSERT_NE(nullptr, qp);
        ASSERT_TRUE(connect_over(p.peer(), {qp.get()}));
        auto buf = Region::create(ep->pd.get(), 3 * 4096);
        ASSERT_NE(nullptr, buf);

        // Round 0: armed; a second thread sits in poll() until the SEND lands.
        ASSERT_EQ(0, ibv_req_notify_cq(rcq.get(), 0));
        ASSERT_TRUE(post_recv(*qp, 0, {buf->sge(0, 4096)}));
        std::atomic<int> poll_result{-2};
        std::thread waiter([&] { poll_result = wait_readable(channel->fd, scaled(kOpTimeout)); });
        ::usleep(20'000);  // let it block
        ASSERT_TRUE(p.peer().signal("armed"));
        waiter.join();
        ASSERT_EQ(1, poll_result.load()) << "the blocked poll() did not wake for the SEND";
        ASSERT_TRUE(get_and_ack(channel.get(), rcq.get(), &marker));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(rcq.get(), &wc, Millis(1000), "right after the event"));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 0, .opcode = IBV_WC_RECV, .byte_len = 4096, .qp_num = qp->qpn()}));
        EXPECT_TRUE(expect_pattern(buf->data(), 4096, 0xE7, "SEND data"));

        // Round 1: not re-armed — the completion arrives, no event does.
        ASSERT_TRUE(post_recv(*qp, 1, {buf->sge(4096, 4096)}));
        ASSERT_TRUE(p.peer().signal("armed"));
        ASSERT_TRUE(poll_one(rcq.get(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 1, .opcode = IBV_WC_RECV, .byte_len = 4096, .qp_num = qp->qpn()}));
        EXPECT_EQ(0, wait_readable(channel->fd, Millis(200))) << "an event without ibv_req_notify_cq (one-shot)";

        // Round 2: re-armed — an event again.
        ASSERT_EQ(0, ibv_req_notify_cq(rcq.get(), 0));
        ASSERT_TRUE(post_recv(*qp, 2, {buf->sge(8192, 4096)}));
        ASSERT_TRUE(p.peer().signal("armed"));
        ASSERT_EQ(1, wait_readable(channel->fd, scaled(kOpTimeout))) << "no event after re-arming";
        ASSERT_TRUE(get_and_ack(channel.get(), rcq.get(), &marker));
        ASSERT_TRUE(poll_one(rcq.get(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 2, .opcode = IBV_WC_RECV, .byte_len = 4096, .qp_num = qp->qpn()}));
        ASSERT_TRUE(p.peer().signal("done"));
        qp.reset();
        EXPECT_EQ(0, ibv_destroy_cq(rcq.release())) << "destroying an acked CQ";
        EXPECT_EQ(0, ibv_destroy_comp_channel(channel.release()));
      });
}

// Armed solicited-only: an unsolicited SEND and an unsolicited WRITE_WITH_IMM
// complete without an event; a SEND with IBV_SEND_SOLICITED raises one, and
// after re-arming so does a WRITE_WITH_IMM with IBV_SEND_SOLICITED.
TEST(Events, SolicitedOnlyArming) {
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 256);
        ASSERT_NE(nullptr, buf);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        Wr msgs[] = {wr_send(0, {buf->sge(0, 64)}), wr_write_imm(1, {buf->sge(0, 64)}, remote, 0x51),
                     wr_send(2, {buf->sge(0, 64)}, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED),
                     wr_write_imm(3, {buf->sge(0, 64)}, remote, 0x53, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED)};
        for (Wr& w : msgs) {
          ASSERT_TRUE(p.peer().wait("go"));
          ASSERT_TRUE(run_wr(ep->qp(), w));
          ASSERT_TRUE(p.peer().signal("sent"));
        }
        ASSERT_TRUE(p.peer().wait("done"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        ChannelPtr channel = make_channel(ep->ctx.get());
        ASSERT_NE(nullptr, channel);
        CqPtr rcq = create_cq(ep->ctx.get(), 64, channel.get(), nullptr);
        ASSERT_NE(nullptr, rcq);
        auto qp = TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, QpConfig{}, nullptr, rcq.get());
        ASSERT_NE(nullptr, qp);
        ASSERT_TRUE(connect_over(p.peer(), {qp.get()}));
        auto buf = Region::create(ep->pd.get(), 4 * 64);
        ASSERT_NE(nullptr, buf);
        ASSERT_TRUE(p.peer().send(buf->remote()));
        for (int i = 0; i < 4; ++i) {
          ASSERT_TRUE(post_recv(*qp, i, {buf->sge(i * 64, 64)}));
        }
        ASSERT_EQ(0, ibv_req_notify_cq(rcq.get(), 1));
        const char* names[] = {"unsolicited SEND", "unsolicited WRITE_WITH_IMM", "solicited SEND",
                               "solicited WRITE_WITH_IMM"};
        for (int i = 0; i < 4; ++i) {
          SCOPED_TRACE(names[i]);
          ASSERT_TRUE(p.peer().signal("go"));
          ASSERT_TRUE(p.peer().wait("sent"));
          if (i < 2) {
            ibv_wc wc{};
            ASSERT_TRUE(poll_one(rcq.get(), &wc));  // polling does not disarm
            EXPECT_TRUE(check_wc(wc, {.wr_id = static_cast<uint64_t>(i), .qp_num = qp->qpn()}));
            EXPECT_EQ(0, wait_readable(channel->fd, Millis(300))) << "event for an unsolicited completion";
          } else {
            ASSERT_EQ(1, wait_readable(channel->fd, scaled(kOpTimeout))) << "no event for a solicited message";
            ASSERT_TRUE(get_and_ack(channel.get(), rcq.get(), nullptr));
            ibv_wc wc{};
            ASSERT_TRUE(poll_one(rcq.get(), &wc));
            EXPECT_TRUE(check_wc(wc, {.wr_id = static_cast<uint64_t>(i), .qp_num = qp->qpn()}));
            if (i == 2) {
              ASSERT_EQ(0, ibv_req_notify_cq(rcq.get(), 1));
            }
          }
        }
        ASSERT_TRUE(p.peer().signal("done"));
        qp.reset();
      });
}

// Error completions are solicited (ibv_req_notify_cq(3)): moving an armed QP
// to Error flushes its receive and raises an event.
TEST(Events, SolicitedOnlyWakesOnErrorCompletion) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ChannelPtr channel = make_channel(ep->ctx.get());
    ASSERT_NE(nullptr, channel);
    CqPtr rcq = create_cq(ep->ctx.get(), 16, channel.get(), nullptr);
    ASSERT_NE(nullptr, rcq);
    auto a = TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, QpConfig{}, nullptr, rcq.get());
    auto b = TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, QpConfig{});
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(connect_local(*a, *b));
    auto buf = Region::create(ep->pd.get(), 64);
    ASSERT_NE(nullptr, buf);
    ASSERT_TRUE(post_recv(*a, 42, {buf->sge(0, 64)}));
    ASSERT_EQ(0, ibv_req_notify_cq(rcq.get(), 1));
    EXPECT_EQ(0, wait_readable(channel->fd, Millis(50)));
    ASSERT_TRUE(a->to_state(IBV_QPS_ERR));
    ASSERT_EQ(1, wait_readable(channel->fd, scaled(kOpTimeout))) << "no event for a flush completion";
    ASSERT_TRUE(get_and_ack(channel.get(), rcq.get(), nullptr));
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(rcq.get(), &wc));
    EXPECT_TRUE(check_wc(wc, {.wr_id = 42, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = a->qpn()}));
    a.reset();
  });
}

// ibv_destroy_comp_channel fails (EBUSY) while a CQ uses the channel
// (ibv_create_comp_channel(3)); a non-blocking channel fd returns -1 from
// ibv_get_cq_event when there is no event; after the CQ is gone the channel
// is destroyed.
TEST(Events, ChannelLifetime) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ChannelPtr channel = make_channel(ep->ctx.get());
    ASSERT_NE(nullptr, channel);
    CqPtr cq = create_cq(ep->ctx.get(), 16, channel.get(), nullptr);
    ASSERT_NE(nullptr, cq);
    EXPECT_EQ(EBUSY, ibv_destroy_comp_channel(channel.get())) << "destroying a channel a CQ still uses";
    const int flags = ::fcntl(channel->fd, F_GETFL);
    ASSERT_EQ(0, ::fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK));
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    EXPECT_EQ(-1, ibv_get_cq_event(channel.get(), &ev_cq, &ev_ctx)) << "an event out of nowhere";
    EXPECT_EQ(0, ibv_destroy_cq(cq.release()));
    EXPECT_EQ(0, ibv_destroy_comp_channel(channel.release()));
  });
}

// Regression (issue 18, Open MPI's MPI_Finalize hung): ibv_destroy_cq(3)
// waits for the acknowledgement of the events that were fetched with
// ibv_get_cq_event, not of those still queued on the channel; those are
// dropped with the CQ, and the channel then delivers other CQs' events only.
TEST(Events, DestroyCqDoesNotWaitForUnfetchedEvents) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ChannelPtr channel = make_channel(ep->ctx.get());
    ASSERT_NE(nullptr, channel);
    CqPtr doomed = create_cq(ep->ctx.get(), 16, channel.get(), nullptr);
    int marker = 0;
    CqPtr other = create_cq(ep->ctx.get(), 16, channel.get(), &marker);
    ASSERT_TRUE(doomed && other);
    auto a = TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, QpConfig{}, nullptr, doomed.get());
    auto b = TestQp::create(ep->ctx.get(), ep->pd.get(), ep->port, QpConfig{}, nullptr, other.get());
    ASSERT_TRUE(a && b);
    // Three flush completions, each after arming: three events on the channel.
    auto buf = Region::create(ep->pd.get(), 64);
    ASSERT_NE(nullptr, buf);
    ASSERT_TRUE(a->to_init());
    for (uint64_t id = 1; id <= 3; ++id) {
      ASSERT_EQ(0, ibv_req_notify_cq(doomed.get(), 0));
      ASSERT_TRUE(post_recv(*a, id, {buf->sge(0, 64)}));
      if (id == 1) {
        ASSERT_TRUE(a->to_state(IBV_QPS_ERR));
      }
      ibv_wc wc{};
      ASSERT_TRUE(poll_one(doomed.get(), &wc));
    }
    // One fetched and acknowledged; two left in the channel.
    ASSERT_TRUE(get_and_ack(channel.get(), doomed.get(), nullptr));
    a.reset();
    const auto start = Clock::now();
    EXPECT_EQ(0, ibv_destroy_cq(doomed.release()));
    EXPECT_LT(ms_since(start), 5000.0) << "destroy waited for events never fetched";
    // The channel now carries the other CQ's event, not the destroyed CQ's.
    ASSERT_EQ(0, ibv_req_notify_cq(other.get(), 0));
    ASSERT_TRUE(b->to_init());
    ASSERT_TRUE(post_recv(*b, 9, {buf->sge(0, 64)}));
    ASSERT_TRUE(b->to_state(IBV_QPS_ERR));
    ASSERT_TRUE(get_and_ack(channel.get(), other.get(), &marker));
  });
}

// Regression (issue 18, qperf hung): a signal that interrupts
// ibv_get_cq_event makes it return -1 with errno EINTR, as rdma-core's does.
TEST(Events, GetCqEventReturnsEintrWhenInterrupted) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ChannelPtr channel = make_channel(ep->ctx.get());
    ASSERT_NE(nullptr, channel);
    CqPtr cq = create_cq(ep->ctx.get(), 16, channel.get(), nullptr);
    ASSERT_NE(nullptr, cq);
    struct sigaction on_alarm{};
    on_alarm.sa_handler = [](int) {};
    on_alarm.sa_flags = 0;  // no SA_RESTART: the read is interrupted
    ASSERT_EQ(0, sigaction(SIGALRM, &on_alarm, nullptr));
    itimerval in_50ms{};
    in_50ms.it_value.tv_usec = 50'000;
    ASSERT_EQ(0, setitimer(ITIMER_REAL, &in_50ms, nullptr));
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    errno = 0;
    EXPECT_EQ(-1, ibv_get_cq_event(channel.get(), &ev_cq, &ev_ctx));
    EXPECT_EQ(EINTR, errno) << errno_name(errno);
  });
}

// Regression (issue 18: "after an RC atomic to an invalid R_Key completes in
// error, closing the device contexts hangs"): the responder's QP raised an
// asynchronous event nobody fetched, and ibv_destroy_qp waited for its
// acknowledgement. ibv_destroy_qp(3) asks only for the acknowledgement of
// fetched events; an unfetched one is dropped with its QP.
TEST(Events, DestroyQpDoesNotWaitForUnfetchedAsyncEvents) {
  run_pair(
      "requester",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        ASSERT_TRUE(fail_with_bad_rkey(p, *ep, /*atomic=*/true));
        ASSERT_TRUE(p.peer().signal("failed"));
        ASSERT_TRUE(p.peer().wait("closed"));
      },
      "responder",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, buf);
        ASSERT_TRUE(p.peer().send(buf->remote()));
        ASSERT_TRUE(p.peer().wait("failed"));
        EXPECT_TRUE(ep->qp().wait_state(IBV_QPS_ERR));
        EXPECT_EQ(1, wait_readable(ep->ctx->async_fd, scaled(kOpTimeout))) << "no asynchronous event to leave unread";
        const auto start = Clock::now();
        EXPECT_EQ(0, ep->qp().destroy_undrained());  // its access error event is still unread
        EXPECT_LT(ms_since(start), 5000.0) << "destroying the QP waited for an event never fetched";
        ASSERT_TRUE(p.peer().signal("closed"));
      });
}

// With nothing pending, a non-blocking async_fd is not readable and
// ibv_get_async_event returns -1.
TEST(Events, AsyncFdNonBlockingWhenIdle) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    const int flags = ::fcntl(ep->ctx->async_fd, F_GETFL);
    ASSERT_EQ(0, ::fcntl(ep->ctx->async_fd, F_SETFL, flags | O_NONBLOCK));
    EXPECT_EQ(0, wait_readable(ep->ctx->async_fd, Millis(50)));
    ibv_async_event ev{};
    EXPECT_EQ(-1, ibv_get_async_event(ep->ctx.get(), &ev));
  });
}

// A remote access violation at the responder moves its QP to Error and
// raises an affiliated asynchronous event for that QP (IBA 11.6.3: "Local
// Access Violation Work Queue Error", IBV_EVENT_QP_ACCESS_ERR; rxe reports
// IBV_EVENT_QP_FATAL). The event names the QP; after it is acked the QP can be
// destroyed.
TEST(Events, AsyncEventOnRemoteAccessError) {
  run_pair(
      "requester",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        ASSERT_TRUE(fail_with_bad_rkey(p, *ep, /*atomic=*/false));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "responder",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, buf);
        ASSERT_TRUE(p.peer().send(buf->remote()));
        const Deadline deadline(scaled(kOpTimeout));
        bool seen = false;
        while (!seen) {
          ASSERT_EQ(1, wait_readable(ep->ctx->async_fd, Millis(deadline.poll_ms())))
              << "no asynchronous event after the remote access error";
          ibv_async_event ev{};
          ASSERT_EQ(0, ibv_get_async_event(ep->ctx.get(), &ev));
          const bool qp_error = ev.event_type == IBV_EVENT_QP_ACCESS_ERR || ev.event_type == IBV_EVENT_QP_FATAL ||
                                ev.event_type == IBV_EVENT_QP_REQ_ERR;
          if (qp_error) {
            note("async event %d for QP %p", static_cast<int>(ev.event_type), static_cast<void*>(ev.element.qp));
            EXPECT_EQ(ep->qp().get(), ev.element.qp) << "async event names the wrong QP";
            EXPECT_EQ(ep->qp().get(), static_cast<ibv_qp*>(ev.element.qp));
            seen = true;
          } else {
            note("ignoring async event %d", static_cast<int>(ev.event_type));
          }
          ibv_ack_async_event(&ev);
        }
        EXPECT_TRUE(ep->qp().wait_state(IBV_QPS_ERR));
        EXPECT_TRUE(expect_fill(buf->data(), 64, kGuardByte, "target memory"));
        ep->qps.clear();  // destroy after the ack: must not block
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

}  // namespace
}  // namespace softverbs::integration
