// Device, port, GID and P_Key queries; the QP state machine through
// ibv_modify_qp (the RC table of ibv_modify_qp(3) and IBA 10.3.1 / 11.2.4.2);
// ibv_query_qp; object lifetime rules (EBUSY); MR keys.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

TEST(Objects, DeviceListOpenCloseRepeated) {
  run_solo("solo", [](Proc&) {
    for (int round = 0; round < 20; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      int num = -1;
      ibv_device** list = ibv_get_device_list(&num);
      ASSERT_NE(nullptr, list) << errno_name(errno);
      ASSERT_GE(num, 1);
      EXPECT_EQ(nullptr, list[num]) << "the device list is NULL-terminated";
      ibv_device* dev = nullptr;
      for (int i = 0; i < num; ++i) {
        if (std::strcmp(ibv_get_device_name(list[i]), device_name()) == 0) dev = list[i];
      }
      ASSERT_NE(nullptr, dev);
      EXPECT_NE(0u, ibv_get_device_guid(dev));
      ibv_context* a = ibv_open_device(dev);
      ibv_context* b = ibv_open_device(dev);  // two contexts at once
      ASSERT_NE(nullptr, a);
      ASSERT_NE(nullptr, b);
      EXPECT_NE(a, b);
      EXPECT_EQ(dev, a->device);
      ibv_device_attr attr{};
      EXPECT_EQ(0, ibv_query_device(a, &attr));
      EXPECT_EQ(0, ibv_query_device(b, &attr));
      ibv_pd* pd = ibv_alloc_pd(b);
      ASSERT_NE(nullptr, pd);
      EXPECT_EQ(0, ibv_dealloc_pd(pd));
      EXPECT_EQ(0, ibv_close_device(a));
      EXPECT_EQ(0, ibv_close_device(b));
      ibv_free_device_list(list);
    }
  });
}

TEST(Objects, QueryDevice) {
  run_solo("solo", [](Proc&) {
    auto ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    ibv_device_attr a{};
    ASSERT_EQ(0, ibv_query_device(ctx.get(), &a));
    EXPECT_GT(a.max_qp, 0);
    EXPECT_GT(a.max_qp_wr, 0);
    EXPECT_GT(a.max_sge, 0);
    EXPECT_GT(a.max_cq, 0);
    EXPECT_GT(a.max_cqe, 0);
    EXPECT_GT(a.max_mr, 0);
    EXPECT_GT(a.max_pd, 0);
    EXPECT_GE(a.max_mr_size, uint64_t{4 * kMiB});
    EXPECT_GE(a.max_qp_rd_atom, 1);
    EXPECT_GE(a.max_qp_init_rd_atom, 1);
    EXPECT_EQ(IBV_ATOMIC_HCA, a.atomic_cap);
    EXPECT_GE(a.phys_port_cnt, 1);
    EXPECT_NE(0u, a.node_guid);
    EXPECT_NE(0u, a.page_size_cap & 4096) << "4 KiB pages";
  });
}

