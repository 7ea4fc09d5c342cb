// RDMA CM multicast on softverbs0, in one process through our
// librdmacm.so.1: joins deliver MULTICAST_JOIN with the group's address
// handle, datagrams sent to it reach the other members intact, a leave (or
// destroying the id, or a send-only join) takes the QP out, and bad joins
// fail as the kernel's rdma_cm fails them.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "cm_events.h"

namespace {

using cm_test::expect_event;

constexpr uint32_t kUdpQkey = 0x01234567;
constexpr size_t kGrh = 40;

sockaddr_in ipv4(const char* text) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, text, &a.sin_addr);
  return a;
}
sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

// One completion of `cq` within `ms`, or false.
bool poll_one(ibv_cq* cq, ibv_wc* wc, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n != 0) return n == 1;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

// A UD id of 127.0.0.1 resolved to a group, with a QP and a registered buffer.
struct Member {
  rdma_cm_id* id = nullptr;
  ibv_mr* mr = nullptr;
  char buf[kGrh + 256]{};

  void make(rdma_event_channel* ch, sockaddr_in group, bool own_cq = false) {
    ASSERT_EQ(rdma_create_id(ch, &id, this, RDMA_PS_UDP), 0);
    sockaddr_in src = ipv4("127.0.0.1");
    ASSERT_EQ(rdma_resolve_addr(id, sa(src), sa(group), 2000), 0) << std::strerror(errno);
    if (rdma_cm_event* ev = expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED)) rdma_ack_cm_event(ev);
    ASSERT_NE(id->verbs, nullptr);
    ibv_qp_init_attr attr{};
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 8;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    attr.qp_type = IBV_QPT_UD;
    attr.sq_sig_all = 1;
    if (own_cq) {
      cq = ibv_create_cq(id->verbs, 16, nullptr, nullptr, 0);
      ASSERT_NE(cq, nullptr);
      attr.send_cq = attr.recv_cq = cq;
    }
    ASSERT_EQ(rdma_create_qp(id, nullptr, &attr), 0) << std::strerror(errno);
    mr = ibv_reg_mr(id->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
  }
  void post_recv() {
    ASSERT_EQ(rdma_post_recv(id, nullptr, buf, sizeof buf, mr), 0);
  }
  void destroy() {
    if (mr != nullptr) ibv_dereg_mr(mr);
    if (id != nullptr) {
      if (id->qp != nullptr) rdma_destroy_qp(id);
      rdma_destroy_id(id);
    }
    if (cq != nullptr) ibv_destroy_cq(cq);
    mr = nullptr;
    id = nullptr;
    cq = nullptr;
  }
  ibv_cq* cq = nullptr;
};

class CmMcast : public ::testing::Test {
 protected:
  void SetUp() override {
    ch_ = rdma_create_event_channel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override {
    if (ah_ != nullptr) ibv_destroy_ah(ah_);
    a_.destroy();
    b_.destroy();
    rdma_destroy_event_channel(ch_);
  }

  // Joins `m` and checks MULTICAST_JOIN; keeps its param.ud.
  void join(Member& m, sockaddr_in group, uint32_t flags = RDMA_MC_JOIN_FLAG_FULLMEMBER) {
    rdma_cm_join_mc_attr_ex attr{};
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    attr.join_flags = flags;
    attr.addr = sa(group);
    int marker = 0;
    ASSERT_EQ(rdma_join_multicast_ex(m.id, &attr, &marker), 0) << std::strerror(errno);
    rdma_cm_event* ev = expect_event(ch_, RDMA_CM_EVENT_MULTICAST_JOIN);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->id, m.id);
    EXPECT_EQ(ev->status, 0);
    EXPECT_EQ(ev->param.ud.private_data, &marker) << "the join's context comes back";
    EXPECT_EQ(ev->param.ud.qp_num, 0xffffffu);
    EXPECT_EQ(ev->param.ud.qkey, kUdpQkey);
    ud_ = ev->param.ud;
    rdma_ack_cm_event(ev);
  }

  void send_from_a(const std::string& text) {
    if (ah_ == nullptr) ah_ = ibv_create_ah(a_.id->pd, &ud_.ah_attr);
    ASSERT_NE(ah_, nullptr) << std::strerror(errno);
    std::memcpy(a_.buf, text.data(), text.size());
    ibv_sge sge{reinterpret_cast<uintptr_t>(a_.buf), static_cast<uint32_t>(text.size()), a_.mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud.ah = ah_;
    wr.wr.ud.remote_qpn = ud_.qp_num;
    wr.wr.ud.remote_qkey = ud_.qkey;
    ASSERT_EQ(ibv_post_send(a_.id->qp, &wr, &bad), 0);
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(a_.id->send_cq, &wc, 2000));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  }

  // Whether b receives `text` from a's QP within `ms`.
  bool b_receives(const std::string& text, int ms) {
    ibv_wc wc{};
    if (!poll_one(b_.id->recv_cq, &wc, ms)) return false;
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.byte_len, kGrh + text.size());
    EXPECT_EQ(wc.src_qp, a_.id->qp->qp_num);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
    EXPECT_EQ(std::string(b_.buf + kGrh, text.size()), text);
    return true;
  }

  rdma_event_channel* ch_ = nullptr;
  Member a_, b_;
  rdma_ud_param ud_{};
  ibv_ah* ah_ = nullptr;
};

