// The unreliable transports between two processes. UD: datagrams addressed by
// AH and QPN, one MTU at most, landing 40 bytes into the receive buffer (the
// GRH's room, IBA 11.4.1.2), filtered by Q_Key; nothing is acknowledged, so
// a datagram without a receive WQE is lost and the sender never knows. UC:
// SEND and RDMA WRITE on a connected QP without acknowledgements; READ and
// atomics are not UC operations (IBA Table 37).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr uint32_t kGrh = 40;

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }
constexpr uint32_t kQkey = 0x11111111;
// UcOps: where the WRITE that follows the lost SEND lands, and what it writes.
constexpr size_t kMarkerOffset = 8192 - 8;
constexpr uint64_t kArrivedMarker = 0x5EE5A11BEFA11ull;

QpConfig ud_config() {
  QpConfig c;
  c.qp_type = IBV_QPT_UD;
  c.qkey = kQkey;
  return c;
}

QpConfig uc_config() {
  QpConfig c;
  c.qp_type = IBV_QPT_UC;
  return c;
}

struct AhDeleter {
  void operator()(ibv_ah* ah) const {
    if (ah != nullptr) ibv_destroy_ah(ah);
  }
};
using AhPtr = std::unique_ptr<ibv_ah, AhDeleter>;

// The SL UD datagrams travel on (InfiniBand; RoCE has none on the wire).
constexpr uint8_t kUdSl = 5;

// `global` or on a RoCE port (where every AH is global): by GID.
AhPtr make_ah(Endpoint& ep, const QpInfo& to, bool global) {
  ibv_ah_attr a{};
  a.dlid = to.lid;
  a.port_num = to.port;
  a.sl = kUdSl;
  if (global || ep.port.roce()) {
    a.is_global = 1;
    std::memcpy(a.grh.dgid.raw, to.gid, 16);
    a.grh.sgid_index = 0;
    a.grh.hop_limit = 1;
  }
  AhPtr ah(ibv_create_ah(ep.pd.get(), &a));
  EXPECT_NE(nullptr, ah) << "ibv_create_ah: " << errno_name(errno);
  return ah;
}

Wr ud_send(uint64_t id, std::vector<ibv_sge> sges, ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
  Wr w = wr_send(id, std::move(sges));
  w.wr.wr.ud.ah = ah;
  w.wr.wr.ud.remote_qpn = qpn;
  w.wr.wr.ud.remote_qkey = qkey;
  return w;
}

// Both sides: a UD endpoint in RTS, and the peer's QpInfo.
std::unique_ptr<Endpoint> ud_endpoint(Link& link, QpInfo* peer) {
  auto ep = connected_endpoint(link, ud_config());
  if (ep == nullptr) return nullptr;
  if (!link.send(ep->qp().info()) || !link.recv(peer)) return nullptr;
  return ep;
}

