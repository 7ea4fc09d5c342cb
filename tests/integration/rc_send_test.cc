// RC SEND and SEND_WITH_IMM between two processes: sizes, gather/scatter
// lists, inline data, signalled and unsignalled work requests, queue limits,
// GRH and path MTUs, PSN wraparound. Every byte of every message is checked,
// and so are the guard bytes around every receive buffer.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr uint32_t kImmBase = 0xA1B2C300;
constexpr size_t kRecvSlack = 64;  // room past the message in each receive buffer

uint64_t seed_of(int pass, size_t k) { return 0x5E0D0000 + pass * 1000 + k; }

// Sender and receiver agree on the sizes; the sender sends each as one message.
TEST(RcSend, SizesByteExact) {
  const std::vector<size_t> sizes = standard_sizes(0x5E4D);
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        const Layout layout = make_layout(sizes, 0, 3);
        auto src = Region::create(ep->pd.get(), layout.total);
        ASSERT_NE(nullptr, src);
        for (int pass = 0; pass < 2; ++pass) {  // 0: SEND, 1: SEND_WITH_IMM
          std::vector<Wr> wrs;
          for (size_t k = 0; k < sizes.size(); ++k) {
            fill_pattern(src->data() + layout.offsets[k], sizes[k], seed_of(pass, k));
            std::vector<ibv_sge> sg;
            if (sizes[k] > 0) sg.push_back(src->sge(layout.offsets[k], sizes[k]));
            wrs.push_back(pass == 0 ? wr_send(k, sg)
                                    : wr_send_imm(k, sg, kImmBase + static_cast<uint32_t>(k)));
          }
          std::vector<Wr*> list;
          for (Wr& w : wrs) list.push_back(&w);
          ASSERT_TRUE(p.peer().wait("posted"));
          ASSERT_TRUE(post(qp, list));
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(qp.send_cq(), sizes.size(), &wcs, scaled(kOpTimeout), "for the sends"));
          for (size_t k = 0; k < wcs.size(); ++k) {
            WcExpect want;
            want.wr_id = k;
            want.opcode = IBV_WC_SEND;
            want.qp_num = qp.qpn();
            EXPECT_TRUE(check_wc(wcs[k], want)) << "send #" << k << " of " << sizes[k] << " bytes";
          }
          ASSERT_TRUE(p.peer().wait("verified"));
        }
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        std::vector<size_t> caps;
        for (size_t s : sizes) caps.push_back(s + kRecvSlack);
        const Layout layout = make_layout(caps, 64, 1);
        auto dst = Region::create(ep->pd.get(), layout.total);
        ASSERT_NE(nullptr, dst);
        for (int pass = 0; pass < 2; ++pass) {
          std::memset(dst->data(), kGuardByte, dst->size());
          for (size_t k = 0; k < sizes.size(); ++k) {
            ASSERT_TRUE(post_recv(qp, 100 + k, {dst->sge(layout.offsets[k], caps[k])}));
          }
          ASSERT_TRUE(p.peer().signal("posted"));
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(qp.recv_cq(), sizes.size(), &wcs, scaled(kOpTimeout), "for the receives"));
          std::vector<Span> spans;
          for (size_t k = 0; k < sizes.size(); ++k) {
            SCOPED_TRACE("pass " + std::to_string(pass) + ", message #" + std::to_string(k) + " of " +
                         std::to_string(sizes[k]) + " bytes");
            WcExpect want;
            want.wr_id = 100 + k;  // RC receives complete in order
            want.opcode = IBV_WC_RECV;
            want.byte_len = static_cast<uint32_t>(sizes[k]);
            want.qp_num = qp.qpn();
            if (pass == 1) {
              want.imm = kImmBase + static_cast<uint32_t>(k);
            } else {
              want.no_imm = true;
            }
            EXPECT_TRUE(check_wc(wcs[k], want));
            EXPECT_TRUE(expect_pattern(dst->data() + layout.offsets[k], sizes[k], seed_of(pass, k),
                                       "received message"));
            spans.push_back({layout.offsets[k], sizes[k]});
          }
          EXPECT_TRUE(expect_guard_outside(dst->data(), dst->size(), spans, "receive buffers"));
          ASSERT_TRUE(p.peer().signal("verified"));
        }
      });
}

