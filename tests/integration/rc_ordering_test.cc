// RC ordering guarantees (IBA 9.5, 10.8.3): messages of one QP are executed
// at the responder in order, so earlier WRITEs are visible when a later
// SEND's receive completes, and a READ or atomic sees earlier WRITEs;
// completions of one work queue come in post order; IBV_SEND_FENCE holds a WR
// until earlier READs and atomics have completed.
#include <gtest/gtest.h>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

// A stream of WRITEs (unsignalled, varied sizes) then one SEND: when the SEND's
// receive completes, every byte of every WRITE is in place. Repeated with
// WRITE_WITH_IMM as the last message.
TEST(RcOrdering, WritesVisibleWhenLaterSendArrives) {
  constexpr int kRounds = 6;
  constexpr int kWrites = 40;
  std::vector<size_t> sizes;
  for (int i = 0; i < kWrites; ++i) sizes.push_back(static_cast<size_t>((i * 7919) % 30000 + 1));
  const Layout layout = make_layout(sizes, 0, 0);
  QpConfig cfg;
  cfg.sq_sig_all = false;
  cfg.max_send_wr = 128;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), layout.total);
        auto tiny = Region::create(ep->pd.get(), 64);
        ASSERT_TRUE(src && tiny);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        for (int round = 0; round < kRounds; ++round) {
          for (int i = 0; i < kWrites; ++i)
            fill_pattern(src->data() + layout.offsets[i], sizes[i], 0x0D00 + round * 100 + i);
          ASSERT_TRUE(p.peer().wait("posted"));
          std::vector<Wr> wrs;
          for (int i = 0; i < kWrites; ++i)
            wrs.push_back(wr_write(i, {src->sge(layout.offsets[i], sizes[i])}, remote.at(layout.offsets[i]), 0));
          std::memcpy(tiny->data(), &round, sizeof round);
          wrs.push_back(round % 2 == 0 ? wr_send(1000, {tiny->sge(0, sizeof round)}, IBV_SEND_SIGNALED)
                                       : wr_write_imm(1000, {}, remote, 0x0D00 + round, IBV_SEND_SIGNALED));
          std::vector<Wr*> list;
          for (Wr& w : wrs) list.push_back(&w);
          ASSERT_TRUE(post(ep->qp(), list));
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(ep->qp().send_cq(), &wc));
          EXPECT_TRUE(check_wc(wc, {.wr_id = 1000, .qp_num = ep->qp().qpn()}));
          ASSERT_TRUE(p.peer().wait("verified"));
        }
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto dst = Region::create(ep->pd.get(), layout.total);
        auto tiny = Region::create(ep->pd.get(), 64);
        ASSERT_TRUE(dst && tiny);
        ASSERT_TRUE(p.peer().send(dst->remote()));
        for (int round = 0; round < kRounds; ++round) {
          ASSERT_TRUE(post_recv(ep->qp(), round, {tiny->sge(0, 64)}));
          ASSERT_TRUE(p.peer().signal("posted"));
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(ep->qp().recv_cq(), &wc));
          // Check at once, before anything else can happen.
          for (int i = 0; i < kWrites; ++i) {
            EXPECT_TRUE(expect_pattern(dst->data() + layout.offsets[i], sizes[i], 0x0D00 + round * 100 + i,
                                       "round " + std::to_string(round) + " WRITE #" + std::to_string(i) +
                                           " when the following message completed"));
          }
          if (round % 2 == 0) {
            EXPECT_TRUE(check_wc(wc, {.wr_id = static_cast<uint64_t>(round), .opcode = IBV_WC_RECV,
                                      .byte_len = sizeof round, .qp_num = ep->qp().qpn()}));
          } else {
            EXPECT_TRUE(check_wc(wc, {.wr_id = static_cast<uint64_t>(round), .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
                                      .qp_num = ep->qp().qpn(), .imm = 0x0D00u + round}));
          }
          ASSERT_TRUE(p.peer().signal("verified"));
        }
      });
}

