// UD multicast (IBA 10.5.2.5; ibv_attach_mcast(3)): a datagram to DestQP
// 0xFFFFFF addressed to a group reaches every UD QP attached to it, in every
// process, with the GRH and the sender's QPN; a QP not attached (or detached
// since) gets nothing. On softverbs0 the groups live in the device segment;
// on softverbs_roce0 (the roce-* entry: each process a host on 127.0.0.<n>)
// the group is an IP multicast group on the loopback interface.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr uint32_t kGrh = 40;
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kMulticastQpn = 0xffffff;
constexpr uint16_t kMlid = 0xc012;

// The group: an IPv4-mapped 239/8 address on RoCE (it maps to an IP group,
// as Linux's rdma_gid2ip has it), an ff0e MGID on InfiniBand.
ibv_gid group_gid(const PortInfo& port, uint8_t n = 0) {
  ibv_gid g{};
  if (port.roce()) {
    g.raw[10] = g.raw[11] = 0xff;
    g.raw[12] = 239;
    g.raw[13] = 77;
    g.raw[14] = 1;
    g.raw[15] = static_cast<uint8_t>(1 + n);
  } else {
    g.raw[0] = 0xff;
    g.raw[1] = 0x0e;
    g.raw[14] = 0x12;
    g.raw[15] = static_cast<uint8_t>(0x34 + n);
  }
  return g;
}

QpConfig ud_config() {
  QpConfig c;
  c.qp_type = IBV_QPT_UD;
  c.qkey = kQkey;
  return c;
}

bool to_rts(TestQp& qp) { return qp.to_init() && qp.to_rtr(QpInfo{}) && qp.to_rts(); }

struct AhDeleter {
  void operator()(ibv_ah* ah) const {
    if (ah != nullptr) ibv_destroy_ah(ah);
  }
};
using AhPtr = std::unique_ptr<ibv_ah, AhDeleter>;

AhPtr group_ah(Endpoint& ep, const ibv_gid& mgid) {
  ibv_ah_attr a{};
  a.dlid = ep.port.roce() ? 0 : kMlid;
  a.port_num = kPort;
  a.is_global = 1;
  a.grh.dgid = mgid;
  a.grh.sgid_index = 0;
  a.grh.hop_limit = 1;
  AhPtr ah(ibv_create_ah(ep.pd.get(), &a));
  EXPECT_NE(nullptr, ah) << "ibv_create_ah: " << errno_name(errno);
  return ah;
}

Wr group_send(uint64_t id, ibv_sge sge, ibv_ah* ah) {
  Wr w = wr_send(id, {sge});
  w.wr.wr.ud.ah = ah;
  w.wr.wr.ud.remote_qpn = kMulticastQpn;
  w.wr.wr.ud.remote_qkey = kQkey;
  return w;
}

// The DGID the receive buffer's GRH names: an IB GRH's bytes 24..39, or for
// RoCE over IPv4 the IPv4 header in the last 20 bytes (destination at 16..19).
bool grh_names_group(const uint8_t* grh, const PortInfo& port, const ibv_gid& mgid) {
  if (port.roce()) return std::memcmp(grh + 20 + 16, mgid.raw + 12, 4) == 0;
  return std::memcmp(grh + 24, mgid.raw, 16) == 0;
}

// One receiver's side of a datagram: byte_len, src_qp, IBV_WC_GRH, payload.
void expect_datagram(const ibv_wc& wc, uint64_t wr_id, uint32_t qpn, uint32_t src_qp, const uint8_t* slot,
                     size_t len, uint64_t seed, const PortInfo& port, const ibv_gid& mgid) {
  WcExpect want;
  want.wr_id = wr_id;
  want.opcode = IBV_WC_RECV;
  want.byte_len = kGrh + len;
  want.qp_num = qpn;
  want.src_qp = src_qp;
  EXPECT_TRUE(check_wc(wc, want));
  EXPECT_NE(0, wc.wc_flags & IBV_WC_GRH);
  EXPECT_TRUE(grh_names_group(slot, port, mgid)) << "the GRH's destination is the group";
  EXPECT_TRUE(expect_pattern(slot + kGrh, len, seed, "payload"));
}