TEST(Objects, QueryPortGidPkey) {
  run_solo("solo", [](Proc&) {
    auto ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    ibv_port_attr pa{};
    ASSERT_EQ(0, ibv_query_port(ctx.get(), kPort, &pa));
    EXPECT_EQ(IBV_PORT_ACTIVE, pa.state);
    EXPECT_EQ(IBV_MTU_4096, pa.active_mtu);
    EXPECT_GE(pa.max_mtu, IBV_MTU_4096);
    EXPECT_NE(0, pa.lid);
    EXPECT_EQ(IBV_LINK_LAYER_INFINIBAND, pa.link_layer);
    EXPECT_GE(pa.gid_tbl_len, 1);
    EXPECT_GE(pa.pkey_tbl_len, 1);
    EXPECT_GE(pa.max_msg_sz, uint32_t{4 * kMiB});
    ibv_port_attr none{};
    EXPECT_NE(0, ibv_query_port(ctx.get(), 0, &none)) << "port 0";
    EXPECT_NE(0, ibv_query_port(ctx.get(), 2, &none)) << "port 2";

    ibv_gid gid{};
    ASSERT_EQ(0, ibv_query_gid(ctx.get(), kPort, 0, &gid));
    const uint8_t link_local[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0};
    EXPECT_EQ(0, std::memcmp(gid.raw, link_local, 8)) << "GID 0 has the fe80::/64 prefix";
    uint64_t interface_id = 0;
    std::memcpy(&interface_id, gid.raw + 8, 8);
    EXPECT_NE(0u, interface_id) << "GID 0's interface ID is the port GUID";
    EXPECT_NE(0, ibv_query_gid(ctx.get(), kPort, pa.gid_tbl_len, &gid)) << "index past the GID table";
    EXPECT_NE(0, ibv_query_gid(ctx.get(), 2, 0, &gid)) << "port 2";

    __be16 pkey = 0;
    ASSERT_EQ(0, ibv_query_pkey(ctx.get(), kPort, 0, &pkey));
    EXPECT_EQ(0xFFFF, ntohs(pkey)) << "P_Key 0 is the default partition, full member";
    EXPECT_NE(0, ibv_query_pkey(ctx.get(), kPort, pa.pkey_tbl_len, &pkey)) << "index past the P_Key table";
    EXPECT_EQ(0, ibv_get_pkey_index(ctx.get(), kPort, htons(0xFFFF)));
  });
}

// ---- the QP state machine -----------------------------------------------------

struct Sm {
  std::unique_ptr<Endpoint> ep;
  TestQp* qp = nullptr;
  TestQp* peer = nullptr;  // a second QP to aim at
};

bool make_sm(Sm* sm) {
  sm->ep = Endpoint::open();
  if (!sm->ep) return false;
  sm->qp = sm->ep->add_qp(QpConfig{});
  sm->peer = sm->ep->add_qp(QpConfig{});
  return sm->qp != nullptr && sm->peer != nullptr;
}

ibv_qp_attr init_attr() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = kPort;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  return a;
}
constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

ibv_qp_attr rtr_attr(const Sm& sm) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = sm.peer->qpn();
  a.rq_psn = 0x123456;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = sm.ep->port.attr.lid;
  a.ah_attr.port_num = kPort;
  return a;
}
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

ibv_qp_attr rts_attr() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0x654321;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return a;
}
constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_MAX_QP_RD_ATOMIC;

// ibv_modify_qp must fail with EINVAL and leave the state as it was
// (ibv_modify_qp(3): "none of the attributes will be modified").
void expect_rejected(TestQp& qp, ibv_qp_attr attr, int mask, const std::string& what) {
  const ibv_qp_state before = qp.state();
  const int rc = ibv_modify_qp(qp.get(), &attr, mask);
  EXPECT_EQ(EINVAL, rc) << what << ": " << errno_name(rc);
  EXPECT_EQ(before, qp.state()) << what << ": the state changed";
  EXPECT_EQ(before, qp.get()->state) << what << ": ibv_qp::state changed";
}

void expect_accepted(TestQp& qp, ibv_qp_attr attr, int mask, ibv_qp_state want, const std::string& what) {
  const int rc = ibv_modify_qp(qp.get(), &attr, mask);
  EXPECT_EQ(0, rc) << what << ": " << errno_name(rc);
  EXPECT_EQ(want, qp.state()) << what;
  EXPECT_EQ(want, qp.get()->state) << what << ": ibv_qp::state (libibverbs keeps it current)";
}

// Each bit of `mask` except IBV_QP_STATE left out in turn must be rejected.
void expect_each_required(TestQp& qp, const ibv_qp_attr& attr, int mask, const char* transition) {
  for (int bit = 1; bit < 31; ++bit) {
    const int flag = 1 << bit;
    if ((mask & flag) == 0) continue;
    expect_rejected(qp, attr, mask & ~flag,
                    std::string(transition) + " without attribute bit " + std::to_string(bit));
  }
}