TEST_F(CmMcast, JoinSendReceiveLeave) {
  sockaddr_in group = ipv4("239.1.2.3");
  ASSERT_NO_FATAL_FAILURE(a_.make(ch_, group));
  ASSERT_NO_FATAL_FAILURE(b_.make(ch_, group));
  ASSERT_NO_FATAL_FAILURE(b_.post_recv());
  ASSERT_NO_FATAL_FAILURE(join(b_, group));
  ASSERT_NO_FATAL_FAILURE(join(a_, group));
  // The kernel's IB answer for an RDMA_PS_UDP id: the IPoIB MGID with the
  // RDMA CM's signature, a multicast LID, a GRH.
  char mgid[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, ud_.ah_attr.grh.dgid.raw, mgid, sizeof mgid);
  EXPECT_STREQ(mgid, "ff12:4001:ffff::f01:203");
  EXPECT_EQ(ud_.ah_attr.is_global, 1);
  EXPECT_GE(ud_.ah_attr.dlid, 0xc000);
  EXPECT_LT(ud_.ah_attr.dlid, 0xffff);

  errno = 0;
  EXPECT_EQ(rdma_join_multicast(a_.id, sa(group), nullptr), -1);
  EXPECT_EQ(errno, EADDRINUSE) << "a second join of one address on one id";

  ASSERT_NO_FATAL_FAILURE(send_from_a("to the group"));
  EXPECT_TRUE(b_receives("to the group", 2000));

  ASSERT_EQ(rdma_leave_multicast(b_.id, sa(group)), 0) << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(rdma_leave_multicast(b_.id, sa(group)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  ASSERT_NO_FATAL_FAILURE(b_.post_recv());
  ASSERT_NO_FATAL_FAILURE(send_from_a("after the leave"));
  EXPECT_FALSE(b_receives("after the leave", 300)) << "a member that left still receives";

  // Joining again works, and receives again.
  ASSERT_NO_FATAL_FAILURE(join(b_, group));
  ASSERT_NO_FATAL_FAILURE(send_from_a("back again"));
  EXPECT_TRUE(b_receives("back again", 2000));
}

TEST_F(CmMcast, ASendOnlyMemberReceivesNothing) {
  sockaddr_in group = ipv4("239.1.2.4");
  ASSERT_NO_FATAL_FAILURE(a_.make(ch_, group));
  ASSERT_NO_FATAL_FAILURE(b_.make(ch_, group));
  ASSERT_NO_FATAL_FAILURE(b_.post_recv());
  ASSERT_NO_FATAL_FAILURE(join(b_, group, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER));
  ASSERT_NO_FATAL_FAILURE(join(a_, group, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER));
  ASSERT_NO_FATAL_FAILURE(send_from_a("nobody listens"));
  EXPECT_FALSE(b_receives("nobody listens", 300));
}

TEST_F(CmMcast, DestroyingTheIdLeavesItsGroups) {
  sockaddr_in group = ipv4("239.1.2.5");
  ASSERT_NO_FATAL_FAILURE(a_.make(ch_, group));
  ASSERT_NO_FATAL_FAILURE(b_.make(ch_, group, /*own_cq=*/true));
  ASSERT_NO_FATAL_FAILURE(join(b_, group));
  ASSERT_NO_FATAL_FAILURE(join(a_, group));
  // The QP outlives its id (CQs of its own: rdma_destroy_id leaves it).
  ibv_qp* qp = b_.id->qp;
  ASSERT_NO_FATAL_FAILURE(b_.post_recv());
  ASSERT_EQ(rdma_destroy_id(b_.id), 0);
  b_.id = nullptr;
  ASSERT_NO_FATAL_FAILURE(send_from_a("to a destroyed id"));
  ibv_wc wc{};
  EXPECT_FALSE(poll_one(b_.cq, &wc, 300)) << "the QP of a destroyed id is still in the group";
  ibv_destroy_qp(qp);
}

TEST_F(CmMcast, BadJoinsFailAsTheKernelsDo) {
  sockaddr_in group = ipv4("239.1.2.6");
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_UDP), 0);
  errno = 0;
  EXPECT_EQ(rdma_join_multicast(id, sa(group), nullptr), -1);
  EXPECT_EQ(errno, EINVAL) << "an id of no device yet";

  sockaddr_in local = ipv4("127.0.0.1");
  ASSERT_EQ(rdma_bind_addr(id, sa(local)), 0) << std::strerror(errno);
  sockaddr_in unicast = ipv4("127.0.0.2");
  errno = 0;
  EXPECT_EQ(rdma_join_multicast(id, sa(unicast), nullptr), -1);
  EXPECT_EQ(errno, EINVAL) << "not a multicast address";
  sockaddr_storage ib{};
  ib.ss_family = AF_IB;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&ib), nullptr), -1);
  EXPECT_EQ(errno, EAFNOSUPPORT);

  rdma_cm_join_mc_attr_ex attr{};
  attr.addr = sa(group);
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(id, &attr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL) << "no join flags";
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(id, &attr, nullptr), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  attr.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
  errno = 0;
  EXPECT_EQ(rdma_join_multicast_ex(id, &attr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);

  // Bound, without a QP: the join is made, nothing to attach.
  ASSERT_EQ(rdma_join_multicast(id, sa(group), nullptr), 0) << std::strerror(errno);
  if (rdma_cm_event* ev = expect_event(ch_, RDMA_CM_EVENT_MULTICAST_JOIN)) rdma_ack_cm_event(ev);
  ASSERT_EQ(rdma_leave_multicast(id, sa(group)), 0);
  rdma_destroy_id(id);

  // A connected port space has no multicast.
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_bind_addr(id, sa(local)), 0);
  errno = 0;
  EXPECT_EQ(rdma_join_multicast(id, sa(group), nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_destroy_id(id);
}

}  // namespace