// Two receivers in two processes get the same datagram; after one detaches,
// only the other gets the next one.
TEST(Mcast, EveryAttachedQpInEveryProcessReceives) {
  constexpr size_t kLen = 512;
  std::vector<ProcSpec> procs;
  procs.push_back({"sender", [&](Proc& p) {
                     auto ep = Endpoint::open();
                     ASSERT_NE(nullptr, ep);
                     TestQp* qp = ep->add_qp(ud_config());
                     ASSERT_NE(nullptr, qp);
                     ASSERT_TRUE(to_rts(*qp));
                     const ibv_gid mgid = group_gid(ep->port);
                     for (int r = 1; r <= 2; ++r) ASSERT_TRUE(p.link(r).send(qp->info()));
                     auto src = Region::create(ep->pd.get(), 4096);
                     ASSERT_NE(nullptr, src);
                     AhPtr ah = group_ah(*ep, mgid);
                     ASSERT_NE(nullptr, ah);
                     ASSERT_TRUE(p.barrier("attached"));
                     fill_pattern(src->data(), kLen, 0x3C01);
                     Wr first = group_send(1, src->sge(0, kLen), ah.get());
                     ASSERT_TRUE(run_wr(*qp, first));
                     ASSERT_TRUE(p.barrier("received"));
                     ASSERT_TRUE(p.barrier("detached"));
                     fill_pattern(src->data(), kLen, 0x3C02);
                     Wr second = group_send(2, src->sge(0, kLen), ah.get());
                     ASSERT_TRUE(run_wr(*qp, second));
                     ASSERT_TRUE(p.barrier("done"));
                   }});
  for (int r = 1; r <= 2; ++r) {
    procs.push_back({"receiver" + std::to_string(r), [&, r](Proc& p) {
                       auto ep = Endpoint::open();
                       ASSERT_NE(nullptr, ep);
                       TestQp* qp = ep->add_qp(ud_config());
                       ASSERT_NE(nullptr, qp);
                       ASSERT_TRUE(to_rts(*qp));
                       QpInfo sender;
                       ASSERT_TRUE(p.link(0).recv(&sender));
                       const ibv_gid mgid = group_gid(ep->port);
                       ASSERT_EQ(0, ibv_attach_mcast(qp->get(), &mgid, kMlid));
                       constexpr size_t kSlot = 4096;
                       auto dst = Region::create(ep->pd.get(), 2 * kSlot);
                       ASSERT_NE(nullptr, dst);
                       for (uint64_t k = 0; k < 2; ++k) ASSERT_TRUE(post_recv(*qp, 10 + k, {dst->sge(k * kSlot, kSlot)}));
                       ASSERT_TRUE(p.barrier("attached"));
                       ibv_wc wc{};
                       ASSERT_TRUE(poll_one(qp->recv_cq(), &wc, scaled(kOpTimeout), "for the group's datagram"));
                       expect_datagram(wc, 10, qp->qpn(), sender.qpn, dst->data(), kLen, 0x3C01, ep->port, mgid);
                       ASSERT_TRUE(p.barrier("received"));
                       if (r == 2) {
                         ASSERT_EQ(0, ibv_detach_mcast(qp->get(), &mgid, kMlid));
                       }
                       ASSERT_TRUE(p.barrier("detached"));
                       if (r == 1) {
                         ASSERT_TRUE(poll_one(qp->recv_cq(), &wc, scaled(kOpTimeout), "for the second datagram"));
                         expect_datagram(wc, 11, qp->qpn(), sender.qpn, dst->data() + kSlot, kLen, 0x3C02, ep->port,
                                         mgid);
                       } else {
                         EXPECT_TRUE(expect_no_completion(qp->recv_cq(), Millis(300), "once detached"));
                       }
                       ASSERT_TRUE(p.barrier("done"));
                     }});
  }
  run_procs(std::move(procs));
}