// Several SGEs on both sides, from two MRs each; the message scatters across
// the receive SGEs in order, and the last receive SGE is only partly used.
TEST(RcSend, GatherScatterLists) {
  // Sender gathers (mr, offset, length); receiver scatters into (mr, offset, capacity).
  struct Piece {
    int mr;
    size_t offset;
    size_t len;
  };
  const std::vector<Piece> gather = {{0, 0, 1}, {1, 0, 4095}, {0, 100, 4097}, {1, 5000, 3}};
  const std::vector<Piece> scatter = {{0, 64, 100}, {1, 64, 1}, {0, 1000, 8000}, {1, 2000, 200}};
  const size_t total = 1 + 4095 + 4097 + 3;
  auto expected_message = [&] {
    std::vector<uint8_t> msg;
    for (const Piece& g : gather) {
      std::vector<uint8_t> part(g.len);
      fill_pattern(part.data(), g.len, 0x6A7 + g.mr, g.offset);
      msg.insert(msg.end(), part.begin(), part.end());
    }
    return msg;
  };
  QpConfig cfg;
  cfg.max_send_sge = 4;
  cfg.max_recv_sge = 4;
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        std::unique_ptr<Region> mrs[2] = {Region::create(ep->pd.get(), 8192),
                                          Region::create(ep->pd.get(), 8192)};
        ASSERT_TRUE(mrs[0] && mrs[1]);
        fill_pattern(mrs[0]->data(), 8192, 0x6A7);
        fill_pattern(mrs[1]->data(), 8192, 0x6A8);
        std::vector<ibv_sge> sg;
        for (const Piece& g : gather) sg.push_back(mrs[g.mr]->sge(g.offset, g.len));
        for (int pass = 0; pass < 2; ++pass) {
          ASSERT_TRUE(p.peer().wait("posted"));
          Wr w = pass == 0 ? wr_send(1, sg) : wr_send_imm(1, sg, 0xC0FFEE);
          ASSERT_TRUE(run_wr(ep->qp(), w));
          ASSERT_TRUE(p.peer().wait("verified"));
        }
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        std::unique_ptr<Region> mrs[2] = {Region::create(ep->pd.get(), 16384),
                                          Region::create(ep->pd.get(), 8192)};
        ASSERT_TRUE(mrs[0] && mrs[1]);
        const std::vector<uint8_t> msg = expected_message();
        ASSERT_EQ(total, msg.size());
        for (int pass = 0; pass < 2; ++pass) {
          for (auto& r : mrs) std::memset(r->data(), kGuardByte, r->size());
          std::vector<ibv_sge> sg;
          for (const Piece& s : scatter) sg.push_back(mrs[s.mr]->sge(s.offset, s.len));
          ASSERT_TRUE(post_recv(ep->qp(), 7, sg));
          ASSERT_TRUE(p.peer().signal("posted"));
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(ep->qp().recv_cq(), &wc));
          WcExpect want;
          want.wr_id = 7;
          want.opcode = IBV_WC_RECV;
          want.byte_len = static_cast<uint32_t>(total);
          want.qp_num = ep->qp().qpn();
          if (pass == 1) want.imm = 0xC0FFEE;
          EXPECT_TRUE(check_wc(wc, want));
          // Walk the scatter list: each SGE is filled in turn.
          size_t at = 0;
          std::vector<Span> used[2];
          for (const Piece& s : scatter) {
            const size_t n = std::min(s.len, total - at);
            EXPECT_TRUE(expect_same(mrs[s.mr]->data() + s.offset, msg.data() + at, n,
                                    "scatter SGE at offset " + std::to_string(s.offset)));
            used[s.mr].push_back({s.offset, n});
            at += n;
          }
          EXPECT_TRUE(expect_guard_outside(mrs[0]->data(), mrs[0]->size(), used[0], "receive MR 0"));
          EXPECT_TRUE(expect_guard_outside(mrs[1]->data(), mrs[1]->size(), used[1], "receive MR 1"));
          ASSERT_TRUE(p.peer().signal("verified"));
        }
      });
}