// 240 signalled WRs of every opcode, posted in batches: send completions
// arrive in post order; the peer's receive completions arrive in the order of
// the messages that consumed them.
TEST(RcOrdering, CompletionsInPostOrder) {
  constexpr int kTotal = 240;
  constexpr int kBatch = 24;
  QpConfig cfg;
  cfg.max_send_wr = 64;
  cfg.max_recv_wr = 256;
  cfg.cq_depth = 512;
  auto opcode_of = [](int i) {
    static constexpr ibv_wr_opcode kOps[] = {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
                                              IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_IMM,
                                              IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_ATOMIC_CMP_AND_SWP};
    return kOps[(i * 5 + i / 7) % 7];
  };
  auto consumes_receive = [](ibv_wr_opcode op) {
    return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
  };
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), kTotal * 64);
        ASSERT_NE(nullptr, buf);
        fill_pattern(buf->data(), buf->size(), 0x0DE);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        ASSERT_TRUE(p.peer().wait("posted"));
        int next_wc = 0;
        for (int base = 0; base < kTotal; base += kBatch) {
          std::vector<Wr> wrs;
          for (int i = base; i < base + kBatch; ++i) {
            const ibv_sge sge = buf->sge(i * 64, 32);
            const RemoteBuf dst = remote.at(i * 64);
            switch (opcode_of(i)) {
              case IBV_WR_SEND: wrs.push_back(wr_send(i, {sge})); break;
              case IBV_WR_SEND_WITH_IMM: wrs.push_back(wr_send_imm(i, {sge}, i)); break;
              case IBV_WR_RDMA_WRITE: wrs.push_back(wr_write(i, {sge}, dst)); break;
              case IBV_WR_RDMA_WRITE_WITH_IMM: wrs.push_back(wr_write_imm(i, {sge}, dst, i)); break;
              case IBV_WR_RDMA_READ: wrs.push_back(wr_read(i, {buf->sge(i * 64 + 32, 32)}, dst)); break;
              case IBV_WR_ATOMIC_FETCH_AND_ADD: wrs.push_back(wr_faa(i, buf->sge(i * 64 + 32, 8), dst, 1)); break;
              default: wrs.push_back(wr_cas(i, buf->sge(i * 64 + 32, 8), dst, 0, 1)); break;
            }
          }
          std::vector<Wr*> list;
          for (Wr& w : wrs) list.push_back(&w);
          ASSERT_TRUE(post(ep->qp(), list));
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(ep->qp().send_cq(), kBatch, &wcs));
          for (const ibv_wc& wc : wcs) {
            EXPECT_TRUE(check_wc(wc, {.wr_id = static_cast<uint64_t>(next_wc),
                                      .opcode = send_wc_opcode(opcode_of(next_wc)),
                                      .qp_num = ep->qp().qpn()}))
                << "completion #" << next_wc << " (completions must follow post order)";
            ++next_wc;
          }
        }
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto mem = Region::create(ep->pd.get(), kTotal * 64);
        auto rbuf = Region::create(ep->pd.get(), kTotal * 64);
        ASSERT_TRUE(mem && rbuf);
        std::memset(mem->data(), 0, mem->size());
        ASSERT_TRUE(p.peer().send(mem->remote()));
        std::vector<int> expected;  // message index of each receive, in order
        for (int i = 0; i < kTotal; ++i)
          if (consumes_receive(opcode_of(i))) expected.push_back(i);
        for (size_t k = 0; k < expected.size(); ++k)
          ASSERT_TRUE(post_recv(ep->qp(), k, {rbuf->sge(k * 64, 64)}));
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(ep->qp().recv_cq(), expected.size(), &wcs));
        for (size_t k = 0; k < expected.size(); ++k) {
          const int i = expected[k];
          const ibv_wr_opcode op = opcode_of(i);
          WcExpect want{.wr_id = k, .qp_num = ep->qp().qpn()};
          want.opcode = op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
          want.byte_len = 32;
          if (op == IBV_WR_SEND) {
            want.no_imm = true;
          } else {
            want.imm = static_cast<uint32_t>(i);
          }
          EXPECT_TRUE(check_wc(wcs[k], want)) << "receive #" << k << " should be message #" << i;
          if (op != IBV_WR_RDMA_WRITE_WITH_IMM) {
            EXPECT_TRUE(expect_pattern(rbuf->data() + k * 64, 32, 0x0DE, "message #" + std::to_string(i), i * 64));
          }
        }
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// READ remote X into local L, then a FENCEd WRITE of L to remote Y (and a
// FENCEd SEND of L): the fence makes them wait for the READ, so Y and the
// received message carry what the READ fetched, never L's previous contents.
TEST(RcOrdering, FenceAfterRead) {
  constexpr size_t kLen = kMiB;
  constexpr int kRounds = 5;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), kLen);
        ASSERT_NE(nullptr, local);
        std::vector<RemoteBuf> remote;  // X, Y
        ASSERT_TRUE(exchange(p.peer(), std::vector<RemoteBuf>{}, &remote));
        ASSERT_EQ(2u, remote.size());
        for (int round = 0; round < kRounds; ++round) {
          ASSERT_TRUE(p.peer().wait("ready"));
          std::memset(local->data(), 0x5A, kLen);  // stale contents the fence must not let out
          Wr read = wr_read(1, {local->sge(0, kLen)}, remote[0], 0);
          Wr write = wr_write(2, {local->sge(0, kLen)}, remote[1], IBV_SEND_FENCE);
          Wr send = wr_send(3, {local->sge(0, 4096)}, IBV_SEND_FENCE | IBV_SEND_SIGNALED);
          ASSERT_TRUE(post(ep->qp(), {&read, &write, &send}));
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(ep->qp().send_cq(), 3, &wcs));
          for (int i = 0; i < 3; ++i) {
            EXPECT_EQ(IBV_WC_SUCCESS, wcs[i].status) << describe(wcs[i]);
          }
          EXPECT_TRUE(expect_pattern(local->data(), kLen, 0xFE0 + round, "READ result"));
          ASSERT_TRUE(p.peer().wait("verified"));
        }
        ASSERT_TRUE(p.peer().signal("completed"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto x = Region::create(ep->pd.get(), kLen);
        auto y = Region::create(ep->pd.get(), kLen);
        auto rbuf = Region::create(ep->pd.get(), 4096);
        ASSERT_TRUE(x && y && rbuf);
        std::vector<RemoteBuf> unused;
        ASSERT_TRUE(exchange(p.peer(), std::vector<RemoteBuf>{x->remote(), y->remote()}, &unused));
        for (int round = 0; round < kRounds; ++round) {
          fill_pattern(x->data(), kLen, 0xFE0 + round);
          std::memset(y->data(), 0, kLen);
          ASSERT_TRUE(post_recv(ep->qp(), round, {rbuf->sge(0, 4096)}));
          ASSERT_TRUE(p.peer().signal("ready"));
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(ep->qp().recv_cq(), &wc));
          EXPECT_TRUE(check_wc(wc, {.wr_id = static_cast<uint64_t>(round), .opcode = IBV_WC_RECV,
                                    .byte_len = 4096, .qp_num = ep->qp().qpn()}));
          EXPECT_TRUE(expect_pattern(rbuf->data(), 4096, 0xFE0 + round, "fenced SEND after READ"));
          EXPECT_TRUE(expect_pattern(y->data(), kLen, 0xFE0 + round, "fenced WRITE after READ"));
          ASSERT_TRUE(p.peer().signal("verified"));
        }
        // Stay until the initiator has every completion: the last SEND's ACK
        // may be lost (SOFTVERBS_FAULTS) and its retry needs this QP to answer.
        ASSERT_TRUE(p.peer().wait("completed", Deadline(scaled(Millis(20'000)))));
      });
}

// Posted back to back without waiting: a READ of what an earlier WRITE wrote
// returns the new data, and a FetchAdd on a word an earlier WRITE set returns
// the written value (the responder executes one QP's requests in order).
TEST(RcOrdering, ReadAndAtomicSeeEarlierWrite) {
  constexpr size_t kLen = 256 * kKiB;
  constexpr int kRounds = 8;
  QpConfig cfg;
  cfg.sq_sig_all = false;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto out = Region::create(ep->pd.get(), kLen + 64);
        auto in = Region::create(ep->pd.get(), kLen + 64);
        ASSERT_TRUE(out && in);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        for (int round = 0; round < kRounds; ++round) {
          fill_pattern(out->data(), kLen, 0xAA0 + round);
          const uint64_t word = 0x1000000000ull * (round + 1);
          std::memcpy(out->data() + kLen, &word, 8);
          Wr write = wr_write(1, {out->sge(0, kLen)}, remote, 0);
          Wr read = wr_read(2, {in->sge(0, kLen)}, remote, 0);
          Wr set = wr_write(3, {out->sge(kLen, 8)}, remote.at(kLen), 0);
          Wr faa = wr_faa(4, in->sge(kLen, 8), remote.at(kLen), 5, IBV_SEND_SIGNALED);
          ASSERT_TRUE(post(ep->qp(), {&write, &read, &set, &faa}));
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(ep->qp().send_cq(), &wc));
          EXPECT_TRUE(check_wc(wc, {.wr_id = 4, .opcode = IBV_WC_FETCH_ADD, .qp_num = ep->qp().qpn()}));
          EXPECT_TRUE(expect_pattern(in->data(), kLen, 0xAA0 + round, "READ after WRITE"));
          uint64_t fetched = 0;
          std::memcpy(&fetched, in->data() + kLen, 8);
          EXPECT_EQ(word, fetched) << "FetchAdd after WRITE, round " << round;
        }
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        auto mem = Region::create(ep->pd.get(), kLen + 64);
        ASSERT_NE(nullptr, mem);
        ASSERT_TRUE(p.peer().send(mem->remote()));
        ASSERT_TRUE(p.peer().wait("done", Deadline(scaled(Millis(20'000)))));
        uint64_t word = 0;
        std::memcpy(&word, mem->data() + kLen, 8);
        EXPECT_EQ(0x1000000000ull * kRounds + 5, word);
      });
}

// 2000 small SENDs while the receiver keeps re-posting receives: every
// message arrives once, in order, intact (rnr_retry = 7 covers the moments
// with no receive posted).
TEST(RcOrdering, LongSendStream) {
  constexpr uint32_t kMessages = 2000;
  constexpr size_t kMax = 512;
  QpConfig cfg;
  cfg.max_send_wr = 32;
  cfg.max_recv_wr = 32;
  // 0.64 ms between RNR retries: a receiver starved of CPU (sanitizers, a
  // loaded machine) then sees tens of retries a second, not thousands. Under
  // SOFTVERBS_FAULTS each retry risks losing its RNR NAK, and a lost one
  // costs a transport retry (the next request draws a sequence NAK), so
  // thousands of RNR rounds exhaust retry_cnt before the receiver catches up.
  cfg.min_rnr_timer = 12;
  auto size_of = [](uint32_t i) { return static_cast<size_t>(8 + (i * 37) % (kMax - 8)); };
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        const uint32_t depth = qp.cap().max_send_wr;
        auto buf = Region::create(ep->pd.get(), depth * kMax);
        ASSERT_NE(nullptr, buf);
        uint32_t posted = 0;
        uint32_t done = 0;
        while (done < kMessages) {
          while (posted < kMessages && posted - done < depth) {
            const size_t slot = (posted % depth) * kMax;
            fill_pattern(buf->data() + slot, size_of(posted), 0x57E0000 + posted);
            Wr w = wr_send(posted, {buf->sge(slot, size_of(posted))});
            ASSERT_TRUE(post(qp, w));
            ++posted;
          }
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(qp.send_cq(), &wc));
          ASSERT_TRUE(check_wc(wc, {.wr_id = done, .opcode = IBV_WC_SEND, .qp_num = qp.qpn()}));
          ++done;
        }
        ASSERT_TRUE(p.peer().signal("completed"));
        ASSERT_TRUE(p.peer().wait("received", Deadline(scaled(Millis(20'000)))));
      },
      "receiver",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), cfg);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        const uint32_t depth = qp.cap().max_recv_wr;
        auto buf = Region::create(ep->pd.get(), depth * kMax);
        ASSERT_NE(nullptr, buf);
        uint32_t posted = 0;
        uint32_t received = 0;
        while (received < kMessages) {
          while (posted < kMessages && posted - received < depth) {
            ASSERT_TRUE(post_recv(qp, posted, {buf->sge((posted % depth) * kMax, kMax)}));
            ++posted;
          }
          ibv_wc wc{};
          ASSERT_TRUE(poll_one(qp.recv_cq(), &wc));
          ASSERT_TRUE(check_wc(wc, {.wr_id = received, .opcode = IBV_WC_RECV,
                                    .byte_len = static_cast<uint32_t>(size_of(received)), .qp_num = qp.qpn()}));
          ASSERT_TRUE(expect_pattern(buf->data() + (received % depth) * kMax, size_of(received),
                                     0x57E0000 + received, "message #" + std::to_string(received)));
          ++received;
        }
        ASSERT_TRUE(p.peer().signal("received"));
        // Stay until the sender has every completion: the last ACK may be
        // lost (SOFTVERBS_FAULTS) and its retry needs this QP to answer.
        ASSERT_TRUE(p.peer().wait("completed", Deadline(scaled(Millis(20'000)))));
      });
}

}  // namespace
}  // namespace softverbs::integration
