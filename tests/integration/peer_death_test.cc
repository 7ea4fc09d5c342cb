// A peer killed with SIGKILL while work is outstanding. The survivor's work
// completes in error (RETRY_EXC_ERR first, the rest flushed) within a bound
// derived from its local ACK timeout and retry_cnt; afterwards new processes
// open the device and run normally (the dead process's state was reclaimed).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr uint8_t kTimeout = 12;  // 16.8 ms local ACK timeout
constexpr uint8_t kRetryCnt = 3;

QpConfig survivor_config() {
  QpConfig cfg;
  cfg.timeout = kTimeout;
  cfg.retry_cnt = kRetryCnt;
  cfg.rnr_retry = 7;
  return cfg;
}

// Longest acceptable time from the peer's death to the survivor's error:
// (retry_cnt + 1) timeouts of up to 4x the nominal value, plus slack for
// noticing and for the sanitizers.
double error_bound_ms() {
  return 4.0 * (kRetryCnt + 1) * ack_timeout_us(kTimeout) / 1000.0 +
         static_cast<double>(scaled(Millis(2000)).count());
}

// Polls `n` completions of WRs posted before or after the death, expecting
// none to succeed after the first error: the first error is RETRY_EXC_ERR, the
// later ones RETRY_EXC_ERR or WR_FLUSH_ERR.
void expect_failed_after_death(TestQp& qp, size_t n, Clock::time_point death) {
  std::vector<ibv_wc> wcs;
  ASSERT_TRUE(poll_n(qp.send_cq(), n, &wcs, Millis(static_cast<int64_t>(error_bound_ms()) + 1000),
                     "of the survivor after its peer died"));
  const double elapsed = ms_since(death);
  note("survivor's %zu WRs failed %.1f ms after the peer died (bound %.0f ms)", n, elapsed, error_bound_ms());
  EXPECT_LE(elapsed, error_bound_ms());
  bool failed = false;
  for (const ibv_wc& wc : wcs) {
    if (!failed) {
      if (wc.status == IBV_WC_SUCCESS) continue;  // finished before the death
      EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, wc.status) << "first error after the peer died: " << describe(wc);
      failed = true;
    } else {
      EXPECT_TRUE(wc.status == IBV_WC_WR_FLUSH_ERR || wc.status == IBV_WC_RETRY_EXC_ERR) << describe(wc);
    }
    EXPECT_EQ(qp.qpn(), wc.qp_num);
  }
  EXPECT_TRUE(failed) << "no WR failed although the peer is dead";
  EXPECT_TRUE(qp.wait_state(IBV_QPS_ERR));
}

// Two fresh processes open the device and do every kind of operation.
void run_healthy_pair() {
  SCOPED_TRACE("fresh processes after a peer death");
  run_pair(
      "fresh requester",
      [](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        auto buf = Region::create(ep->pd.get(), 3 * 65536);
        ASSERT_NE(nullptr, buf);
        fill_pattern(buf->data(), 65536, 0xF5E5);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        ASSERT_TRUE(p.peer().wait("posted"));
        Wr send = wr_send(1, {buf->sge(0, 65536)});
        ASSERT_TRUE(run_wr(qp, send));
        Wr write = wr_write(2, {buf->sge(0, 65536)}, remote.at(65536));
        ASSERT_TRUE(run_wr(qp, write));
        Wr read = wr_read(3, {buf->sge(65536, 65536)}, remote.at(65536));
        ASSERT_TRUE(run_wr(qp, read));
        EXPECT_TRUE(expect_pattern(buf->data() + 65536, 65536, 0xF5E5, "READ"));
        Wr faa = wr_faa(4, buf->sge(131072, 8), remote.at(131072), 9);
        ASSERT_TRUE(run_wr(qp, faa));
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "fresh responder",
      [](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 3 * 65536);
        ASSERT_NE(nullptr, buf);
        std::memset(buf->data() + 131072, 0, 8);
        ASSERT_TRUE(p.peer().send(buf->remote()));
        ASSERT_TRUE(post_recv(ep->qp(), 7, {buf->sge(0, 65536)}));
        ASSERT_TRUE(p.peer().signal("posted"));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp().recv_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 7, .opcode = IBV_WC_RECV, .byte_len = 65536, .qp_num = ep->qp().qpn()}));
        ASSERT_TRUE(p.peer().wait("done"));
        EXPECT_TRUE(expect_pattern(buf->data(), 65536, 0xF5E5, "SEND"));
        EXPECT_TRUE(expect_pattern(buf->data() + 65536, 65536, 0xF5E5, "WRITE"));
        uint64_t word = 0;
        std::memcpy(&word, buf->data() + 131072, 8);
        EXPECT_EQ(9u, word);
      });
}