// A QP of the sender's process that is not in the group gets nothing; the
// sending QP, attached, gets its own datagram (mlx5's default) unless it was
// created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB.
TEST(Mcast, OnlyAttachedQpsReceiveAndSelfLoopbackCanBeBlocked) {
  run_solo("mcast", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    TestQp* looped = ep->add_qp(ud_config());
    TestQp* outside = ep->add_qp(ud_config());
    ASSERT_NE(nullptr, looped);
    ASSERT_NE(nullptr, outside);
    ASSERT_TRUE(to_rts(*looped));
    ASSERT_TRUE(to_rts(*outside));
    // A third QP, created with the flag, by hand (the fixture has no flags).
    CqPtr cq = create_cq(ep->ctx.get(), 64);
    ASSERT_NE(nullptr, cq);
    ibv_qp_init_attr_ex init{};
    init.qp_type = IBV_QPT_UD;
    init.send_cq = init.recv_cq = cq.get();
    init.cap.max_send_wr = init.cap.max_recv_wr = 8;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    init.pd = ep->pd.get();
    init.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
    QpPtr blocked(ibv_create_qp_ex(ep->ctx.get(), &init));
    ASSERT_NE(nullptr, blocked) << errno_name(errno);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = kPort;
    a.qkey = kQkey;
    ASSERT_EQ(0, ibv_modify_qp(blocked.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY));
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(0, ibv_modify_qp(blocked.get(), &a, IBV_QP_STATE));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    ASSERT_EQ(0, ibv_modify_qp(blocked.get(), &a, IBV_QP_STATE | IBV_QP_SQ_PSN));

    const ibv_gid mgid = group_gid(ep->port, 1);
    ASSERT_EQ(0, ibv_attach_mcast(looped->get(), &mgid, kMlid));
    ASSERT_EQ(0, ibv_attach_mcast(blocked.get(), &mgid, kMlid));
    auto buf = Region::create(ep->pd.get(), 4 * 4096);
    ASSERT_NE(nullptr, buf);
    ASSERT_TRUE(post_recv(*looped, 1, {buf->sge(0, 4096)}));
    ASSERT_TRUE(post_recv(*outside, 2, {buf->sge(4096, 4096)}));
    ibv_sge sge = buf->sge(2 * 4096, 4096);
    ibv_recv_wr rwr{};
    rwr.wr_id = 3;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(0, ibv_post_recv(blocked.get(), &rwr, &bad));
    AhPtr ah = group_ah(*ep, mgid);
    ASSERT_NE(nullptr, ah);
    auto src = Region::create(ep->pd.get(), 4096);
    ASSERT_NE(nullptr, src);

    // From the QP that blocks its own: only the other member gets it.
    fill_pattern(src->data(), 64, 0x5E1F);
    Wr w = group_send(7, src->sge(0, 64), ah.get());
    ibv_send_wr* bad_send = nullptr;
    ASSERT_EQ(0, ibv_post_send(blocked.get(), w.get(), &bad_send));
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(looped->recv_cq(), &wc, scaled(kOpTimeout), "at the other member"));
    expect_datagram(wc, 1, looped->qpn(), blocked->qp_num, buf->data(), 64, 0x5E1F, ep->port, mgid);
    // Its send completion, and nothing else on its CQ: no copy of its own.
    ASSERT_TRUE(poll_one(cq.get(), &wc, scaled(kOpTimeout), "for the send"));
    EXPECT_EQ(IBV_WC_SEND, wc.opcode);
    EXPECT_TRUE(expect_no_completion(cq.get(), Millis(200), "at the blocking sender"));

    // From the QP that does not block: it gets its own, and so does the other.
    ASSERT_TRUE(post_recv(*looped, 4, {buf->sge(3 * 4096, 4096)}));
    fill_pattern(src->data(), 64, 0x5E20);
    Wr back = group_send(8, src->sge(0, 64), ah.get());
    ASSERT_TRUE(run_wr(*looped, back));
    ASSERT_TRUE(poll_one(looped->recv_cq(), &wc, scaled(kOpTimeout), "the sender's own copy"));
    expect_datagram(wc, 4, looped->qpn(), looped->qpn(), buf->data() + 3 * 4096, 64, 0x5E20, ep->port, mgid);
    ASSERT_TRUE(poll_one(cq.get(), &wc, scaled(kOpTimeout), "at the blocking member"));
    expect_datagram(wc, 3, blocked->qp_num, looped->qpn(), buf->data() + 2 * 4096, 64, 0x5E20, ep->port, mgid);
    EXPECT_TRUE(expect_no_completion(outside->recv_cq(), Millis(200), "at the QP outside the group"));

    // One member leaves: the process stays in the group for the other (on
    // RoCE the IP group is left only with the last); a sender need not be in it.
    ASSERT_EQ(0, ibv_detach_mcast(blocked.get(), &mgid, kMlid));
    ASSERT_TRUE(post_recv(*looped, 5, {buf->sge(0, 4096)}));
    fill_pattern(src->data(), 64, 0x5E21);
    Wr from_outside = group_send(9, src->sge(0, 64), ah.get());
    ASSERT_TRUE(run_wr(*outside, from_outside));
    ASSERT_TRUE(poll_one(looped->recv_cq(), &wc, scaled(kOpTimeout), "at the member left"));
    expect_datagram(wc, 5, looped->qpn(), outside->qpn(), buf->data(), 64, 0x5E21, ep->port, mgid);
    EXPECT_TRUE(expect_no_completion(cq.get(), Millis(200), "at the QP that left"));

    // InfiniBand: by MLID alone, without a GRH (IBA 10.5.2.5: the switch
    // replicates by DLID); the receive still says which group (its MGID).
    if (!ep->port.roce()) {
      ibv_ah_attr by_lid{};
      by_lid.dlid = kMlid;
      by_lid.port_num = kPort;
      AhPtr lid_ah(ibv_create_ah(ep->pd.get(), &by_lid));
      ASSERT_NE(nullptr, lid_ah) << errno_name(errno);
      ASSERT_TRUE(post_recv(*looped, 6, {buf->sge(0, 4096)}));
      fill_pattern(src->data(), 64, 0x5E22);
      Wr by_mlid = group_send(10, src->sge(0, 64), lid_ah.get());
      ASSERT_TRUE(run_wr(*outside, by_mlid));
      ASSERT_TRUE(poll_one(looped->recv_cq(), &wc, scaled(kOpTimeout), "by MLID"));
      expect_datagram(wc, 6, looped->qpn(), outside->qpn(), buf->data(), 64, 0x5E22, ep->port, mgid);
    }
  });
}

