// RC error behaviour. For each error: the completion status, the QP state
// afterwards (ibv_query_qp), and that work posted afterwards — and work queued
// behind the failing WR — completes with IBV_WC_WR_FLUSH_ERR. Each variant
// gets its own QP pair, since an error ends a connection.
//
// Statuses (IBA 9.9 requester/responder error classes, 10.8.3 completion
// status; rxe and mlx5 behave the same unless noted):
//   receive buffer too small     requester REM_INV_REQ_ERR, responder LOC_LEN_ERR
//   bad local L_Key / range      requester LOC_PROT_ERR
//   bad receive-SGE L_Key        responder LOC_PROT_ERR, requester REM_OP_ERR
//   R_Key / access / range       requester REM_ACCESS_ERR, responder QP -> Error
//   misaligned atomic            requester REM_INV_REQ_ERR (NAK Invalid Request)
//   RNR NAKs beyond rnr_retry    requester RNR_RETRY_EXC_ERR
//   no response beyond retry_cnt requester RETRY_EXC_ERR
#include <gtest/gtest.h>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

// After `qp` reported an error: it is (or soon is) in Error and flushes new work.
bool expect_error_state_and_flush(TestQp& qp, Region& scratch) {
  const bool state_ok = qp.wait_state(IBV_QPS_ERR);
  return expect_flushes_new_work(qp, scratch.sge(0, 16), scratch.sge(64, 16)) && state_ok;
}

// The responder side of a connection its peer broke: in Error, its posted
// receive (wr_id `recv_id`) flushed.
bool expect_responder_flushed(TestQp& qp, uint64_t recv_id) {
  // The requester already saw its error completion: the responder is done.
  if (!qp.wait_state(IBV_QPS_ERR, scaled(Millis(2000)))) return false;
  ibv_wc wc{};
  if (!poll_one(qp.recv_cq(), &wc, scaled(kOpTimeout), "for the responder's flushed receive")) return false;
  return check_wc(wc, {.wr_id = recv_id, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = qp.qpn()});
}