// IBV_SEND_INLINE up to the QP's max_inline_data: the data is taken at post
// time (the buffer may be reused at once, ibv_post_send(3)) and the L_Key is
// not checked. One byte more fails ibv_post_send without touching the QP.
TEST(RcSend, InlineData) {
  QpConfig cfg;
  cfg.max_inline_data = 64;
  cfg.max_send_sge = 2;
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        const uint32_t max_inline = qp.cap().max_inline_data;
        ASSERT_GE(max_inline, 64u);
        ASSERT_TRUE(p.peer().send(max_inline));
        ASSERT_TRUE(p.peer().wait("posted"));
        const std::vector<size_t> sizes = {1, 17, max_inline};
        std::vector<uint8_t> heap(max_inline + 1);  // not registered
        for (size_t k = 0; k < sizes.size(); ++k) {
          fill_pattern(heap.data(), sizes[k], 0x1A + k);
          Wr w = wr_send(k, {ibv_sge{reinterpret_cast<uintptr_t>(heap.data()),
                                     static_cast<uint32_t>(sizes[k]), 0xDEADBEEF}},
                         IBV_SEND_SIGNALED | IBV_SEND_INLINE);
          ASSERT_TRUE(post(qp, w));
          std::fill(heap.begin(), heap.end(), 0);  // reuse at once
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(qp.send_cq(), &wc));
          EXPECT_TRUE(check_wc(wc, {.wr_id = k, .opcode = IBV_WC_SEND, .qp_num = qp.qpn()}));
        }
        // Two SGEs totalling max_inline_data.
        fill_pattern(heap.data(), max_inline, 0x1A + 3);
        const uint32_t half = max_inline / 2;
        Wr two = wr_send(3,
                         {ibv_sge{reinterpret_cast<uintptr_t>(heap.data()), half, 0},
                          ibv_sge{reinterpret_cast<uintptr_t>(heap.data()) + half, max_inline - half, 0}},
                         IBV_SEND_SIGNALED | IBV_SEND_INLINE);
        ASSERT_TRUE(post(qp, two));
        std::fill(heap.begin(), heap.end(), 0);
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(qp.send_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 3, .opcode = IBV_WC_SEND, .qp_num = qp.qpn()}));

        // One byte over the limit: an immediate error, bad_wr names it.
        Wr over = wr_send(99, {ibv_sge{reinterpret_cast<uintptr_t>(heap.data()), max_inline + 1, 0}},
                          IBV_SEND_SIGNALED | IBV_SEND_INLINE);
        ibv_send_wr* bad = nullptr;
        const int rc = ibv_post_send(qp.get(), over.get(), &bad);
        EXPECT_NE(0, rc) << "inline send of max_inline_data + 1 = " << max_inline + 1 << " bytes";
        EXPECT_EQ(over.get(), bad);
        EXPECT_TRUE(expect_no_completion(qp.send_cq(), Millis(100), "after a rejected post"));
        EXPECT_EQ(IBV_QPS_RTS, qp.state()) << "an immediate error must not change the QP state";
        // The QP still works.
        fill_pattern(heap.data(), 8, 0x1A + 4);
        Wr after = wr_send(4, {ibv_sge{reinterpret_cast<uintptr_t>(heap.data()), 8, 0}},
                           IBV_SEND_SIGNALED | IBV_SEND_INLINE);
        ASSERT_TRUE(post(qp, after));
        ASSERT_TRUE(poll_one(qp.send_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 4, .opcode = IBV_WC_SEND, .qp_num = qp.qpn()}));
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        uint32_t max_inline = 0;
        ASSERT_TRUE(p.peer().recv(&max_inline));
        const std::vector<size_t> sizes = {1, 17, max_inline, max_inline, 8};
        std::vector<size_t> caps(sizes.size(), max_inline + 64);
        const Layout layout = make_layout(caps, 64);
        auto dst = Region::create(ep->pd.get(), layout.total);
        ASSERT_NE(nullptr, dst);
        for (size_t k = 0; k < sizes.size(); ++k) {
          ASSERT_TRUE(post_recv(qp, k, {dst->sge(layout.offsets[k], caps[k])}));
        }
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qp.recv_cq(), sizes.size(), &wcs));
        std::vector<Span> spans;
        for (size_t k = 0; k < sizes.size(); ++k) {
          SCOPED_TRACE("inline message #" + std::to_string(k));
          EXPECT_TRUE(check_wc(wcs[k], {.wr_id = k,
                                        .opcode = IBV_WC_RECV,
                                        .byte_len = static_cast<uint32_t>(sizes[k]),
                                        .qp_num = qp.qpn()}));
          EXPECT_TRUE(expect_pattern(dst->data() + layout.offsets[k], sizes[k], 0x1A + k, "inline data"));
          spans.push_back({layout.offsets[k], sizes[k]});
        }
        EXPECT_TRUE(expect_guard_outside(dst->data(), dst->size(), spans, "receive buffers"));
        EXPECT_TRUE(expect_no_completion(qp.recv_cq(), Millis(100), "(the oversized inline send)"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// sq_sig_all = 0: only WRs with IBV_SEND_SIGNALED produce completions, and
// polling those retires the unsignalled WRs before them, so a window of
// max_send_wr outstanding WRs never overflows the send queue. With
// sq_sig_all = 1 every WR completes. Receives always complete.
TEST(RcSend, SignaledAndUnsignaled) {
  QpConfig unsignaled;
  unsignaled.sq_sig_all = false;
  unsignaled.max_send_wr = 16;
  QpConfig all_signaled;
  all_signaled.max_send_wr = 16;
  constexpr size_t kSlot = 64;
  constexpr int kRounds = 8;
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), unsignaled);
        ASSERT_NE(nullptr, ep);
        ASSERT_TRUE(connect_qps(p.peer(), *ep, all_signaled));
        TestQp& qp = ep->qp(0);
        const uint32_t window = qp.cap().max_send_wr;
        const uint32_t batch = std::max<uint32_t>(window / 2, 1);
        const uint64_t writes = static_cast<uint64_t>(batch) * kRounds;
        ASSERT_TRUE(p.peer().send(writes));
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        auto src = Region::create(ep->pd.get(), writes * kSlot);
        ASSERT_NE(nullptr, src);
        fill_pattern(src->data(), src->size(), 0x516);

        // Part 1: RDMA WRITEs, one signalled per batch, two batches in flight.
        std::vector<uint64_t> completed;
        for (int round = 0; round < kRounds; ++round) {
          std::vector<Wr> wrs;
          for (uint32_t i = 0; i < batch; ++i) {
            const uint64_t id = static_cast<uint64_t>(round) * batch + i;
            wrs.push_back(wr_write(id, {src->sge(id * kSlot, kSlot)}, remote.at(id * kSlot),
                                   i + 1 == batch ? IBV_SEND_SIGNALED : 0));
          }
          std::vector<Wr*> list;
          for (Wr& w : wrs) list.push_back(&w);
          ASSERT_TRUE(post(qp, list)) << "round " << round << ": the send queue overflowed";
          if (round > 0) {
            ibv_wc wc{};
            ASSERT_TRUE(poll_one(qp.send_cq(), &wc));
            completed.push_back(wc.wr_id);
            EXPECT_TRUE(check_wc(wc, {.wr_id = static_cast<uint64_t>(round) * batch - 1,
                                      .opcode = IBV_WC_RDMA_WRITE,
                                      .qp_num = qp.qpn()}));
          }
        }
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(qp.send_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = writes - 1, .opcode = IBV_WC_RDMA_WRITE, .qp_num = qp.qpn()}));
        EXPECT_TRUE(expect_no_completion(qp.send_cq(), Millis(200), "for unsignalled WRITEs"));
        ASSERT_TRUE(p.peer().signal("written"));

        // Part 2: 8 unsignalled SENDs and a signalled one: one send completion,
        // nine receive completions at the peer.
        ASSERT_TRUE(p.peer().wait("posted"));
        std::vector<Wr> sends;
        for (int i = 0; i < 9; ++i) sends.push_back(wr_send(200 + i, {src->sge(i * kSlot, kSlot)}, i == 8 ? IBV_SEND_SIGNALED : 0));
        std::vector<Wr*> list;
        for (Wr& w : sends) list.push_back(&w);
        ASSERT_TRUE(post(qp, list));
        ASSERT_TRUE(poll_one(qp.send_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 208, .opcode = IBV_WC_SEND, .qp_num = qp.qpn()}));
        EXPECT_TRUE(expect_no_completion(qp.send_cq(), Millis(100), "for unsignalled SENDs"));

        // Part 3: sq_sig_all = 1 — WRs without IBV_SEND_SIGNALED complete too.
        TestQp& all = ep->qp(1);
        std::vector<Wr> plain;
        for (int i = 0; i < 4; ++i) plain.push_back(wr_write(300 + i, {src->sge(0, kSlot)}, remote.at(0), 0));
        list.clear();
        for (Wr& w : plain) list.push_back(&w);
        ASSERT_TRUE(post(all, list));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(all.send_cq(), 4, &wcs));
        for (int i = 0; i < 4; ++i) {
          EXPECT_TRUE(check_wc(wcs[i], {.wr_id = 300u + i, .opcode = IBV_WC_RDMA_WRITE, .qp_num = all.qpn()}));
        }
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), unsignaled);
        ASSERT_NE(nullptr, ep);
        ASSERT_TRUE(connect_qps(p.peer(), *ep, all_signaled));
        uint64_t writes = 0;
        ASSERT_TRUE(p.peer().recv(&writes));
        auto dst = Region::create(ep->pd.get(), writes * kSlot);
        ASSERT_NE(nullptr, dst);
        ASSERT_TRUE(p.peer().send(dst->remote()));
        ASSERT_TRUE(p.peer().wait("written"));
        EXPECT_TRUE(expect_pattern(dst->data(), dst->size(), 0x516, "WRITE slots"));
        EXPECT_TRUE(expect_no_completion(ep->qp(0).recv_cq(), Millis(1), "(WRITE consumes no receive)"));

        auto rbuf = Region::create(ep->pd.get(), 9 * kSlot);
        ASSERT_NE(nullptr, rbuf);
        for (int i = 0; i < 9; ++i) {
          ASSERT_TRUE(post_recv(ep->qp(0), 500 + i, {rbuf->sge(i * kSlot, kSlot)}));
        }
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(ep->qp(0).recv_cq(), 9, &wcs));
        for (int i = 0; i < 9; ++i) {
          EXPECT_TRUE(check_wc(wcs[i], {.wr_id = 500u + i,
                                        .opcode = IBV_WC_RECV,
                                        .byte_len = kSlot,
                                        .qp_num = ep->qp(0).qpn()}));
          EXPECT_TRUE(expect_pattern(rbuf->data() + i * kSlot, kSlot, 0x516, "unsignalled SEND", i * kSlot));
        }
        ASSERT_TRUE(p.peer().wait("done"));  // stay connected for part 3
      });
}