// Datagrams of 0 .. MTU bytes, with and without a GRH: each lands after the
// 40 bytes of GRH room, byte_len counts those 40, src_qp names the sender,
// IBV_WC_GRH says whether the room holds a GRH, and that GRH carries the
// sender's GID.
TEST(UdSend, DatagramsLandAfterTheGrhRoom) {
  const std::vector<uint32_t> sizes = {0, 1, 1000, 4095, 4096};
  run_pair(
      "sender",
      [&](Proc& p) {
        QpInfo peer;
        auto ep = ud_endpoint(p.peer(), &peer);
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, src);
        for (int global = 0; global < 2; ++global) {
          AhPtr ah = make_ah(*ep, peer, global != 0);
          ASSERT_NE(nullptr, ah);
          ASSERT_TRUE(p.peer().wait("posted"));
          for (size_t k = 0; k < sizes.size(); ++k) {
            fill_pattern(src->data(), sizes[k], 0x0D00 + global * 100 + k);
            Wr w = ud_send(k, sizes[k] ? std::vector<ibv_sge>{src->sge(0, sizes[k])} : std::vector<ibv_sge>{},
                           ah.get(), peer.qpn, kQkey);
            if (k == 2) {
              w.wr.opcode = IBV_WR_SEND_WITH_IMM;
              w.wr.imm_data = htonl(0xCAFE);
            }
            ASSERT_TRUE(run_wr(ep->qp(), w)) << "datagram #" << k;
          }
          ASSERT_TRUE(p.peer().wait("verified"));
        }
      },
      "receiver",
      [&](Proc& p) {
        QpInfo peer;
        auto ep = ud_endpoint(p.peer(), &peer);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        constexpr size_t kSlot = 8192;
        auto dst = Region::create(ep->pd.get(), kSlot * sizes.size());
        ASSERT_NE(nullptr, dst);
        for (int global = 0; global < 2; ++global) {
          std::memset(dst->data(), kGuardByte, dst->size());
          for (size_t k = 0; k < sizes.size(); ++k)
            ASSERT_TRUE(post_recv(qp, 100 + k, {dst->sge(k * kSlot, kGrh + 4096)}));
          ASSERT_TRUE(p.peer().signal("posted"));
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(qp.recv_cq(), sizes.size(), &wcs, scaled(kOpTimeout), "for the datagrams"));
          for (size_t k = 0; k < sizes.size(); ++k) {
            SCOPED_TRACE("global " + std::to_string(global) + ", datagram #" + std::to_string(k));
            WcExpect want;
            want.wr_id = 100 + k;
            want.opcode = IBV_WC_RECV;
            want.byte_len = kGrh + sizes[k];
            want.qp_num = qp.qpn();
            want.src_qp = peer.qpn;
            if (k == 2) want.imm = 0xCAFE;
            EXPECT_TRUE(check_wc(wcs[k], want));
            // RoCE datagrams always carry their IP header (IBV_WC_GRH set).
            const bool with_grh = global != 0 || ep->port.roce();
            EXPECT_EQ(with_grh, (wcs[k].wc_flags & IBV_WC_GRH) != 0);
            // Regression (issue 18: UCX ud_verbs timed out on softverbs_roce0):
            // RoCE reports the network header type in wc.sl as mlx5 does
            // (2 = IPv4), which UCX reads to compare the GRH's DGID.
            if (ep->port.roce())
              EXPECT_EQ(2, wcs[k].sl) << "wc.sl of a RoCEv2-over-IPv4 UD receive";
            else
              EXPECT_EQ(kUdSl, wcs[k].sl) << "wc.sl: the SL of the sender's AH";
            const uint8_t* slot = dst->data() + k * kSlot;
            EXPECT_TRUE(expect_pattern(slot + kGrh, sizes[k], 0x0D00 + global * 100 + k, "payload"));
            EXPECT_TRUE(expect_fill(slot + kGrh + sizes[k], 64, kGuardByte, "past the datagram"));
            if (with_grh) {
              if (!ep->port.roce()) {
                EXPECT_EQ(6, slot[0] >> 4) << "GRH IP version";
                EXPECT_EQ(0x1b, slot[6]) << "GRH next header";
                EXPECT_EQ(0, std::memcmp(slot + 8, peer.gid, 16)) << "GRH source GID";
              } else {  // RoCEv2 over IPv4: the IPv4 header in the last 20 bytes
                EXPECT_EQ(0x45, slot[20]) << "IPv4 version and header length";
                EXPECT_EQ(17, slot[20 + 9]) << "IPv4 protocol UDP";
                EXPECT_EQ(0, std::memcmp(slot + 20 + 12, peer.gid + 12, 4)) << "IPv4 source address";
              }
              ibv_ah_attr back{};
              ASSERT_EQ(0, ibv_init_ah_from_wc(ep->ctx.get(), 1, &wcs[k], reinterpret_cast<ibv_grh*>(const_cast<uint8_t*>(slot)), &back));
              EXPECT_TRUE(back.is_global);
              EXPECT_EQ(0, std::memcmp(back.grh.dgid.raw, peer.gid, 16)) << "an AH back to the sender";
            }
          }
          ASSERT_TRUE(p.peer().signal("verified"));
        }
      });
}