// A SEND longer than the posted receive: the responder's receive completes
// with LOC_LEN_ERR, the requester's SEND with REM_INV_REQ_ERR (NAK Invalid
// Request), both QPs go to Error; the next posted receive at the responder and
// everything posted afterwards at the requester are flushed.
TEST(RcErrors, ReceiveBufferTooSmall) {
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        ASSERT_TRUE(post_recv(qp, 77, {buf->sge(2048, 64)}));  // flushed later
        ASSERT_TRUE(p.peer().wait("posted"));
        Wr w = wr_send(1, {buf->sge(0, 200)});
        ASSERT_TRUE(run_wr_expect(qp, w, IBV_WC_REM_INV_REQ_ERR));
        ASSERT_TRUE(qp.wait_state(IBV_QPS_ERR));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(qp.recv_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 77, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = qp.qpn()}));
        EXPECT_TRUE(expect_flushes_new_work(qp, buf->sge(0, 16), buf->sge(64, 16)));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        ASSERT_TRUE(post_recv(qp, 10, {buf->sge(0, 100)}));
        ASSERT_TRUE(post_recv(qp, 11, {buf->sge(1024, 1024)}));
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qp.recv_cq(), 2, &wcs));
        EXPECT_TRUE(check_wc(wcs[0], {.wr_id = 10, .status = IBV_WC_LOC_LEN_ERR, .qp_num = qp.qpn()}));
        EXPECT_TRUE(check_wc(wcs[1], {.wr_id = 11, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = qp.qpn()}));
        EXPECT_TRUE(qp.wait_state(IBV_QPS_ERR));
        EXPECT_TRUE(expect_fill(buf->data() + 1024, 1024, kGuardByte, "the flushed receive's buffer"));
        EXPECT_TRUE(expect_flushes_new_work(qp, buf->sge(0, 16), buf->sge(64, 16)));
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// Local protection errors at the requester: the failing WR completes with
// LOC_PROT_ERR and the WRs queued behind it with WR_FLUSH_ERR; the responder
// sees nothing (its receive stays posted, its QP stays in RTS).
TEST(RcErrors, LocalProtection) {
  enum Variant { kBadLkey, kPastMrEnd, kReadIntoReadOnlyMr, kLkeyOfOtherPd, kCount };
  const char* const names[] = {"SEND with an invalid L_Key", "SEND past the end of its MR",
                               "READ into an MR without LOCAL_WRITE", "SEND with an L_Key of another PD"};
  run_pair(
      "requester",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kCount);
        ASSERT_NE(nullptr, ep);
        PdPtr other_pd(ibv_alloc_pd(ep->ctx.get()));
        ASSERT_NE(nullptr, other_pd);
        auto buf = Region::create(ep->pd.get(), 4096);
        auto readonly = Region::create(ep->pd.get(), 4096, 0);
        auto foreign = Region::create(other_pd.get(), 4096);
        auto scratch = Region::create(ep->pd.get(), 4096);
        ASSERT_TRUE(buf && readonly && foreign && scratch);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        ASSERT_TRUE(p.peer().wait("posted"));
        for (int v = 0; v < kCount; ++v) {
          SCOPED_TRACE(names[v]);
          TestQp& qp = ep->qp(v);
          Wr bad;
          switch (v) {
            case kBadLkey: {
              ibv_sge sge = buf->sge(0, 64);
              sge.lkey ^= 0x5A5A5A00;
              bad = wr_send(1, {sge});
              break;
            }
            case kPastMrEnd: bad = wr_send(1, {buf->sge(4000, 200)}); break;
            case kReadIntoReadOnlyMr: bad = wr_read(1, {readonly->sge(0, 64)}, remote); break;
            default: bad = wr_send(1, {foreign->sge(0, 64)}); break;
          }
          // Two valid WRs queued behind the failing one.
          Wr next1 = wr_send(2, {buf->sge(0, 64)});
          Wr next2 = wr_write(3, {buf->sge(0, 64)}, remote);
          ASSERT_TRUE(post(qp, {&bad, &next1, &next2}));
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(qp.send_cq(), 3, &wcs));
          EXPECT_TRUE(check_wc(wcs[0], {.wr_id = 1, .status = IBV_WC_LOC_PROT_ERR, .qp_num = qp.qpn()}));
          EXPECT_TRUE(check_wc(wcs[1], {.wr_id = 2, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = qp.qpn()}));
          EXPECT_TRUE(check_wc(wcs[2], {.wr_id = 3, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = qp.qpn()}));
          EXPECT_TRUE(expect_error_state_and_flush(qp, *scratch));
          EXPECT_TRUE(expect_fill(readonly->data(), 4096, kGuardByte, "the read-only MR"));
        }
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "responder",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kCount);
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 4096 * kCount);
        ASSERT_NE(nullptr, buf);
        fill_pattern(buf->data(), 4096, 0xE0);
        ASSERT_TRUE(p.peer().send(buf->remote()));
        for (int v = 0; v < kCount; ++v) {
          ASSERT_TRUE(post_recv(ep->qp(v), 100 + v, {buf->sge(4096 * (v + 1) - 256, 256)}));
        }
        ASSERT_TRUE(p.peer().signal("posted"));
        ASSERT_TRUE(p.peer().wait("done"));
        for (int v = 0; v < kCount; ++v) {
          SCOPED_TRACE(names[v]);
          EXPECT_TRUE(expect_no_completion(ep->qp(v).recv_cq(), Millis(20), "at the responder"));
          EXPECT_EQ(IBV_QPS_RTS, ep->qp(v).state());
        }
        EXPECT_TRUE(expect_pattern(buf->data(), 4096, 0xE0, "responder memory"));
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// An invalid L_Key in the responder's receive SGE: the receive completes with
// LOC_PROT_ERR and the SEND with REM_OP_ERR (NAK Remote Operational Error).
// rxe reports LOC_QP_OP_ERR on the receive instead; mlx5 follows the spec.
TEST(RcErrors, ReceiveSgeProtection) {
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        ASSERT_TRUE(p.peer().wait("posted"));
        Wr w = wr_send(1, {buf->sge(0, 64)});
        ASSERT_TRUE(run_wr_expect(ep->qp(), w, IBV_WC_REM_OP_ERR));
        EXPECT_TRUE(expect_error_state_and_flush(ep->qp(), *buf));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        ibv_sge sge = buf->sge(0, 256);
        sge.lkey ^= 0x5A5A5A00;
        // Posting may already reject the key; then there is nothing more to see.
        ibv_recv_wr wr{};
        wr.wr_id = 5;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        const int rc = ibv_post_recv(ep->qp().get(), &wr, &bad);
        ASSERT_EQ(0, rc) << "ibv_post_recv with an invalid L_Key: " << errno_name(rc)
                         << " (the L_Key is checked when the message arrives, IBA 10.8.3)";
        ASSERT_TRUE(p.peer().signal("posted"));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp().recv_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 5, .status = IBV_WC_LOC_PROT_ERR, .qp_num = ep->qp().qpn()}));
        EXPECT_TRUE(expect_error_state_and_flush(ep->qp(), *buf));
        EXPECT_TRUE(expect_fill(buf->data(), 256, kGuardByte, "the receive buffer"));
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// R_Key violations: the requester's WR completes with REM_ACCESS_ERR, both QPs
// go to Error (responder class C: NAK Remote Access Error, QP to Error), the
// responder's posted receive is flushed and its memory is not touched at all.
TEST(RcErrors, RemoteAccess) {
  struct Case {
    const char* name;
    ibv_wr_opcode op;
    int mr_access;
    int64_t offset;
    uint32_t len;
    bool bad_rkey = false;
    bool deregister = false;
    bool other_pd = false;
  };
  constexpr int kRw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  const std::vector<Case> cases = {
      {"WRITE with an invalid R_Key", IBV_WR_RDMA_WRITE, kAllAccess, 0, 64, true},
      {"WRITE to an MR without REMOTE_WRITE", IBV_WR_RDMA_WRITE,
       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 0, 64},
      {"READ from an MR without REMOTE_READ", IBV_WR_RDMA_READ,
       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 0, 64},
      {"FetchAdd on an MR without REMOTE_ATOMIC", IBV_WR_ATOMIC_FETCH_AND_ADD, kRw, 0, 8},
      {"CmpSwap on an MR without REMOTE_ATOMIC", IBV_WR_ATOMIC_CMP_AND_SWP, kRw, 0, 8},
      {"WRITE crossing the end of the MR", IBV_WR_RDMA_WRITE, kAllAccess, 4096 - 10, 100},
      {"READ starting before the MR", IBV_WR_RDMA_READ, kAllAccess, -8, 64},
      {"FetchAdd just past the end of the MR", IBV_WR_ATOMIC_FETCH_AND_ADD, kAllAccess, 4096, 8},
      {"WRITE with the R_Key of a deregistered MR", IBV_WR_RDMA_WRITE, kAllAccess, 0, 64, false, true},
      {"WRITE to an MR of another PD", IBV_WR_RDMA_WRITE, kAllAccess, 0, 64, false, false, true},
  };
  const int n = static_cast<int>(cases.size());
  run_pair(
      "requester",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, n);
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), 4096);
        auto scratch = Region::create(ep->pd.get(), 4096);
        ASSERT_TRUE(local && scratch);
        fill_pattern(local->data(), 4096, 0xACC);
        std::vector<RemoteBuf> targets;
        ASSERT_TRUE(exchange(p.peer(), std::vector<RemoteBuf>{}, &targets));
        ASSERT_EQ(cases.size(), targets.size());
        for (int i = 0; i < n; ++i) {
          SCOPED_TRACE(cases[i].name);
          const Case& c = cases[i];
          Wr w;
          switch (c.op) {
            case IBV_WR_RDMA_WRITE: w = wr_write(i, {local->sge(0, c.len)}, targets[i]); break;
            case IBV_WR_RDMA_READ: w = wr_read(i, {local->sge(1024, c.len)}, targets[i]); break;
            case IBV_WR_ATOMIC_FETCH_AND_ADD: w = wr_faa(i, local->sge(2048, 8), targets[i], 1); break;
            default: w = wr_cas(i, local->sge(2048, 8), targets[i], 0, 1); break;
          }
          EXPECT_TRUE(run_wr_expect(ep->qp(i), w, IBV_WC_REM_ACCESS_ERR));
          EXPECT_TRUE(expect_error_state_and_flush(ep->qp(i), *scratch));
        }
        EXPECT_TRUE(expect_pattern(local->data(), 1024, 0xACC, "local source"));
        EXPECT_TRUE(expect_pattern(local->data() + 1024, 1024, 0xACC, "local READ destination", 1024))
            << "a failed READ must not deliver data";
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "responder",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, n);
        ASSERT_NE(nullptr, ep);
        PdPtr other_pd(ibv_alloc_pd(ep->ctx.get()));
        ASSERT_NE(nullptr, other_pd);
        // Each case's MR is 4096 bytes in the middle of a larger buffer, so
        // out-of-range accesses would land in memory we can check.
        std::vector<std::unique_ptr<Region>> outer;  // registered, unused by the requester
        std::vector<std::unique_ptr<Region>> mrs;
        std::vector<RemoteBuf> targets;
        auto rbuf = Region::create(ep->pd.get(), 64 * n);
        ASSERT_NE(nullptr, rbuf);
        for (int i = 0; i < n; ++i) {
          const Case& c = cases[i];
          mrs.push_back(Region::create(c.other_pd ? other_pd.get() : ep->pd.get(), 4096, c.mr_access));
          ASSERT_NE(nullptr, mrs.back());
          RemoteBuf t = mrs.back()->remote();
          t.addr = static_cast<uint64_t>(static_cast<int64_t>(t.addr) + c.offset);
          if (c.bad_rkey) t.rkey ^= 0x5A5A5A00;
          if (c.deregister) {
            ASSERT_TRUE(mrs.back()->deregister());
          }
          targets.push_back(t);
          ASSERT_TRUE(post_recv(ep->qp(i), 500 + i, {rbuf->sge(64 * i, 64)}));
        }
        std::vector<RemoteBuf> unused;
        ASSERT_TRUE(exchange(p.peer(), targets, &unused));
        ASSERT_TRUE(p.peer().wait("done", Deadline(scaled(Millis(20'000)))));
        for (int i = 0; i < n; ++i) {
          SCOPED_TRACE(cases[i].name);
          EXPECT_TRUE(expect_responder_flushed(ep->qp(i), 500 + i));
          EXPECT_TRUE(expect_fill(mrs[i]->data(), 4096, kGuardByte, "target MR"));
        }
        EXPECT_TRUE(expect_fill(rbuf->data(), rbuf->size(), kGuardByte, "flushed receive buffers"));
        mrs.clear();
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// An atomic whose remote address is not 8-byte aligned: NAK Invalid Request,
// REM_INV_REQ_ERR at the requester (IBA 9.4.5: atomics address naturally
// aligned 64-bit words; rxe RESPST_ERR_MISALIGNED_ATOMIC); the target word is
// untouched.
TEST(RcErrors, MisalignedAtomic) {
  const std::vector<std::pair<ibv_wr_opcode, int>> cases = {
      {IBV_WR_ATOMIC_FETCH_AND_ADD, 4}, {IBV_WR_ATOMIC_CMP_AND_SWP, 1}, {IBV_WR_ATOMIC_FETCH_AND_ADD, 7}};
  const int n = static_cast<int>(cases.size());
  run_pair(
      "requester",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, n);
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), 64);
        auto scratch = Region::create(ep->pd.get(), 4096);
        ASSERT_TRUE(local && scratch);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        for (int i = 0; i < n; ++i) {
          SCOPED_TRACE("atomic at offset +" + std::to_string(cases[i].second));
          const RemoteBuf at = remote.at(64 + cases[i].second);
          Wr w = cases[i].first == IBV_WR_ATOMIC_FETCH_AND_ADD ? wr_faa(i, local->sge(0, 8), at, 1)
                                                               : wr_cas(i, local->sge(0, 8), at, 0, 1);
          EXPECT_TRUE(run_wr_expect(ep->qp(i), w, IBV_WC_REM_INV_REQ_ERR));
          EXPECT_TRUE(expect_error_state_and_flush(ep->qp(i), *scratch));
        }
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "responder",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, n);
        ASSERT_NE(nullptr, ep);
        auto words = Region::create(ep->pd.get(), 256);
        ASSERT_NE(nullptr, words);
        std::memset(words->data(), 0, 256);
        ASSERT_TRUE(p.peer().send(words->remote()));
        ASSERT_TRUE(p.peer().wait("done", Deadline(scaled(Millis(20'000)))));
        EXPECT_TRUE(expect_fill(words->data(), 256, 0, "target words"));
        for (int i = 0; i < n; ++i) {
          EXPECT_TRUE(ep->qp(i).wait_state(IBV_QPS_ERR, scaled(Millis(2000))))
              << "responder QP after NAK Invalid Request (class C: to Error)";
        }
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// SEND with no receive posted: the responder answers RNR NAKs carrying its
// min_rnr_timer; after rnr_retry retries the SEND completes with
// RNR_RETRY_EXC_ERR — no sooner than rnr_retry timer periods (the requester
// waits at least the timer before each retry, IBA 9.7.5.2.8), and within
// about rnr_retry + 1 of them. The responder is unaffected.
TEST(RcErrors, RnrRetryExceeded) {
  constexpr uint8_t kTimer = 22;  // 20.48 ms (IBA Table 45)
  constexpr int kVariants = 7;    // rnr_retry 0..6
  const double period_ms = rnr_timer_us(kTimer) / 1000.0;
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        for (int r = 0; r < kVariants; ++r) {
          QpConfig cfg;
          cfg.rnr_retry = static_cast<uint8_t>(r);
          ASSERT_TRUE(connect_qps(p.peer(), *ep, cfg));
        }
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        for (int r = 0; r < kVariants; ++r) {
          SCOPED_TRACE("rnr_retry " + std::to_string(r));
          TestQp& qp = ep->qp(r);
          Wr w = wr_send(r, {buf->sge(0, 64)});
          const auto start = Clock::now();
          ibv_wc wc{};
          ASSERT_TRUE(run_wr_expect(qp, w, IBV_WC_RNR_RETRY_EXC_ERR, scaled(Millis(10'000)), &wc));
          const double elapsed = ms_since(start);
          note("rnr_retry %d: RNR_RETRY_EXC_ERR after %.1f ms (timer %.2f ms)", r, elapsed, period_ms);
          EXPECT_GE(elapsed, 0.9 * r * period_ms) << "retried sooner than the RNR timer allows";
          EXPECT_LE(elapsed, 2.0 * (r + 1) * period_ms + static_cast<double>(scaled(Millis(500)).count()))
              << "far more than (rnr_retry + 1) RNR timer periods";
          EXPECT_TRUE(expect_error_state_and_flush(qp, *buf));
        }
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        QpConfig cfg;
        cfg.min_rnr_timer = kTimer;
        for (int r = 0; r < kVariants; ++r) {
          ASSERT_TRUE(connect_qps(p.peer(), *ep, cfg));
        }
        ASSERT_TRUE(p.peer().wait("done", Deadline(scaled(Millis(20'000)))));
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        for (int r = 0; r < kVariants; ++r) {
          SCOPED_TRACE("rnr_retry " + std::to_string(r));
          EXPECT_EQ(IBV_QPS_RTS, ep->qp(r).state()) << "RNR NAKs leave the responder alone";
          ASSERT_TRUE(post_recv(ep->qp(r), 1, {buf->sge(0, 4096)}));
          EXPECT_TRUE(expect_no_completion(ep->qp(r).recv_cq(), Millis(30), "(the requester gave up)"));
        }
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// rnr_retry = 7 retries for ever: the SEND completes once the receiver posts a
// receive 200 ms later, with the data intact.
TEST(RcErrors, RnrRetryInfiniteWaitsForReceive) {
  constexpr int kDelayMs = 200;
  QpConfig cfg;
  cfg.rnr_retry = 7;
  cfg.min_rnr_timer = 14;  // 1.28 ms
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 16384);
        ASSERT_NE(nullptr, buf);
        fill_pattern(buf->data(), 16384, 0x7777);
        const auto start = Clock::now();
        Wr w = wr_send(1, {buf->sge(0, 16384)});
        ASSERT_TRUE(post(ep->qp(), w));
        ASSERT_TRUE(p.peer().signal("sending"));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp().send_cq(), &wc, scaled(Millis(10'000))));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 1, .opcode = IBV_WC_SEND, .qp_num = ep->qp().qpn()}));
        EXPECT_GE(ms_since(start), 0.9 * kDelayMs) << "completed before any receive was posted";
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), 16384);
        ASSERT_NE(nullptr, buf);
        ASSERT_TRUE(p.peer().wait("sending"));
        ::usleep(kDelayMs * 1000);
        EXPECT_EQ(IBV_QPS_RTS, ep->qp().state());
        ASSERT_TRUE(post_recv(ep->qp(), 2, {buf->sge(0, 16384)}));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp().recv_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 2, .opcode = IBV_WC_RECV, .byte_len = 16384, .qp_num = ep->qp().qpn()}));
        EXPECT_TRUE(expect_pattern(buf->data(), 16384, 0x7777, "the delayed SEND"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// Nobody answers: the remote QP is still in INIT or RESET (incoming packets
// are silently dropped, IBA 10.3.1), was destroyed, or the path's DLID names
// no port. The requester retries retry_cnt times, each after the local ACK
// timeout (4.096 us * 2^timeout, IBA 9.7.6.1.3; an implementation may wait up
// to 4x), then completes with RETRY_EXC_ERR.
TEST(RcErrors, RetryExceeded) {
  struct Case {
    const char* name;
    uint8_t timeout;
    uint8_t retry_cnt;
  };
  const std::vector<Case> cases = {{"remote QP in INIT", 12, 2},
                                   {"remote QP in RESET", 10, 7},
                                   {"remote QP destroyed", 14, 1},
                                   {"DLID of no port", 12, 3}};
  enum { kInit, kReset, kDestroyed, kBadDlid };
  const int n = static_cast<int>(cases.size());
  run_pair(
      "requester",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        std::vector<QpInfo> mine;
        for (int i = 0; i < n; ++i) {
          QpConfig cfg;
          cfg.timeout = cases[i].timeout;
          cfg.retry_cnt = cases[i].retry_cnt;
          TestQp* qp = ep->add_qp(cfg);
          ASSERT_NE(nullptr, qp);
          mine.push_back(qp->info());
        }
        std::vector<QpInfo> theirs;
        ASSERT_TRUE(p.peer().send_vector(mine));
        ASSERT_TRUE(p.peer().recv_vector(&theirs));
        ASSERT_EQ(mine.size(), theirs.size());
        theirs[kBadDlid].lid = static_cast<uint16_t>(theirs[kBadDlid].lid ^ 0x0800);
        for (int i = 0; i < n; ++i) {
          ASSERT_TRUE(ep->qp(i).connect(theirs[i]));
        }
        ASSERT_TRUE(p.peer().signal("connected"));
        ASSERT_TRUE(p.peer().wait("ready"));
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        for (int i = 0; i < n; ++i) {
          SCOPED_TRACE(cases[i].name);
          const Case& c = cases[i];
          const double t_ms = ack_timeout_us(c.timeout) / 1000.0;
          Wr w = i == kDestroyed ? wr_write(i, {buf->sge(0, 64)}, RemoteBuf{0, 1, 0, 0})
                                 : wr_send(i, {buf->sge(0, 64)});
          const auto start = Clock::now();
          ASSERT_TRUE(run_wr_expect(ep->qp(i), w, IBV_WC_RETRY_EXC_ERR, scaled(Millis(10'000))));
          const double elapsed = ms_since(start);
          note("%s: RETRY_EXC_ERR after %.1f ms (timeout %.2f ms, retry_cnt %d)", c.name, elapsed, t_ms,
               c.retry_cnt);
          EXPECT_GE(elapsed, 0.9 * (c.retry_cnt + 1) * t_ms) << "gave up before retry_cnt + 1 timeouts";
          EXPECT_LE(elapsed, 4.0 * (c.retry_cnt + 1) * t_ms + static_cast<double>(scaled(Millis(1000)).count()))
              << "longer than (retry_cnt + 1) x 4 x the local ACK timeout";
          EXPECT_TRUE(expect_error_state_and_flush(ep->qp(i), *buf));
        }
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "silent peer",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        std::vector<QpInfo> mine;
        for (int i = 0; i < n; ++i) {
          TestQp* qp = ep->add_qp(QpConfig{});
          ASSERT_NE(nullptr, qp);
          mine.push_back(qp->info());
        }
        std::vector<QpInfo> theirs;
        ASSERT_TRUE(p.peer().send_vector(mine));
        ASSERT_TRUE(p.peer().recv_vector(&theirs));
        ASSERT_TRUE(p.peer().wait("connected"));
        ASSERT_TRUE(ep->qp(kInit).to_init());
        // kReset stays as created.
        ASSERT_TRUE(ep->qp(kDestroyed).connect(theirs[kDestroyed]));
        ep->qp(kDestroyed).destroy();
        ASSERT_TRUE(ep->qp(kBadDlid).connect(theirs[kBadDlid]));
        auto buf = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, buf);
        for (int i : {kInit, kBadDlid}) {
          ASSERT_TRUE(post_recv(ep->qp(i), 9, {buf->sge(0, 4096)}));
        }
        ASSERT_TRUE(p.peer().signal("ready"));
        ASSERT_TRUE(p.peer().wait("done", Deadline(scaled(Millis(20'000)))));
        EXPECT_TRUE(expect_no_completion(ep->qp(kInit).recv_cq(), Millis(20), "(INIT drops packets)"));
        EXPECT_TRUE(expect_no_completion(ep->qp(kBadDlid).recv_cq(), Millis(20), "(wrong DLID)"));
        EXPECT_EQ(IBV_QPS_INIT, ep->qp(kInit).state());
        EXPECT_EQ(IBV_QPS_RESET, ep->qp(kReset).state());
        EXPECT_TRUE(expect_fill(buf->data(), 4096, kGuardByte, "receive buffer"));
      });
}

// ibv_reg_mr(3): REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE (EINVAL
// otherwise); REMOTE_READ alone and no access at all are fine. Both entry
// points (ibv_reg_mr and ibv_reg_mr_iova2, which the inline wrapper picks for
// non-constant flags) are checked.
TEST(RcErrors, RegMrAccessRules) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    Buffer buf(4096);
    struct Case {
      int access;
      bool ok;
    };
    const Case cases[] = {
        {IBV_ACCESS_REMOTE_WRITE, false},
        {IBV_ACCESS_REMOTE_ATOMIC, false},
        {IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, false},
        {IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ, false},
        {IBV_ACCESS_REMOTE_READ, true},
        {0, true},
        {IBV_ACCESS_LOCAL_WRITE, true},
        {IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, true},
        {IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, true},
        {kAllAccess, true},
    };
    for (const Case& c : cases) {
      for (int entry = 0; entry < 2; ++entry) {
        SCOPED_TRACE("access 0x" + std::to_string(c.access) + (entry == 0 ? " via ibv_reg_mr" : " via ibv_reg_mr_iova2"));
        errno = 0;
        ibv_mr* mr = entry == 0 ? (ibv_reg_mr)(ep->pd.get(), buf.data(), 4096, c.access)
                                : ibv_reg_mr_iova2(ep->pd.get(), buf.data(), 4096,
                                                   reinterpret_cast<uintptr_t>(buf.data()),
                                                   static_cast<unsigned>(c.access));
        if (c.ok) {
          EXPECT_NE(nullptr, mr) << errno_name(errno);
        } else {
          EXPECT_EQ(nullptr, mr);
          EXPECT_EQ(EINVAL, errno) << errno_name(errno);
        }
        if (mr != nullptr) {
          EXPECT_EQ(0, ibv_dereg_mr(mr));
        }
      }
    }
  });
}

// After an error, RESET -> INIT -> RTR -> RTS on both sides (new PSNs) makes
// the connection usable again.
TEST(RcErrors, RecoverThroughReset) {
  auto body = [](Proc& p, bool requester) {
    auto ep = connected_endpoint(p.peer());
    ASSERT_NE(nullptr, ep);
    TestQp& qp = ep->qp();
    auto buf = Region::create(ep->pd.get(), 8192);
    ASSERT_NE(nullptr, buf);
    RemoteBuf remote;
    ASSERT_TRUE(exchange(p.peer(), buf->remote(), &remote));
    if (requester) {
      RemoteBuf bad = remote;
      bad.rkey ^= 0x5A5A5A00;
      Wr w = wr_write(1, {buf->sge(0, 64)}, bad);
      ASSERT_TRUE(run_wr_expect(qp, w, IBV_WC_REM_ACCESS_ERR));
    }
    ASSERT_TRUE(qp.wait_state(IBV_QPS_ERR));
    // Drain whatever was flushed, then start over.
    ASSERT_TRUE(p.peer().signal("in error") && p.peer().wait("in error"));
    ASSERT_TRUE(qp.to_state(IBV_QPS_RESET));
    EXPECT_EQ(IBV_QPS_RESET, qp.state());
    ibv_wc drain[16];
    while (ibv_poll_cq(qp.send_cq(), 16, drain) > 0) {
    }
    while (ibv_poll_cq(qp.recv_cq(), 16, drain) > 0) {
    }
    QpInfo mine = qp.info();
    mine.psn = (mine.psn + 0x1234) & 0xFFFFFF;
    QpInfo theirs;
    ASSERT_TRUE(p.peer().send(mine) && p.peer().recv(&theirs));
    // Our send PSN changes with the new info: rebuild the QP's view of it.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = kPort;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    ASSERT_EQ(0, ibv_modify_qp(qp.get(), &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
    ASSERT_TRUE(qp.to_rtr(theirs));
    attr = {};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = mine.psn;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    ASSERT_EQ(0, ibv_modify_qp(qp.get(), &attr,
                               IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC));
    ASSERT_TRUE(p.peer().signal("reconnected") && p.peer().wait("reconnected"));
    if (requester) {
      fill_pattern(buf->data(), 4096, 0x4EC);
      Wr write = wr_write(2, {buf->sge(0, 4096)}, remote);
      ASSERT_TRUE(run_wr(qp, write));
      Wr read = wr_read(3, {buf->sge(4096, 4096)}, remote);
      ASSERT_TRUE(run_wr(qp, read));
      EXPECT_TRUE(expect_pattern(buf->data() + 4096, 4096, 0x4EC, "READ after recovery"));
      ASSERT_TRUE(p.peer().signal("done"));
    } else {
      ASSERT_TRUE(p.peer().wait("done"));
      EXPECT_TRUE(expect_pattern(buf->data(), 4096, 0x4EC, "WRITE after recovery"));
    }
  };
  run_pair(
      "requester", [&](Proc& p) { body(p, true); }, "responder", [&](Proc& p) { body(p, false); });
}

}  // namespace
}  // namespace softverbs::integration