// With no receive posted and rnr_retry = 7 nothing completes, so the send
// queue holds exactly max_send_wr WRs; one more is an immediate ENOMEM. Once
// receives arrive, every queued SEND completes, in order.
TEST(RcSend, SendQueueFullIsImmediateError) {
  QpConfig cfg;
  cfg.max_send_wr = 16;
  cfg.max_recv_wr = 16;
  cfg.rnr_retry = 7;
  constexpr size_t kMsg = 32;
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        const uint32_t depth = qp.cap().max_send_wr;
        auto src = Region::create(ep->pd.get(), (depth + 1) * kMsg);
        ASSERT_NE(nullptr, src);
        fill_pattern(src->data(), src->size(), 0xF011);
        for (uint32_t i = 0; i < depth; ++i) {
          Wr w = wr_send(i, {src->sge(i * kMsg, kMsg)});
          ASSERT_TRUE(post(qp, w)) << "WR " << i << " of max_send_wr " << depth;
        }
        Wr extra = wr_send(depth, {src->sge(depth * kMsg, kMsg)});
        ibv_send_wr* bad = nullptr;
        const int rc = ibv_post_send(qp.get(), extra.get(), &bad);
        EXPECT_EQ(ENOMEM, rc) << "post_send on a full send queue returned " << errno_name(rc);
        EXPECT_EQ(extra.get(), bad);
        ASSERT_TRUE(p.peer().send(depth));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qp.send_cq(), depth, &wcs, scaled(Millis(20'000))));
        for (uint32_t i = 0; i < depth; ++i) {
          EXPECT_TRUE(check_wc(wcs[i], {.wr_id = i, .opcode = IBV_WC_SEND, .qp_num = qp.qpn()}));
        }
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        uint32_t depth = 0;
        ASSERT_TRUE(p.peer().recv(&depth, Deadline::op(), "the sender's queue depth"));
        auto dst = Region::create(ep->pd.get(), depth * kMsg);
        ASSERT_NE(nullptr, dst);
        const uint32_t rq = qp.cap().max_recv_wr;
        uint32_t posted = 0;
        uint32_t received = 0;
        while (received < depth) {
          while (posted < depth && posted - received < rq) {
            ASSERT_TRUE(post_recv(qp, posted, {dst->sge(posted * kMsg, kMsg)}));
            ++posted;
          }
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(qp.recv_cq(), &wc));
          EXPECT_TRUE(check_wc(wc, {.wr_id = received, .opcode = IBV_WC_RECV, .byte_len = kMsg, .qp_num = qp.qpn()}));
          ++received;
        }
        EXPECT_TRUE(expect_pattern(dst->data(), dst->size(), 0xF011, "queued SENDs"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// The receive queue holds exactly max_recv_wr WRs (posting is allowed from
// INIT on); one more is an immediate ENOMEM.
TEST(RcSend, RecvQueueFullIsImmediateError) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    QpConfig cfg;
    cfg.max_recv_wr = 16;
    TestQp* qp = ep->add_qp(cfg);
    ASSERT_NE(nullptr, qp);
    ASSERT_TRUE(qp->to_init());
    auto buf = Region::create(ep->pd.get(), 64);
    ASSERT_NE(nullptr, buf);
    const uint32_t depth = qp->cap().max_recv_wr;
    for (uint32_t i = 0; i < depth; ++i) {
      ASSERT_TRUE(post_recv(*qp, i, {buf->sge(0, 64)}));
    }
    ibv_sge sge = buf->sge(0, 64);
    ibv_recv_wr wr{};
    wr.wr_id = depth;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(qp->get(), &wr, &bad);
    EXPECT_EQ(ENOMEM, rc) << "post_recv on a full receive queue returned " << errno_name(rc);
    EXPECT_EQ(&wr, bad);
  });
}

// Data is identical whatever the path MTU and with or without a GRH.
TEST(RcSend, PathMtuAndGrh) {
  const std::vector<std::pair<ibv_mtu, bool>> variants = {
      {IBV_MTU_256, true}, {IBV_MTU_1024, false}, {IBV_MTU_2048, true}, {IBV_MTU_4096, true}};
  const std::vector<size_t> sizes = {1, 255, 256, 257, 4097, 70001};
  auto body = [&](Proc& p, bool sender) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    for (auto [mtu, grh] : variants) {
      QpConfig cfg;
      cfg.path_mtu = mtu;
      cfg.use_grh = grh;
      ASSERT_TRUE(connect_qps(p.peer(), *ep, cfg));
    }
    const Layout layout = make_layout(sizes, 64, 5);
    auto buf = Region::create(ep->pd.get(), layout.total);
    ASSERT_NE(nullptr, buf);
    for (size_t v = 0; v < variants.size(); ++v) {
      SCOPED_TRACE("path MTU enum " + std::to_string(variants[v].first) +
                   (variants[v].second ? " with GRH" : " without GRH"));
      TestQp& qp = ep->qp(v);
      if (sender) {
        for (size_t k = 0; k < sizes.size(); ++k)
          fill_pattern(buf->data() + layout.offsets[k], sizes[k], 0x370 + v * 16 + k);
        ASSERT_TRUE(p.peer().wait("posted"));
        for (size_t k = 0; k < sizes.size(); ++k) {
          Wr w = wr_send(k, {buf->sge(layout.offsets[k], sizes[k])});
          ASSERT_TRUE(run_wr(qp, w));
        }
      } else {
        std::memset(buf->data(), kGuardByte, buf->size());
        for (size_t k = 0; k < sizes.size(); ++k)
          ASSERT_TRUE(post_recv(qp, k, {buf->sge(layout.offsets[k], sizes[k])}));
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qp.recv_cq(), sizes.size(), &wcs));
        std::vector<Span> spans;
        for (size_t k = 0; k < sizes.size(); ++k) {
          EXPECT_TRUE(check_wc(wcs[k], {.wr_id = k,
                                        .opcode = IBV_WC_RECV,
                                        .byte_len = static_cast<uint32_t>(sizes[k]),
                                        .qp_num = qp.qpn()}));
          EXPECT_TRUE(expect_pattern(buf->data() + layout.offsets[k], sizes[k], 0x370 + v * 16 + k,
                                     "message of " + std::to_string(sizes[k]) + " bytes"));
          spans.push_back({layout.offsets[k], sizes[k]});
        }
        EXPECT_TRUE(expect_guard_outside(buf->data(), buf->size(), spans, "receive buffers"));
      }
    }
    ASSERT_TRUE(p.peer().signal("end") && p.peer().wait("end"));
  };
  run_pair(
      "sender", [&](Proc& p) { body(p, true); }, "receiver", [&](Proc& p) { body(p, false); });
}