// The victim has SENDs outstanding (the survivor posts no receive) and
// receives posted; the survivor has SENDs stuck in RNR retry (the victim
// posts no receive) with a WRITE and a READ queued behind them. Then the
// victim is SIGKILLed.
TEST(PeerDeath, OutstandingWorkFailsWithinBound) {
  std::vector<ProcSpec> procs;
  procs.push_back({"survivor", [](Proc& p) {
                     auto ep = connected_endpoint(p.peer(), survivor_config());
                     ASSERT_NE(nullptr, ep);
                     TestQp& qp = ep->qp();
                     auto buf = Region::create(ep->pd.get(), 4 * 65536);
                     ASSERT_NE(nullptr, buf);
                     RemoteBuf remote;
                     ASSERT_TRUE(p.peer().recv(&remote));
                     ASSERT_TRUE(p.peer().wait("victim posted"));
                     Wr s1 = wr_send(1, {buf->sge(0, 4096)});
                     Wr s2 = wr_send(2, {buf->sge(4096, 4096)});
                     Wr write = wr_write(3, {buf->sge(0, 65536)}, remote);
                     Wr read = wr_read(4, {buf->sge(65536, 65536)}, remote);
                     ASSERT_TRUE(post(qp, {&s1, &s2, &write, &read}));
                     ::usleep(50'000);  // the SENDs are now in RNR retry
                     ASSERT_TRUE(p.peer().signal("survivor posted"));
                     ASSERT_TRUE(p.peer().wait_closed(Deadline::op()));
                     const auto death = Clock::now();
                     // A receive posted now is flushed once the QP fails.
                     ASSERT_TRUE(post_recv(qp, 900, {buf->sge(131072, 4096)}));
                     expect_failed_after_death(qp, 4, death);
                     ibv_wc wc{};
                     ASSERT_TRUE(poll_one(qp.recv_cq(), &wc));
                     EXPECT_TRUE(check_wc(wc, {.wr_id = 900, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = qp.qpn()}));
                     EXPECT_TRUE(expect_flushes_new_work(qp, buf->sge(0, 64), buf->sge(4096, 64)));
                   }});
  procs.push_back({"victim",
                   [](Proc& p) {
                     auto ep = connected_endpoint(p.peer());
                     ASSERT_NE(nullptr, ep);
                     auto buf = Region::create(ep->pd.get(), 65536);
                     ASSERT_NE(nullptr, buf);
                     ASSERT_TRUE(p.peer().send(buf->remote()));
                     Wr a = wr_send(1, {buf->sge(0, 1024)});
                     Wr b = wr_send(2, {buf->sge(1024, 1024)});
                     ASSERT_TRUE(post(ep->qp(), {&a, &b}));
                     ASSERT_TRUE(p.peer().signal("victim posted"));
                     ASSERT_TRUE(p.peer().wait("survivor posted"));
                     ::raise(SIGKILL);
                   },
                   /*expect_sigkill=*/true});
  run_procs(std::move(procs));
  run_healthy_pair();
}

// The victim streams WRITEs and SENDs at the survivor, which READs from it at
// the same time; the survivor kills it mid-stream (inside whatever verbs call
// it is in). The survivor's last READ fails within the bound.
TEST(PeerDeath, KilledMidTraffic) {
  std::vector<ProcSpec> procs;
  procs.push_back({"survivor", [](Proc& p) {
                     auto ep = connected_endpoint(p.peer(), survivor_config());
                     ASSERT_NE(nullptr, ep);
                     TestQp& qp = ep->qp();
                     auto buf = Region::create(ep->pd.get(), 1 * kMiB);
                     ASSERT_NE(nullptr, buf);
                     RemoteBuf remote;
                     ASSERT_TRUE(exchange(p.peer(), buf->remote(), &remote));
                     pid_t victim = 0;
                     ASSERT_TRUE(p.peer().recv(&victim));
                     constexpr int kRecvs = 16;
                     for (int i = 0; i < kRecvs; ++i) {
                       ASSERT_TRUE(post_recv(qp, i, {buf->sge(512 * kKiB + i * 4096, 4096)}));
                     }
                     ASSERT_TRUE(p.peer().signal("go"));
                     int received = 0;
                     int reads = 0;
                     const Deadline deadline(scaled(Millis(15'000)));
                     while (received < 20 || reads < 5) {
                       ASSERT_FALSE(deadline.expired()) << "traffic too slow: " << received << " messages, " << reads << " READs";
                       Wr read = wr_read(1000 + reads, {buf->sge(256 * kKiB, 65536)}, remote);
                       ASSERT_TRUE(run_wr(qp, read));
                       ++reads;
                       ibv_wc wc[16];
                       const int n = ibv_poll_cq(qp.recv_cq(), 16, wc);
                       ASSERT_GE(n, 0);
                       for (int i = 0; i < n; ++i) {
                         ASSERT_EQ(IBV_WC_SUCCESS, wc[i].status) << describe(wc[i]);
                         ASSERT_TRUE(post_recv(qp, wc[i].wr_id, {buf->sge(512 * kKiB + wc[i].wr_id * 4096, 4096)}));
                         ++received;
                       }
                     }
                     ASSERT_EQ(0, ::kill(victim, SIGKILL));
                     ASSERT_TRUE(p.peer().wait_closed(Deadline::op()));
                     const auto death = Clock::now();
                     Wr read = wr_read(2000, {buf->sge(256 * kKiB, 65536)}, remote);
                     ASSERT_TRUE(post(qp, read));
                     expect_failed_after_death(qp, 1, death);
                   }});
  procs.push_back({"victim",
                   [](Proc& p) {
                     auto ep = connected_endpoint(p.peer());
                     ASSERT_NE(nullptr, ep);
                     TestQp& qp = ep->qp();
                     auto buf = Region::create(ep->pd.get(), 1 * kMiB);
                     ASSERT_NE(nullptr, buf);
                     fill_pattern(buf->data(), buf->size(), 0xDEAD);
                     RemoteBuf remote;
                     ASSERT_TRUE(exchange(p.peer(), buf->remote(), &remote));
                     const pid_t self = ::getpid();
                     ASSERT_TRUE(p.peer().send(self));
                     ASSERT_TRUE(p.peer().wait("go"));
                     // Until killed: a WRITE and a SEND at a time.
                     const Deadline deadline(scaled(Millis(25'000)));
                     for (uint64_t i = 0; !deadline.expired(); ++i) {
                       Wr write = wr_write(2 * i, {buf->sge(0, 65536)}, remote.at((i % 4) * 65536));
                       Wr send = wr_send(2 * i + 1, {buf->sge(0, 4096)});
                       ASSERT_TRUE(post(qp, {&write, &send}));
                       std::vector<ibv_wc> wcs;
                       ASSERT_TRUE(poll_n(qp.send_cq(), 2, &wcs));
                     }
                     ADD_FAILURE() << "the survivor never killed us";
                   },
                   /*expect_sigkill=*/true});
  run_procs(std::move(procs));
  run_healthy_pair();
}

// Three victims in turn create many objects (QPs in every state, MRs, CQs, a
// completion channel) and die with them; then fresh processes still get
// QPs and MRs and run normally.
TEST(PeerDeath, DeviceUsableAfterRepeatedDeaths) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("victim round " + std::to_string(round));
    std::vector<ProcSpec> procs;
    procs.push_back({"hoarder",
                     [](Proc&) {
                       auto ep = Endpoint::open();
                       ASSERT_NE(nullptr, ep);
                       ChannelPtr channel(ibv_create_comp_channel(ep->ctx.get()));
                       ASSERT_NE(nullptr, channel);
                       CqPtr cq = create_cq(ep->ctx.get(), 256, channel.get());
                       ASSERT_NE(nullptr, cq);
                       ASSERT_EQ(0, ibv_req_notify_cq(cq.get(), 0));
                       std::vector<std::unique_ptr<Region>> mrs;
                       for (int i = 0; i < 16; ++i) {
                         mrs.push_back(Region::create(ep->pd.get(), 65536));
                         ASSERT_NE(nullptr, mrs.back());
                       }
                       const int qps = std::min(16, std::max(2, ep->dev.max_qp / 8));
                       for (int i = 0; i < qps; ++i) {
                         TestQp* qp = ep->add_qp(QpConfig{}, cq.get(), cq.get());
                         ASSERT_NE(nullptr, qp);
                         if (i % 2 == 1) {
                           ASSERT_TRUE(connect_local(ep->qp(i - 1), *qp));
                         }
                       }
                       // Receives on every connected QP (an odd last one stays in RESET).
                       for (int i = 0; i < qps - qps % 2; ++i) {
                         ASSERT_TRUE(post_recv(ep->qp(i), i, {mrs[i % 16]->sge(0, 4096)}));
                       }
                       // Loopback traffic in flight when we die.
                       for (int i = 0; i + 1 < qps; i += 2) {
                         Wr w = wr_write(i, {mrs[0]->sge(0, 65536)}, mrs[1]->remote());
                         ASSERT_TRUE(post(ep->qp(i), w));
                       }
                       ::raise(SIGKILL);
                     },
                     /*expect_sigkill=*/true});
    run_procs(std::move(procs));
  }
  run_solo("fresh", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    std::vector<std::unique_ptr<Region>> mrs;
    for (int i = 0; i < 16; ++i) {
      mrs.push_back(Region::create(ep->pd.get(), 65536));
      ASSERT_NE(nullptr, mrs.back());
    }
    const int qps = std::min(32, std::max(2, ep->dev.max_qp / 4));
    for (int i = 0; i < qps; ++i) {
      ASSERT_NE(nullptr, ep->add_qp(QpConfig{})) << "QP " << i << " after the deaths";
    }
  });
  run_healthy_pair();
}

}  // namespace
}  // namespace softverbs::integration