TEST(Objects, QpStateMachineValidTransitions) {
  run_solo("solo", [](Proc&) {
    Sm sm;
    ASSERT_TRUE(make_sm(&sm));
    TestQp& qp = *sm.qp;
    EXPECT_EQ(IBV_QPS_RESET, qp.state());
    EXPECT_EQ(IBV_QPS_RESET, qp.get()->state);
    expect_accepted(qp, init_attr(), kInitMask, IBV_QPS_INIT, "RESET->INIT");
    ibv_qp_attr a = init_attr();
    a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
    expect_accepted(qp, a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, IBV_QPS_INIT, "INIT->INIT with new access flags");
    expect_accepted(qp, rtr_attr(sm), kRtrMask, IBV_QPS_RTR, "INIT->RTR");
    expect_accepted(qp, rts_attr(), kRtsMask, IBV_QPS_RTS, "RTR->RTS");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.min_rnr_timer = 20;
    expect_accepted(qp, a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER, IBV_QPS_RTS, "RTS->RTS with min_rnr_timer");
    a = {};
    a.qp_state = IBV_QPS_ERR;
    expect_accepted(qp, a, IBV_QP_STATE, IBV_QPS_ERR, "RTS->ERR");
    a.qp_state = IBV_QPS_RESET;
    expect_accepted(qp, a, IBV_QP_STATE, IBV_QPS_RESET, "ERR->RESET");
    a.qp_state = IBV_QPS_ERR;
    expect_accepted(qp, a, IBV_QP_STATE, IBV_QPS_ERR, "RESET->ERR");
    a.qp_state = IBV_QPS_RESET;
    expect_accepted(qp, a, IBV_QP_STATE, IBV_QPS_RESET, "ERR->RESET again");
    expect_accepted(qp, init_attr(), kInitMask, IBV_QPS_INIT, "RESET->INIT again");
    a = {};
    a.qp_state = IBV_QPS_RESET;
    expect_accepted(qp, a, IBV_QP_STATE, IBV_QPS_RESET, "INIT->RESET");
    expect_accepted(qp, init_attr(), kInitMask, IBV_QPS_INIT, "RESET->INIT");
    expect_accepted(qp, rtr_attr(sm), kRtrMask, IBV_QPS_RTR, "INIT->RTR");
    a.qp_state = IBV_QPS_ERR;
    expect_accepted(qp, a, IBV_QP_STATE, IBV_QPS_ERR, "RTR->ERR");
  });
}