// Starting PSNs just below 2^24: multi-packet SENDs, WRITEs and READs cross
// the 24-bit wrap (IBA 9.7.1: PSNs are modulo 2^24).
TEST(RcSend, PsnWraparound) {
  QpConfig cfg;
  cfg.psn = 0xFFFFF0;
  cfg.path_mtu = IBV_MTU_1024;
  constexpr size_t kMsg = 64 * kKiB;  // 64 packets
  constexpr int kCount = 4;
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        auto buf = Region::create(ep->pd.get(), kMsg * kCount);
        ASSERT_NE(nullptr, buf);
        fill_pattern(buf->data(), buf->size(), 0x24B);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        ASSERT_TRUE(p.peer().wait("posted"));
        for (int k = 0; k < kCount; ++k) {
          Wr w = wr_send(k, {buf->sge(k * kMsg, kMsg)});
          ASSERT_TRUE(run_wr(qp, w));
        }
        Wr write = wr_write(10, {buf->sge(0, kMsg * kCount)}, remote.at(kMsg * kCount));
        ASSERT_TRUE(run_wr(qp, write));
        std::memset(buf->data(), 0, buf->size());
        Wr read = wr_read(11, {buf->sge(0, kMsg * kCount)}, remote.at(kMsg * kCount));
        ASSERT_TRUE(run_wr(qp, read));
        EXPECT_TRUE(expect_pattern(buf->data(), buf->size(), 0x24B, "READ back across the PSN wrap"));
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        auto buf = Region::create(ep->pd.get(), 2 * kMsg * kCount);
        ASSERT_NE(nullptr, buf);
        ASSERT_TRUE(p.peer().send(buf->remote()));
        for (int k = 0; k < kCount; ++k) {
          ASSERT_TRUE(post_recv(qp, k, {buf->sge(k * kMsg, kMsg)}));
        }
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qp.recv_cq(), kCount, &wcs));
        for (int k = 0; k < kCount; ++k) {
          EXPECT_TRUE(check_wc(wcs[k], {.wr_id = static_cast<uint64_t>(k),
                                        .opcode = IBV_WC_RECV,
                                        .byte_len = kMsg,
                                        .qp_num = qp.qpn()}));
        }
        ASSERT_TRUE(p.peer().wait("done"));
        EXPECT_TRUE(expect_pattern(buf->data(), kMsg * kCount, 0x24B, "SENDs across the PSN wrap"));
        EXPECT_TRUE(expect_pattern(buf->data() + kMsg * kCount, kMsg * kCount, 0x24B,
                                   "WRITE across the PSN wrap"));
      });
}

}  // namespace
}  // namespace softverbs::integration
