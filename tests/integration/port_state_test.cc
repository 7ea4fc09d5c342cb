// The port's state as an external SM sets it (issue 19), seen through the
// verbs API: with SOFTVERBS_SM=none the port starts INIT with LID 0, and
// there the data path sends nothing (an RC requester ends in
// IBV_WC_RETRY_EXC_ERR, the request counted in PortXmitDiscards); Debian's
// ibportstate, through our libibumad, plays the SM (PortInfo Sets of the LID,
// ARMED, ACTIVE); the open context gets LID_CHANGE, SM_CHANGE and
// PORT_ACTIVE, the sysfs tree shows the new values, and data flows.
// Runs as the integration.port-state entry (SOFTVERBS_SM=none); elsewhere,
// or without infiniband-diags, it skips.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "debian_tools.h"
#include "harness.h"
#include "port_events_wait.h"
#include "sysfs_files.h"
#include "verbs_fixture.h"

extern "C" const char* ibv_get_sysfs_path(void);

namespace softverbs::integration {
namespace {

uint64_t xmit_discards() {
  std::string out;
  if (tool("perfquery", &out) != 0) return ~0ull;
  const size_t at = out.find("PortXmitDiscards:");
  if (at == std::string::npos) return ~0ull;
  const size_t digits = out.find_first_of("0123456789", at);
  return std::strtoull(out.c_str() + digits, nullptr, 10);
}

// An RC QP connected to itself, to `dlid`, with short timers (4.096 us * 2^8
// = 1 ms, one retry). Returns the send's completion status.
ibv_wc_status send_to_self(ibv_context* ctx, uint16_t dlid) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {4, 4, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &init);
  static char buf[64];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  ibv_wc_status result = IBV_WC_GENERAL_ERR;
  if (qp == nullptr || mr == nullptr) {
    ADD_FAILURE() << "QP or MR: " << errno_name(errno);
  } else {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    EXPECT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = qp->qp_num;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = dlid;
    a.ah_attr.port_num = 1;
    EXPECT_EQ(0, ibv_modify_qp(qp, &a,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 8;
    a.retry_cnt = 1;
    a.rnr_retry = 1;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    EXPECT_EQ(0, ibv_modify_qp(qp, &a,
                               IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                   IBV_QP_MAX_QP_RD_ATOMIC));
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 16, mr->lkey};
    ibv_recv_wr rwr{};
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    EXPECT_EQ(0, ibv_post_recv(qp, &rwr, &bad_r));
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(0, ibv_post_send(qp, &wr, &bad));
    Deadline d = Deadline::op();
    for (;;) {
      ibv_wc wc[2];
      const int n = ibv_poll_cq(cq, 2, wc);
      bool done = false;
      for (int i = 0; i < n; ++i)
        if (wc[i].wr_id == 7) result = wc[i].status, done = true;
      if (done) break;
      if (d.expired()) {
        ADD_FAILURE() << "no completion for the send";
        break;
      }
    }
  }
  if (mr != nullptr) ibv_dereg_mr(mr);
  if (qp != nullptr) ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  return result;
}

TEST(PortState, ExternalSmBringsThePortUp) {
  run_solo("solo", [](Proc&) {
    tools_use_our_libraries();
    if (!installed("ibportstate perfquery")) GTEST_SKIP() << "infiniband-diags is not installed";
    ContextPtr ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    ibv_port_attr port{};
    ASSERT_EQ(0, ibv_query_port(ctx.get(), 1, &port));
    if (port.state == IBV_PORT_ACTIVE) GTEST_SKIP() << "the port is ACTIVE: not the SOFTVERBS_SM=none entry";
    ASSERT_EQ(IBV_PORT_INIT, port.state);
    ASSERT_EQ(0, port.lid);
    const std::string dir = std::string(ibv_get_sysfs_path()) + "/class/infiniband/" +
                            ibv_get_device_name(ctx->device) + "/ports/1/";
    EXPECT_EQ("2: INIT", read_line(dir + "state"));
    EXPECT_EQ("0x0", read_line(dir + "lid"));

    // The SM's Sets: a LID (and the SM's LID) on the INIT port, then ARMED and ACTIVE.
    std::string out;
    ASSERT_EQ(0, tool("ibportstate -D 0 1 lid 5", &out)) << out;
    EXPECT_EQ((std::set<int>{IBV_EVENT_LID_CHANGE, IBV_EVENT_SM_CHANGE}),
              port_events(ctx.get(), {IBV_EVENT_LID_CHANGE, IBV_EVENT_SM_CHANGE}));
    EXPECT_EQ("0x5", read_line(dir + "lid"));
    EXPECT_EQ("2: INIT", read_line(dir + "state"));
    // No data on an INIT port, LID or not: the request is discarded at the
    // port (PortXmitDiscards, the send and its retry), the requester's
    // retries run out, as with the link down.
    const uint64_t discards = xmit_discards();
    ASSERT_NE(~0ull, discards) << "perfquery";
    EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, send_to_self(ctx.get(), 5));
    EXPECT_GE(xmit_discards(), discards + 2);
    ASSERT_EQ(0, tool("ibportstate -D 0 1 arm", &out)) << out;
    EXPECT_EQ("3: ARMED", read_line(dir + "state"));
    EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, send_to_self(ctx.get(), 5)) << "an ARMED port sends SMPs only";
    EXPECT_TRUE(port_events(ctx.get(), {}).empty()) << "ARMED raises nothing";
    ASSERT_EQ(0, tool("ibportstate -D 0 1 active", &out)) << out;
    EXPECT_EQ(std::set<int>{IBV_EVENT_PORT_ACTIVE}, port_events(ctx.get(), {IBV_EVENT_PORT_ACTIVE}));
    EXPECT_EQ("4: ACTIVE", read_line(dir + "state"));
    ASSERT_EQ(0, ibv_query_port(ctx.get(), 1, &port));
    EXPECT_EQ(IBV_PORT_ACTIVE, port.state);
    EXPECT_EQ(5, port.lid);
    EXPECT_EQ(IBV_WC_SUCCESS, send_to_self(ctx.get(), 5));

    // Leaving ACTIVE (DOWN restarts the link: INIT) is PORT_ERR.
    ASSERT_EQ(0, tool("ibportstate -D 0 1 down", &out)) << out;
    EXPECT_EQ(std::set<int>{IBV_EVENT_PORT_ERR}, port_events(ctx.get(), {IBV_EVENT_PORT_ERR}));
    EXPECT_EQ("2: INIT", read_line(dir + "state"));
  });
}

}  // namespace
}  // namespace softverbs::integration