TEST(Objects, QpStateMachineInvalidTransitions) {
  run_solo("solo", [](Proc&) {
    Sm sm;
    ASSERT_TRUE(make_sm(&sm));
    TestQp& qp = *sm.qp;
    // From RESET.
    expect_rejected(qp, rtr_attr(sm), kRtrMask, "RESET->RTR");
    expect_rejected(qp, rts_attr(), kRtsMask, "RESET->RTS");
    expect_each_required(qp, init_attr(), kInitMask, "RESET->INIT");
    ibv_qp_attr a = init_attr();
    a.sq_psn = 1;
    expect_rejected(qp, a, kInitMask | IBV_QP_SQ_PSN, "RESET->INIT with SQ_PSN (not allowed here)");
    expect_rejected(qp, init_attr(), kInitMask | (1 << 30), "an unknown attribute mask bit");
    a = init_attr();
    a.port_num = 0;
    expect_rejected(qp, a, kInitMask, "RESET->INIT with port 0");
    a.port_num = 2;
    expect_rejected(qp, a, kInitMask, "RESET->INIT with port 2");
    a = init_attr();
    a.pkey_index = static_cast<uint16_t>(sm.ep->port.attr.pkey_tbl_len);
    expect_rejected(qp, a, kInitMask, "RESET->INIT with a P_Key index past the table");
    a = init_attr();
    const uint32_t undefined_state = 42;  // as a C caller could pass it
    std::memcpy(&a.qp_state, &undefined_state, sizeof undefined_state);
    expect_rejected(qp, a, kInitMask, "an undefined target state");

    // From INIT.
    expect_accepted(qp, init_attr(), kInitMask, IBV_QPS_INIT, "RESET->INIT");
    expect_rejected(qp, rts_attr(), kRtsMask, "INIT->RTS");
    expect_each_required(qp, rtr_attr(sm), kRtrMask, "INIT->RTR");
    a = rtr_attr(sm);
    a.sq_psn = 1;
    expect_rejected(qp, a, kRtrMask | IBV_QP_SQ_PSN, "INIT->RTR with SQ_PSN (an RTS attribute)");
    a = rtr_attr(sm);
    a.path_mtu = static_cast<ibv_mtu>(6);
    expect_rejected(qp, a, kRtrMask, "INIT->RTR with an undefined path MTU");
    a = rtr_attr(sm);
    a.max_dest_rd_atomic = static_cast<uint8_t>(std::min(255, sm.ep->dev.max_qp_rd_atom + 1));
    if (sm.ep->dev.max_qp_rd_atom < 255) {
      expect_rejected(qp, a, kRtrMask, "INIT->RTR with max_dest_rd_atomic > max_qp_rd_atom");
    }
    a = rtr_attr(sm);
    a.min_rnr_timer = 32;
    expect_rejected(qp, a, kRtrMask, "INIT->RTR with min_rnr_timer 32 (5-bit field)");

    // From RTR.
    expect_accepted(qp, rtr_attr(sm), kRtrMask, IBV_QPS_RTR, "INIT->RTR");
    a = init_attr();
    expect_rejected(qp, a, kInitMask, "RTR->INIT");
    expect_each_required(qp, rts_attr(), kRtsMask, "RTR->RTS");
    a = rts_attr();
    a.retry_cnt = 8;
    expect_rejected(qp, a, kRtsMask, "RTR->RTS with retry_cnt 8 (3-bit field)");
    a = rts_attr();
    a.rnr_retry = 8;
    expect_rejected(qp, a, kRtsMask, "RTR->RTS with rnr_retry 8 (3-bit field)");
    a = rts_attr();
    a.timeout = 32;
    expect_rejected(qp, a, kRtsMask, "RTR->RTS with timeout 32 (5-bit field)");
    a = rts_attr();
    a.max_rd_atomic = static_cast<uint8_t>(std::min(255, sm.ep->dev.max_qp_init_rd_atom + 1));
    if (sm.ep->dev.max_qp_init_rd_atom < 255) {
      expect_rejected(qp, a, kRtsMask, "RTR->RTS with max_rd_atomic > max_qp_init_rd_atom");
    }

    // From RTS.
    expect_accepted(qp, rts_attr(), kRtsMask, IBV_QPS_RTS, "RTR->RTS");
    expect_rejected(qp, rtr_attr(sm), kRtrMask, "RTS->RTR");
    expect_rejected(qp, init_attr(), kInitMask, "RTS->INIT");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.dest_qp_num = 1;
    expect_rejected(qp, a, IBV_QP_STATE | IBV_QP_DEST_QPN, "RTS->RTS changing DEST_QPN");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.path_mtu = IBV_MTU_256;
    expect_rejected(qp, a, IBV_QP_STATE | IBV_QP_PATH_MTU, "RTS->RTS changing PATH_MTU");

    // From ERR: only RESET (and ERR) are reachable.
    a = {};
    a.qp_state = IBV_QPS_ERR;
    expect_accepted(qp, a, IBV_QP_STATE, IBV_QPS_ERR, "RTS->ERR");
    expect_rejected(qp, init_attr(), kInitMask, "ERR->INIT");
    expect_rejected(qp, rts_attr(), kRtsMask, "ERR->RTS");
  });
}