// ibv_attach_mcast(3)'s errors, the limits ibv_query_device reports (and
// enforces), and a destroyed QP leaving its groups.
TEST(Mcast, AttachAndDetachErrorsAndLimits) {
  run_solo("mcast", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ASSERT_GT(ep->dev.max_mcast_grp, 0);
    ASSERT_GT(ep->dev.max_mcast_qp_attach, 0);
    EXPECT_GE(ep->dev.max_total_mcast_qp_attach, ep->dev.max_mcast_qp_attach);
    TestQp* ud = ep->add_qp(ud_config());
    TestQp* rc = ep->add_qp(QpConfig{});
    ASSERT_NE(nullptr, ud);
    ASSERT_NE(nullptr, rc);
    const ibv_gid mgid = group_gid(ep->port, 2);
    // Only UD QPs; only multicast GIDs; on InfiniBand only multicast LIDs.
    EXPECT_EQ(EINVAL, ibv_attach_mcast(rc->get(), &mgid, kMlid));
    EXPECT_EQ(EINVAL, ibv_attach_mcast(ud->get(), &ep->port.gid, kMlid));
    EXPECT_EQ(EINVAL, ibv_attach_mcast(ud->get(), nullptr, kMlid));
    if (!ep->port.roce()) {
      EXPECT_EQ(EINVAL, ibv_attach_mcast(ud->get(), &mgid, 0x12));
      EXPECT_EQ(EINVAL, ibv_attach_mcast(ud->get(), &mgid, 0xffff));
    }
    // Not in the group: EINVAL; attaching twice is one attachment.
    EXPECT_EQ(EINVAL, ibv_detach_mcast(ud->get(), &mgid, kMlid));
    EXPECT_EQ(0, ibv_attach_mcast(ud->get(), &mgid, kMlid));
    EXPECT_EQ(0, ibv_attach_mcast(ud->get(), &mgid, kMlid));
    EXPECT_EQ(0, ibv_detach_mcast(ud->get(), &mgid, kMlid));
    EXPECT_EQ(EINVAL, ibv_detach_mcast(ud->get(), &mgid, kMlid));

    // max_mcast_grp groups, then ENOMEM; a destroyed QP frees them all.
    const int groups = ep->dev.max_mcast_grp;
    for (int pass = 0; pass < 2; ++pass) {
      TestQp* q = ep->add_qp(ud_config());
      ASSERT_NE(nullptr, q);
      for (int g = 0; g < groups; ++g) {
        ibv_gid gid = group_gid(ep->port, 3);
        gid.raw[13] = static_cast<uint8_t>(g >> 8);
        gid.raw[14] = static_cast<uint8_t>(g);
        ASSERT_EQ(0, ibv_attach_mcast(q->get(), &gid, kMlid)) << "group " << g << ", pass " << pass;
      }
      ibv_gid one_more = group_gid(ep->port, 4);
      one_more.raw[13] = 0xee;
      EXPECT_EQ(ENOMEM, ibv_attach_mcast(q->get(), &one_more, kMlid));
      q->destroy();
    }
    // max_mcast_qp_attach QPs in one group, then ENOMEM.
    std::vector<TestQp*> members;
    for (int i = 0; i <= ep->dev.max_mcast_qp_attach; ++i) {
      TestQp* q = ep->add_qp(ud_config());
      ASSERT_NE(nullptr, q);
      members.push_back(q);
    }
    for (int i = 0; i < ep->dev.max_mcast_qp_attach; ++i)
      ASSERT_EQ(0, ibv_attach_mcast(members[static_cast<size_t>(i)]->get(), &mgid, kMlid)) << "QP " << i;
    EXPECT_EQ(ENOMEM, ibv_attach_mcast(members.back()->get(), &mgid, kMlid));
    EXPECT_EQ(0, ibv_detach_mcast(members.front()->get(), &mgid, kMlid));
    EXPECT_EQ(0, ibv_attach_mcast(members.back()->get(), &mgid, kMlid));
  });
}

}  // namespace
}  // namespace softverbs::integration