// IBA 10.2.4: a Q_Key other than the receiver's drops the datagram (the sender
// still completes: UD is unacknowledged); a Q_Key with its high bit set sends
// the sending QP's own Q_Key. A datagram with no receive WQE waiting is lost.
TEST(UdSend, QkeyFiltersAndNoReceiveLoses) {
  run_pair(
      "sender",
      [&](Proc& p) {
        QpInfo peer;
        auto ep = ud_endpoint(p.peer(), &peer);
        ASSERT_NE(nullptr, ep);
        auto src = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, src);
        AhPtr ah = make_ah(*ep, peer, false);
        ASSERT_NE(nullptr, ah);
        ASSERT_TRUE(p.peer().wait("nothing posted"));
        Wr lost = ud_send(1, {src->sge(0, 16)}, ah.get(), peer.qpn, kQkey);
        ASSERT_TRUE(run_wr(ep->qp(), lost));
        ASSERT_TRUE(p.peer().signal("sent"));
        ASSERT_TRUE(p.peer().wait("posted"));
        Wr wrong = ud_send(2, {src->sge(0, 16)}, ah.get(), peer.qpn, kQkey + 1);
        ASSERT_TRUE(run_wr(ep->qp(), wrong));
        store64(src->data(), 0x600D);
        Wr own = ud_send(3, {src->sge(0, 16)}, ah.get(), peer.qpn, 0x80000000u);
        ASSERT_TRUE(run_wr(ep->qp(), own));
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        QpInfo peer;
        auto ep = ud_endpoint(p.peer(), &peer);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        auto dst = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, dst);
        ASSERT_TRUE(p.peer().signal("nothing posted"));
        ASSERT_TRUE(p.peer().wait("sent"));
        ASSERT_TRUE(post_recv(qp, 7, {dst->sge(0, 1024)}));
        ASSERT_TRUE(p.peer().signal("posted"));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(qp.recv_cq(), &wc, scaled(kOpTimeout), "for the datagram with our Q_Key"));
        WcExpect want;
        want.wr_id = 7;
        want.opcode = IBV_WC_RECV;
        want.byte_len = kGrh + 16;
        want.src_qp = peer.qpn;
        EXPECT_TRUE(check_wc(wc, want));
        EXPECT_EQ(0x600Du, load64(dst->data() + kGrh)) << "not the lost or the wrongly keyed datagram";
        EXPECT_TRUE(expect_no_completion(qp.recv_cq(), Millis(100), "after the one datagram"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// A UD message is one packet: longer than the path MTU fails locally.
// Regression (issue 18: UCX's ud_verbs failed in MPI_Barrier with
// ibv_post_recv ENOMEM): senders in several processes reach one UD QP at
// once, and on the host link each runs its responder in its own process.
// Each datagram must take a receive WQE of its own: none completes twice,
// none lands torn, and none is lost, so the receive queue refills to
// exactly its size at the end.
TEST(UdSend, ConcurrentSendersEachTakeTheirOwnWqe) {
  constexpr int kSenders = 3;
  constexpr uint32_t kPerSender = 1500;
  constexpr uint32_t kBytes = 64;
  constexpr uint32_t kWqes = 512;
  std::vector<ProcSpec> procs;
  procs.push_back({"receiver", [&](Proc& p) {
                     auto ep = Endpoint::open();
                     ASSERT_NE(nullptr, ep);
                     QpConfig c = ud_config();
                     c.max_recv_wr = kWqes;
                     TestQp* qp = ep->add_qp(c);
                     ASSERT_NE(nullptr, qp);
                     ASSERT_TRUE(qp->to_init() && qp->to_rtr(QpInfo{}) && qp->to_rts());
                     ASSERT_EQ(kWqes, qp->cap().max_recv_wr) << "a ring of exactly the asked size";
                     auto dst = Region::create(ep->pd.get(), kWqes * (kGrh + kBytes));
                     ASSERT_NE(nullptr, dst);
                     std::vector<bool> outstanding(kWqes, false);
                     auto post = [&](uint64_t id) {
                       std::memset(dst->data() + id * (kGrh + kBytes), 0, kGrh + kBytes);
                       outstanding[id] = true;
                       return post_recv(*qp, id, {dst->sge(id * (kGrh + kBytes), kGrh + kBytes)});
                     };
                     for (uint64_t id = 0; id < kWqes; ++id) ASSERT_TRUE(post(id));
                     for (int r = 1; r <= kSenders; ++r) ASSERT_TRUE(p.link(r).send(qp->info()));
                     uint64_t received = 0;
                     int done = 0;
                     std::vector<bool> finished(kSenders + 1, false);
                     Deadline quiet_until(Millis(0));
                     ibv_wc wc[16];
                     for (const Deadline limit(scaled(Millis(60'000))); !limit.expired();) {
                       const int n = ibv_poll_cq(qp->recv_cq(), 16, wc);
                       ASSERT_GE(n, 0);
                       for (int k = 0; k < n; ++k) {
                         ASSERT_EQ(IBV_WC_SUCCESS, wc[k].status) << describe(wc[k]);
                         ASSERT_LT(wc[k].wr_id, kWqes);
                         ASSERT_TRUE(outstanding[wc[k].wr_id]) << "WQE " << wc[k].wr_id << " completed twice";
                         outstanding[wc[k].wr_id] = false;
                         ASSERT_EQ(kGrh + kBytes, wc[k].byte_len);
                         const uint8_t* d = dst->data() + wc[k].wr_id * (kGrh + kBytes) + kGrh;
                         uint32_t tag[2];
                         std::memcpy(tag, d, sizeof tag);
                         ASSERT_TRUE(expect_pattern(d + 8, kBytes - 8, uint64_t{tag[0]} << 32 | tag[1], "datagram body"))
                             << "sender " << tag[0] << " #" << tag[1] << ": torn";
                         ++received;
                         ASSERT_TRUE(post(wc[k].wr_id));
                       }
                       if (done < kSenders) {
                         for (int r = 1; r <= kSenders; ++r) {
                           // Readable: its "done" (or its end) is there; read it whole.
                           pollfd pfd{p.link(r).fd(), POLLIN, 0};
                           if (finished[r] || ::poll(&pfd, 1, 0) != 1) continue;
                           ASSERT_TRUE(p.link(r).wait("done"));
                           finished[r] = true;
                           ++done;
                         }
                         if (done == kSenders) quiet_until = Deadline(scaled(Millis(300)));
                       } else if (n == 0 && quiet_until.expired()) {
                         break;
                       }
                     }
                     ASSERT_EQ(kSenders, done) << "the senders did not finish";
                     EXPECT_GT(received, 0u);
                     for (uint64_t id = 0; id < kWqes; ++id)
                       EXPECT_TRUE(outstanding[id]) << "WQE " << id << " neither completed nor still posted";
                     // Every WQE is posted again: the ring holds exactly kWqes.
                     ibv_recv_wr extra{};
                     ibv_recv_wr* bad = nullptr;
                     EXPECT_EQ(ENOMEM, ibv_post_recv(qp->get(), &extra, &bad)) << "the ring has a slot no WQE holds";
                     note("%llu of %u datagrams received", static_cast<unsigned long long>(received),
                          kSenders * kPerSender);
                   }});
  for (int r = 1; r <= kSenders; ++r) {
    procs.push_back({"sender" + std::to_string(r), [&, r](Proc& p) {
                       auto ep = Endpoint::open();
                       ASSERT_NE(nullptr, ep);
                       TestQp* qp = ep->add_qp(ud_config());
                       ASSERT_NE(nullptr, qp);
                       ASSERT_TRUE(qp->to_init() && qp->to_rtr(QpInfo{}) && qp->to_rts());
                       QpInfo peer;
                       ASSERT_TRUE(p.link(0).recv(&peer));
                       AhPtr ah = make_ah(*ep, peer, false);
                       ASSERT_NE(nullptr, ah);
                       auto src = Region::create(ep->pd.get(), kBytes);
                       ASSERT_NE(nullptr, src);
                       for (uint32_t seq = 0; seq < kPerSender; ++seq) {
                         const uint32_t tag[2] = {static_cast<uint32_t>(r), seq};
                         std::memcpy(src->data(), tag, sizeof tag);
                         fill_pattern(src->data() + 8, kBytes - 8, uint64_t{tag[0]} << 32 | tag[1]);
                         Wr w = ud_send(seq, {src->sge(0, kBytes)}, ah.get(), peer.qpn, kQkey);
                         ASSERT_TRUE(run_wr(*qp, w));
                       }
                       ASSERT_TRUE(p.link(0).signal("done"));
                     }});
  }
  run_procs(std::move(procs));
}

TEST(UdSend, LongerThanMtuFailsAtTheSender) {
  run_solo("ud", [&](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    TestQp* a = ep->add_qp(ud_config());
    TestQp* b = ep->add_qp(ud_config());
    ASSERT_NE(nullptr, a);
    ASSERT_NE(nullptr, b);
    ASSERT_TRUE(a->connect(b->info()));
    ASSERT_TRUE(b->connect(a->info()));
    const uint32_t mtu = 128u << ep->port.attr.active_mtu;
    auto src = Region::create(ep->pd.get(), mtu + 1);
    ASSERT_NE(nullptr, src);
    AhPtr ah = make_ah(*ep, b->info(), false);
    ASSERT_NE(nullptr, ah);
    Wr big = ud_send(1, {src->sge(0, mtu + 1)}, ah.get(), b->qpn(), kQkey);
    ASSERT_TRUE(run_wr_expect(*a, big, IBV_WC_LOC_LEN_ERR));
    // Posting without an address handle is refused.
    Wr no_ah = ud_send(2, {src->sge(0, 8)}, nullptr, b->qpn(), kQkey);
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(EINVAL, ibv_post_send(b->get(), no_ah.get(), &bad));
    EXPECT_EQ(no_ah.get(), bad);
  });
}

// UC: SEND, SEND_WITH_IMM, WRITE and WRITE_WITH_IMM arrive; a SEND with no
// receive WQE is lost (the sender completes anyway) and the next one arrives;
// READ and atomics are refused at post time.
TEST(UcOps, SendWriteNoAcksNoReadsNoAtomics) {
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), uc_config());
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        RemoteBuf target;
        ASSERT_TRUE(p.peer().recv(&target));
        auto src = Region::create(ep->pd.get(), 3 * 4096);
        ASSERT_NE(nullptr, src);
        ASSERT_TRUE(p.peer().wait("no receive posted"));
        fill_pattern(src->data(), 100, 0xAA);
        Wr lost = wr_send(1, {src->sge(0, 100)});
        ASSERT_TRUE(run_wr(qp, lost)) << "an unacknowledged SEND completes at the sender";
        // A WRITE after it (the next PSN) tells the receiver that the SEND has
        // arrived and was dropped; on the UDP fabric it is still in flight when
        // the sender's completion comes.
        store64(src->data() + 3 * 4096 - 8, kArrivedMarker);
        Wr marker = wr_write(7, {src->sge(3 * 4096 - 8, 8)}, target.at(kMarkerOffset));
        ASSERT_TRUE(run_wr(qp, marker));
        ASSERT_TRUE(p.peer().signal("sent one"));
        ASSERT_TRUE(p.peer().wait("posted"));
        fill_pattern(src->data(), 10000, 0xBB);
        Wr send = wr_send_imm(2, {src->sge(0, 10000)}, 0x1234);
        ASSERT_TRUE(run_wr(qp, send));
        fill_pattern(src->data() + 10000, 2000, 0xCC);
        Wr write = wr_write(3, {src->sge(10000, 2000)}, target);
        ASSERT_TRUE(run_wr(qp, write));
        Wr write_imm = wr_write_imm(4, {src->sge(10000, 8)}, target.at(4000), 0x5678);
        ASSERT_TRUE(run_wr(qp, write_imm));
        Wr read = wr_read(5, {src->sge(0, 8)}, target);
        ibv_send_wr* bad = nullptr;
        EXPECT_EQ(EINVAL, ibv_post_send(qp.get(), read.get(), &bad)) << "READ on UC";
        Wr faa = wr_faa(6, src->sge(0, 8), target, 1);
        EXPECT_EQ(EINVAL, ibv_post_send(qp.get(), faa.get(), &bad)) << "FETCH_ADD on UC";
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        QpConfig c = uc_config();
        c.access = IBV_ACCESS_REMOTE_WRITE;
        auto ep = connected_endpoint(p.peer(), c);
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        auto target = Region::create(ep->pd.get(), 8192);
        auto dst = Region::create(ep->pd.get(), 16384);
        ASSERT_NE(nullptr, target);
        ASSERT_NE(nullptr, dst);
        ASSERT_TRUE(p.peer().send(target->remote()));
        ASSERT_TRUE(p.peer().signal("no receive posted"));
        ASSERT_TRUE(p.peer().wait("sent one"));
        const Deadline marker_deadline = Deadline::op();
        while (__atomic_load_n(reinterpret_cast<uint64_t*>(target->data() + kMarkerOffset), __ATOMIC_ACQUIRE) !=
               kArrivedMarker) {
          ASSERT_FALSE(marker_deadline.expired()) << "the WRITE after the lost SEND never arrived";
          ::usleep(100);
        }
        EXPECT_TRUE(expect_no_completion(qp.recv_cq(), Millis(50), "for the lost SEND"));
        ASSERT_TRUE(post_recv(qp, 10, {dst->sge(0, 16384)}));
        ASSERT_TRUE(post_recv(qp, 11, {dst->sge(0, 64)}));
        ASSERT_TRUE(p.peer().signal("posted"));
        std::vector<ibv_wc> wcs;
        ASSERT_TRUE(poll_n(qp.recv_cq(), 2, &wcs, scaled(kOpTimeout), "for SEND_WITH_IMM and WRITE_WITH_IMM"));
        WcExpect send;
        send.wr_id = 10;
        send.opcode = IBV_WC_RECV;
        send.byte_len = 10000;
        send.imm = 0x1234;
        EXPECT_TRUE(check_wc(wcs[0], send));
        EXPECT_TRUE(expect_pattern(dst->data(), 10000, 0xBB, "the SEND after the lost one"));
        WcExpect wimm;
        wimm.wr_id = 11;
        wimm.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
        wimm.imm = 0x5678;
        EXPECT_TRUE(check_wc(wcs[1], wimm));
        EXPECT_TRUE(expect_pattern(target->data(), 2000, 0xCC, "the WRITE"));
        EXPECT_TRUE(expect_pattern(target->data() + 4000, 8, 0xCC, "the WRITE_WITH_IMM"));
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// Regression (issue 18: the lock service's --uc): IBA Table 37 gives UC no
// atomics, so an atomic posted on a UC QP fails at ibv_post_send with EINVAL
// and bad_wr naming it, as rdma-core's providers do; the WRs before it in the
// chain are posted and complete, the ones after it are not posted, nothing
// reaches the target, and the QP stays usable.
TEST(UcOps, AtomicRefusedAtPostWithBadWr) {
  constexpr uint64_t kFirst = 0x1111111111111111ull;
  constexpr uint64_t kNotPosted = 0x2222222222222222ull;
  constexpr uint64_t kAfter = 0x3333333333333333ull;
  run_pair(
      "sender",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), uc_config());
        ASSERT_NE(nullptr, ep);
        TestQp& qp = ep->qp();
        RemoteBuf target;
        ASSERT_TRUE(p.peer().recv(&target));
        auto src = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, src);
        store64(src->data(), kFirst);
        store64(src->data() + 8, kNotPosted);
        store64(src->data() + 16, kAfter);

        Wr cas = wr_cas(1, src->sge(64, 8), target, 0, 7);
        ibv_send_wr* bad = nullptr;
        EXPECT_EQ(EINVAL, ibv_post_send(qp.get(), cas.get(), &bad)) << "CMP_AND_SWP on UC";
        EXPECT_EQ(cas.get(), bad);

        Wr first = wr_write(2, {src->sge(0, 8)}, target.at(8));
        Wr faa = wr_faa(3, src->sge(64, 8), target, 5);
        Wr never = wr_write(4, {src->sge(8, 8)}, target.at(16));
        first.get()->next = faa.get();
        faa.get()->next = never.get();
        bad = nullptr;
        EXPECT_EQ(EINVAL, ibv_post_send(qp.get(), first.get(), &bad)) << "WRITE, FETCH_AND_ADD, WRITE on UC";
        EXPECT_EQ(faa.get(), bad) << "bad_wr names the atomic, not the WRITE before it";
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(qp.send_cq(), &wc, scaled(kOpTimeout), "for the WRITE before the atomic"));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 2, .opcode = IBV_WC_RDMA_WRITE}));
        EXPECT_TRUE(expect_no_completion(qp.send_cq(), Millis(50), "for the refused atomic or the WR after it"));

        EXPECT_EQ(IBV_QPS_RTS, qp.state()) << "a refused post leaves the QP as it was";
        Wr after = wr_write(5, {src->sge(16, 8)}, target.at(24));
        ASSERT_TRUE(run_wr(qp, after));
        ASSERT_TRUE(p.peer().wait("verified"));
      },
      "receiver",
      [&](Proc& p) {
        QpConfig c = uc_config();
        c.access = IBV_ACCESS_REMOTE_WRITE;
        auto ep = connected_endpoint(p.peer(), c);
        ASSERT_NE(nullptr, ep);
        auto target = Region::create(ep->pd.get(), 4096);
        ASSERT_NE(nullptr, target);
        std::memset(target->data(), 0, 32);
        ASSERT_TRUE(p.peer().send(target->remote()));
        // The last WRITE lands after everything the sender posted before it.
        const Deadline deadline = Deadline::op();
        while (__atomic_load_n(reinterpret_cast<uint64_t*>(target->data() + 24), __ATOMIC_ACQUIRE) != kAfter) {
          ASSERT_FALSE(deadline.expired()) << "the WRITE after the refused atomics never arrived";
          ::usleep(100);
        }
        EXPECT_EQ(0u, load64(target->data())) << "an atomic reached the target";
        EXPECT_EQ(kFirst, load64(target->data() + 8)) << "the WRITE before the atomic";
        EXPECT_EQ(0u, load64(target->data() + 16)) << "the WRITE after the atomic was not posted";
        ASSERT_TRUE(p.peer().signal("verified"));
      });
}