// ibv_query_qp returns what was set (ibv_query_qp(3)), and the init
// attributes the QP was created with.
TEST(Objects, QueryQpReturnsWhatWasSet) {
  run_solo("solo", [](Proc&) {
    Sm sm;
    ASSERT_TRUE(make_sm(&sm));
    TestQp& qp = *sm.qp;
    ibv_qp* q = qp.get();
    EXPECT_EQ(IBV_QPT_RC, q->qp_type);
    EXPECT_EQ(sm.ep->pd.get(), q->pd);
    EXPECT_EQ(sm.ep->ctx.get(), q->context);
    EXPECT_EQ(qp.send_cq(), q->send_cq);
    EXPECT_EQ(qp.recv_cq(), q->recv_cq);
    EXPECT_EQ(sm.qp, q->qp_context);
    EXPECT_NE(0u, q->qp_num);
    EXPECT_EQ(0u, q->qp_num & 0xFF000000u) << "QP numbers are 24 bits";
    EXPECT_NE(sm.qp->qpn(), sm.peer->qpn());

    ibv_qp_attr a = init_attr();
    ASSERT_EQ(0, ibv_modify_qp(q, &a, kInitMask));
    a = rtr_attr(sm);
    a.min_rnr_timer = 17;
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, sm.ep->port.gid.raw, 16);
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 3;
    a.ah_attr.sl = 0;
    ASSERT_EQ(0, ibv_modify_qp(q, &a, kRtrMask));
    ibv_qp_attr r = rts_attr();
    r.timeout = 11;
    r.retry_cnt = 5;
    r.rnr_retry = 6;
    ASSERT_EQ(0, ibv_modify_qp(q, &r, kRtsMask));

    // Filled with a byte no checked field holds, so that each check below
    // sees what ibv_query_qp wrote, not what the test left there.
    ibv_qp_attr got;
    ibv_qp_init_attr init;
    std::memset(&got, 0xA5, sizeof got);
    std::memset(&init, 0xA5, sizeof init);
    const int all = kInitMask | kRtrMask | kRtsMask | IBV_QP_CAP;
    ASSERT_EQ(0, ibv_query_qp(q, &got, all, &init));
    EXPECT_EQ(IBV_QPS_RTS, got.qp_state);
    EXPECT_EQ(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, static_cast<int>(got.qp_access_flags));
    EXPECT_EQ(0, got.pkey_index);
    EXPECT_EQ(kPort, got.port_num);
    EXPECT_EQ(IBV_MTU_1024, got.path_mtu);
    EXPECT_EQ(sm.peer->qpn(), got.dest_qp_num);
    EXPECT_EQ(0x123456u, got.rq_psn);
    EXPECT_EQ(0x654321u, got.sq_psn);
    EXPECT_EQ(1, got.max_dest_rd_atomic);
    EXPECT_EQ(1, got.max_rd_atomic);
    EXPECT_EQ(17, got.min_rnr_timer);
    EXPECT_EQ(11, got.timeout);
    EXPECT_EQ(5, got.retry_cnt);
    EXPECT_EQ(6, got.rnr_retry);
    EXPECT_EQ(sm.ep->port.attr.lid, got.ah_attr.dlid);
    EXPECT_EQ(kPort, got.ah_attr.port_num);
    EXPECT_EQ(1, got.ah_attr.is_global);
    EXPECT_EQ(0, std::memcmp(got.ah_attr.grh.dgid.raw, sm.ep->port.gid.raw, 16));
    EXPECT_EQ(3, got.ah_attr.grh.hop_limit);
    EXPECT_EQ(0, got.ah_attr.grh.sgid_index);
    EXPECT_EQ(0, got.ah_attr.sl);
    EXPECT_GE(got.cap.max_send_wr, 64u);
    EXPECT_GE(got.cap.max_recv_wr, 64u);
    EXPECT_EQ(qp.cap().max_send_wr, got.cap.max_send_wr);
    EXPECT_EQ(qp.cap().max_recv_wr, got.cap.max_recv_wr);
    EXPECT_EQ(IBV_QPT_RC, init.qp_type);
    EXPECT_EQ(qp.send_cq(), init.send_cq);
    EXPECT_EQ(qp.recv_cq(), init.recv_cq);
    EXPECT_EQ(nullptr, init.srq);
    EXPECT_EQ(1, init.sq_sig_all);
    EXPECT_EQ(qp.cap().max_send_sge, init.cap.max_send_sge);
    EXPECT_EQ(qp.cap().max_recv_sge, init.cap.max_recv_sge);
  });
}

// Resources still in use cannot be destroyed: ibv_dealloc_pd with an MR or a
// QP, ibv_destroy_cq with a QP attached, ibv_close_device is not tested with
// live objects (undefined). All return EBUSY and leave the object usable.
TEST(Objects, DestroyInUseIsBusy) {
  run_solo("solo", [](Proc&) {
    auto ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    PortInfo port;
    ASSERT_TRUE(query_port_info(ctx.get(), &port));
    PdPtr pd(ibv_alloc_pd(ctx.get()));
    ASSERT_NE(nullptr, pd);
    Buffer buf(4096);
    MrPtr mr(ibv_reg_mr(pd.get(), buf.data(), 4096, IBV_ACCESS_LOCAL_WRITE));
    ASSERT_NE(nullptr, mr);
    EXPECT_EQ(EBUSY, ibv_dealloc_pd(pd.get())) << "dealloc_pd with a live MR";
    mr.reset();
    auto qp = TestQp::create(ctx.get(), pd.get(), port, QpConfig{});
    ASSERT_NE(nullptr, qp);
    EXPECT_EQ(EBUSY, ibv_dealloc_pd(pd.get())) << "dealloc_pd with a live QP";
    EXPECT_EQ(EBUSY, ibv_destroy_cq(qp->send_cq())) << "destroy_cq with a QP attached";
    EXPECT_EQ(EBUSY, ibv_destroy_cq(qp->recv_cq())) << "destroy_cq with a QP attached";
    // Everything still works.
    EXPECT_TRUE(qp->to_init());
    qp.reset();
    EXPECT_EQ(0, ibv_dealloc_pd(pd.release()));
  });
}

// Every registration gets new keys — also of the same buffer, and after a
// deregistration; the MR fields describe the registration.
TEST(Objects, MrKeysAndFields) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    Buffer buf(65536);
    std::set<uint32_t> rkeys;
    std::set<uint32_t> lkeys;
    std::vector<MrPtr> live;
    for (int i = 0; i < 24; ++i) {
      const size_t offset = (i % 3) * 4096;
      const size_t len = 4096 * (1 + i % 4);
      MrPtr mr(ibv_reg_mr(ep->pd.get(), buf.data() + offset, len, kAllAccess));
      ASSERT_NE(nullptr, mr) << errno_name(errno);
      EXPECT_EQ(buf.data() + offset, mr->addr);
      EXPECT_EQ(len, mr->length);
      EXPECT_EQ(ep->pd.get(), mr->pd);
      EXPECT_EQ(ep->ctx.get(), mr->context);
      EXPECT_TRUE(rkeys.insert(mr->rkey).second) << "rkey " << mr->rkey << " issued twice";
      EXPECT_TRUE(lkeys.insert(mr->lkey).second) << "lkey " << mr->lkey << " issued twice";
      if (i % 2 == 0) {
        live.push_back(std::move(mr));  // keep half; the rest are deregistered at once
      }
    }
  });
}

// Many objects, created and destroyed three times over: nothing leaks.
TEST(Objects, ManyObjectsCreatedAndDestroyed) {
  run_solo("solo", [](Proc&) {
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      auto ep = Endpoint::open();
      ASSERT_NE(nullptr, ep);
      std::vector<PdPtr> pds;
      for (int i = 0; i < 32; ++i) {
        pds.emplace_back(ibv_alloc_pd(ep->ctx.get()));
        ASSERT_NE(nullptr, pds.back());
      }
      std::vector<std::unique_ptr<Region>> mrs;
      for (int i = 0; i < 128; ++i) {
        mrs.push_back(Region::create(pds[i % 32].get(), 4096));
        ASSERT_NE(nullptr, mrs.back());
      }
      const int qps = std::min(64, std::max(2, ep->dev.max_qp / 4));
      for (int i = 0; i < qps; ++i) {
        ASSERT_NE(nullptr, ep->add_qp(QpConfig{.max_send_wr = 16, .max_recv_wr = 16, .cq_depth = 32}));
      }
      for (int i = 0; i + 1 < qps; i += 2) {
        ASSERT_TRUE(connect_local(ep->qp(i), ep->qp(i + 1)));
      }
      ep->qps.clear();
      mrs.clear();
    }
  });
}