// ibv_create_qp_ex(3) with send_ops_flags naming an operation the QP's
// transport lacks (READ or an atomic on UC, anything but SEND on UD) fails
// with EOPNOTSUPP, as mlx5 answers, instead of a QP whose ibv_wr_* calls
// would all fail.
TEST(UcOps, CreateQpExRefusesOpsTheTransportLacks) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    CqPtr cq = create_cq(ep->ctx.get(), 16);
    ASSERT_NE(nullptr, cq);
    auto create = [&](ibv_qp_type type, uint64_t ops) {
      ibv_qp_init_attr_ex a{};
      a.send_cq = cq.get();
      a.recv_cq = cq.get();
      a.cap.max_send_wr = 4;
      a.cap.max_recv_wr = 4;
      a.cap.max_send_sge = 1;
      a.cap.max_recv_sge = 1;
      a.qp_type = type;
      a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      a.pd = ep->pd.get();
      a.send_ops_flags = ops;
      errno = 0;
      ibv_qp* qp = ibv_create_qp_ex(ep->ctx.get(), &a);
      const int err = qp == nullptr ? errno : 0;
      if (qp != nullptr) {
        EXPECT_EQ(0, ibv_destroy_qp(qp));
      }
      return err;
    };
    constexpr uint64_t kUcOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
                                IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    constexpr uint64_t kUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    EXPECT_EQ(0, create(IBV_QPT_UC, kUcOps));
    EXPECT_EQ(0, create(IBV_QPT_UD, kUdOps));
    EXPECT_EQ(0, create(IBV_QPT_RC, kUcOps | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD));
    EXPECT_EQ(EOPNOTSUPP, create(IBV_QPT_UC, kUcOps | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP));
    EXPECT_EQ(EOPNOTSUPP, create(IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD));
    EXPECT_EQ(EOPNOTSUPP, create(IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ));
    EXPECT_EQ(EOPNOTSUPP, create(IBV_QPT_UD, kUdOps | IBV_QP_EX_WITH_RDMA_WRITE));
    EXPECT_EQ(EOPNOTSUPP, create(IBV_QPT_UD, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP));
  });
}

}  // namespace
}  // namespace softverbs::integration