// CQ sizes: at least what was asked for; the context and cq_context kept.
TEST(Objects, CqBasics) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    int token = 0;
    CqPtr small(ibv_create_cq(ep->ctx.get(), 1, &token, nullptr, 0));
    ASSERT_NE(nullptr, small);
    EXPECT_GE(small->cqe, 1);
    EXPECT_EQ(ep->ctx.get(), small->context);
    EXPECT_EQ(&token, small->cq_context);
    CqPtr largest(ibv_create_cq(ep->ctx.get(), ep->dev.max_cqe, nullptr, nullptr, 0));
    ASSERT_NE(nullptr, largest) << "a CQ of max_cqe " << ep->dev.max_cqe << ": " << errno_name(errno);
    EXPECT_GE(largest->cqe, ep->dev.max_cqe);
    ibv_wc wc{};
    EXPECT_EQ(0, ibv_poll_cq(small.get(), 1, &wc)) << "an empty CQ";
  });
}

// ibv_destroy_qp takes the QP's unpolled completions out of the CQs it
// shares with other QPs, as rdma-core's mlx4/mlx5 providers do; the other
// QPs' completions stay, in order. Regression: libfabric's verbs provider
// frees a MSG endpoint's WR contexts with its QP, and ofi_rxm crashed on a
// receive of a destroyed QP polled afterwards (issue 17).
TEST(Objects, DestroyQpRemovesItsCompletions) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    CqPtr cq = create_cq(ep->ctx.get(), 64);
    ASSERT_NE(nullptr, cq);
    QpConfig config;
    TestQp* a = ep->add_qp(config, cq.get(), cq.get());
    TestQp* b = ep->add_qp(config, cq.get(), cq.get());
    ASSERT_TRUE(a && b && connect_local(*a, *b));
    auto mem = Region::create(ep->pd.get(), 4096);
    ASSERT_NE(nullptr, mem);
    const uint32_t qpn_a = a->qpn(), qpn_b = b->qpn();
    // Unpolled: a's SEND (id 1) and b's receive of it (id 2), a's receive
    // of b's SEND (id 3) and b's SEND (id 4), a receive of b posted but
    // never used (id 5).
    ASSERT_TRUE(post_recv(*b, 2, {mem->sge(0, 64)}));
    ASSERT_TRUE(post_recv(*b, 5, {mem->sge(1024, 64)}));
    ASSERT_TRUE(post_recv(*a, 3, {mem->sge(2048, 64)}));
    Wr to_b = wr_send(1, {mem->sge(512, 64)});
    ASSERT_TRUE(post(*a, to_b));
    Wr to_a = wr_send(4, {mem->sge(1536, 64)});
    ASSERT_TRUE(post(*b, to_a));
    auto it = std::find_if(ep->qps.begin(), ep->qps.end(), [a](const auto& q) { return q.get() == a; });
    ASSERT_NE(ep->qps.end(), it);
    ep->qps.erase(it);  // ibv_destroy_qp(a)
    std::vector<ibv_wc> wcs;
    ASSERT_TRUE(poll_n(cq.get(), 2, &wcs, scaled(kOpTimeout), "b's completions"));
    EXPECT_TRUE(check_wc(wcs[0], {.wr_id = 2, .opcode = IBV_WC_RECV, .byte_len = 64, .qp_num = qpn_b}));
    EXPECT_TRUE(check_wc(wcs[1], {.wr_id = 4, .opcode = IBV_WC_SEND, .qp_num = qpn_b}));
    EXPECT_TRUE(expect_no_completion(cq.get(), Millis(50), "a completion of the destroyed QP"));
    for (const ibv_wc& wc : wcs) EXPECT_NE(qpn_a, wc.qp_num);
    ep->qps.clear();  // before the CQ they use
  });
}

}  // namespace
}  // namespace softverbs::integration
