// The RDMA CM's API, end to end in one process on softverbs0, through our
// build/lib/librdmacm.so.1 (BUILD_RPATH): event channel semantics, the
// connection exchange with private data, the IBA limits, rejects, binding,
// rdma_destroy_id waiting for acks, and a QP made outside the CM
// (rdma_init_qp_attr, CONNECT_RESPONSE, rdma_establish).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "cm_events.h"

namespace {

using cm_test::expect_and_ack;
using cm_test::expect_event;
using cm_test::readable;


// Every test has its own ports: the device (and its port table) is shared
// by the tests of one run.
uint16_t next_port() {
  static uint16_t port = static_cast<uint16_t>(20000 + getpid() % 20000);
  return port++;
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

class CmApi : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ch_ = rdma_create_event_channel();
    client_ch_ = rdma_create_event_channel();
    ASSERT_NE(server_ch_, nullptr) << std::strerror(errno);
    ASSERT_NE(client_ch_, nullptr);
    port_ = next_port();
  }
  void TearDown() override {
    for (rdma_cm_id* id : {child_, client_, listener_}) {
      if (id == nullptr) continue;
      if (id->qp != nullptr) rdma_destroy_qp(id);
      rdma_destroy_id(id);
    }
    rdma_destroy_event_channel(client_ch_);
    rdma_destroy_event_channel(server_ch_);
  }

  void listen() {
    ASSERT_EQ(rdma_create_id(server_ch_, &listener_, this, RDMA_PS_TCP), 0);
    sockaddr_in a = loopback(port_);
    ASSERT_EQ(rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&a)), 0) << std::strerror(errno);
    ASSERT_EQ(rdma_listen(listener_, 8), 0);
  }

  // A client id with its address and route resolved (and a QP unless told).
  void resolve_client(bool with_qp = true) {
    ASSERT_EQ(rdma_create_id(client_ch_, &client_, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in dst = loopback(port_);
    ASSERT_EQ(rdma_resolve_addr(client_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    expect_and_ack(client_ch_, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_NE(client_->verbs, nullptr);
    ASSERT_NE(client_->pd, nullptr) << "librdmacm gives every id its device's PD";
    ASSERT_EQ(rdma_resolve_route(client_, 2000), 0);
    expect_and_ack(client_ch_, RDMA_CM_EVENT_ROUTE_RESOLVED);
    if (with_qp) create_qp(client_);
  }

  static void create_qp(rdma_cm_id* id) {
    ibv_qp_init_attr attr{};
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 1;
    ASSERT_EQ(rdma_create_qp(id, nullptr, &attr), 0) << std::strerror(errno);
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(id->qp, &a, IBV_QP_STATE, &init), 0);
    EXPECT_EQ(a.qp_state, IBV_QPS_INIT);
  }

  // The server's side of a request: the new id, with the event's private data.
  rdma_cm_id* take_request(std::vector<uint8_t>* data = nullptr) {
    rdma_cm_event* ev = expect_event(server_ch_, RDMA_CM_EVENT_CONNECT_REQUEST);
    if (ev == nullptr) return nullptr;
    EXPECT_EQ(ev->listen_id, listener_);
    EXPECT_NE(ev->id, listener_);
    EXPECT_EQ(ev->id->context, this) << "a request's id inherits the listener's context";
    if (data != nullptr) {
      const auto* p = static_cast<const uint8_t*>(ev->param.conn.private_data);
      data->assign(p, p + ev->param.conn.private_data_len);
    }
    child_ = ev->id;
    rdma_ack_cm_event(ev);
    return child_;
  }

  rdma_event_channel* server_ch_ = nullptr;
  rdma_event_channel* client_ch_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  rdma_cm_id* client_ = nullptr;
  rdma_cm_id* child_ = nullptr;
  uint16_t port_ = 0;
};

TEST_F(CmApi, TheChannelFdIsReadableExactlyWhileEventsAreQueued) {
  ASSERT_EQ(rdma_create_id(client_ch_, &client_, nullptr, RDMA_PS_TCP), 0);
  EXPECT_FALSE(readable(client_ch_->fd, 0));
  sockaddr_in dst = loopback(port_);
  ASSERT_EQ(rdma_resolve_addr(client_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  EXPECT_TRUE(readable(client_ch_->fd, 1000));
  EXPECT_TRUE(readable(client_ch_->fd, 0)) << "level-triggered: still readable";
  const int flags = fcntl(client_ch_->fd, F_GETFL);
  ASSERT_EQ(fcntl(client_ch_->fd, F_SETFL, flags | O_NONBLOCK), 0);
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(client_ch_, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(ev->id, client_);
  EXPECT_EQ(ev->status, 0);
  EXPECT_FALSE(readable(client_ch_->fd, 0));
  rdma_cm_event* none = nullptr;
  EXPECT_EQ(rdma_get_cm_event(client_ch_, &none), -1);
  EXPECT_EQ(errno, EAGAIN);
  rdma_ack_cm_event(ev);
}

TEST_F(CmApi, ConnectAcceptSendDisconnectWithPrivateData) {
  listen();
  resolve_client();
  std::vector<uint8_t> req_data(56);
  for (size_t i = 0; i < req_data.size(); ++i) req_data[i] = static_cast<uint8_t>(i + 1);
  rdma_conn_param cp{};
  cp.private_data = req_data.data();
  cp.private_data_len = static_cast<uint8_t>(req_data.size());
  cp.responder_resources = 2;
  cp.initiator_depth = 2;
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(client_, &cp), 0) << std::strerror(errno);

  std::vector<uint8_t> got;
  rdma_cm_id* child = take_request(&got);
  ASSERT_NE(child, nullptr);
  ASSERT_EQ(got.size(), 56u) << "56 bytes follow the CMA header in a REQ";
  EXPECT_EQ(got, req_data);
  EXPECT_EQ(ntohs(rdma_get_src_port(child)), port_);
  EXPECT_EQ(rdma_get_dst_port(child), rdma_get_src_port(client_));
  create_qp(child);

  std::vector<uint8_t> rep_data(196, 0xab);
  rdma_conn_param ap{};
  ap.private_data = rep_data.data();
  ap.private_data_len = static_cast<uint8_t>(rep_data.size());
  ap.responder_resources = 2;
  ap.initiator_depth = 2;
  ap.rnr_retry_count = 7;
  ASSERT_EQ(rdma_accept(child, &ap), 0) << std::strerror(errno);
  if (rdma_cm_event* ev = expect_event(client_ch_, RDMA_CM_EVENT_ESTABLISHED)) {
    ASSERT_GE(ev->param.conn.private_data_len, 196);
    EXPECT_EQ(std::memcmp(ev->param.conn.private_data, rep_data.data(), 196), 0);
    rdma_ack_cm_event(ev);
  }
  expect_and_ack(server_ch_, RDMA_CM_EVENT_ESTABLISHED);

  // The QPs are connected: a SEND goes through.
  char out[32] = "through the CM", in[32] = {};
  ibv_mr* smr = rdma_reg_msgs(client_, out, sizeof out);
  ibv_mr* rmr = rdma_reg_msgs(child, in, sizeof in);
  ASSERT_NE(smr, nullptr);
  ASSERT_NE(rmr, nullptr);
  ASSERT_EQ(rdma_post_recv(child, nullptr, in, sizeof in, rmr), 0);
  ASSERT_EQ(rdma_post_send(client_, nullptr, out, sizeof out, smr, 0), 0);
  ibv_wc wc{};
  ASSERT_EQ(rdma_get_send_comp(client_, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_EQ(rdma_get_recv_comp(child, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(in, out);
  rdma_dereg_mr(smr);
  rdma_dereg_mr(rmr);

  ASSERT_EQ(rdma_disconnect(client_), 0);
  expect_and_ack(client_ch_, RDMA_CM_EVENT_DISCONNECTED);
  expect_and_ack(server_ch_, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(rdma_disconnect(child), 0) << "already disconnected by the peer";
  expect_and_ack(client_ch_, RDMA_CM_EVENT_TIMEWAIT_EXIT);
  expect_and_ack(server_ch_, RDMA_CM_EVENT_TIMEWAIT_EXIT);
}

TEST_F(CmApi, PrivateDataOverTheIbaLimitsIsEinval) {
  listen();
  resolve_client();
  std::vector<uint8_t> big(200, 1);
  rdma_conn_param cp{};
  cp.private_data = big.data();
  cp.private_data_len = 57;
  EXPECT_EQ(rdma_connect(client_, &cp), -1);
  EXPECT_EQ(errno, EINVAL);
  cp.private_data_len = 0;
  ASSERT_EQ(rdma_connect(client_, &cp), 0);
  rdma_cm_id* child = take_request();
  ASSERT_NE(child, nullptr);
  rdma_conn_param ap{};
  ap.private_data = big.data();
  ap.private_data_len = 197;
  EXPECT_EQ(rdma_accept(child, &ap), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_reject(child, big.data(), 149), -1);
  EXPECT_EQ(errno, EINVAL);

  // A consumer reject reaches the client with its reason and private data.
  std::vector<uint8_t> why(148);
  for (size_t i = 0; i < why.size(); ++i) why[i] = static_cast<uint8_t>(0xff - i);
  ASSERT_EQ(rdma_reject(child, why.data(), static_cast<uint8_t>(why.size())), 0);
  if (rdma_cm_event* ev = expect_event(client_ch_, RDMA_CM_EVENT_REJECTED)) {
    EXPECT_EQ(ev->status, 28) << "IBA table 109: consumer reject";
    ASSERT_GE(ev->param.conn.private_data_len, 148);
    EXPECT_EQ(std::memcmp(ev->param.conn.private_data, why.data(), 148), 0);
    rdma_ack_cm_event(ev);
  }
}

TEST_F(CmApi, EceCallsCheckTheirArgumentsAsRdmaCore) {
  listen();
  resolve_client();
  ibv_ece ece{};
  EXPECT_EQ(rdma_set_local_ece(client_, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_get_remote_ece(client_, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_set_local_ece(client_, &ece), -1) << "vendor ID 0";
  EXPECT_EQ(errno, EINVAL);
  ece.vendor_id = 0x15b3;
  ece.comp_mask = 1;
  EXPECT_EQ(rdma_set_local_ece(client_, &ece), -1) << "an unknown comp_mask bit";
  EXPECT_EQ(errno, EINVAL);
  ece.comp_mask = 0;
  EXPECT_EQ(rdma_set_local_ece(client_, &ece), -1) << "an id with a QP the CM manages";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_get_remote_ece(client_, &ece), -1) << "an id with a QP the CM manages";
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(rdma_connect(client_, nullptr), 0);
  rdma_cm_id* child = take_request();
  ASSERT_NE(child, nullptr);
  ibv_ece remote{0xff, 0xff, 0xff};
  ASSERT_EQ(rdma_get_remote_ece(child, &remote), 0);
  EXPECT_EQ(remote.vendor_id, 0u) << "a QP the CM manages offers none (softverbs has no vendor options)";
  EXPECT_EQ(remote.options, 0u);
  EXPECT_EQ(remote.comp_mask, 0u);
  ASSERT_EQ(rdma_reject_ece(child, nullptr, 0), 0);
  if (rdma_cm_event* ev = expect_event(client_ch_, RDMA_CM_EVENT_REJECTED)) {
    EXPECT_EQ(ev->status, 35) << "IBA table 109: vendor option not supported";
    rdma_ack_cm_event(ev);
  }
}

// External QPs on both sides (rdma_set_local_ece(3)'s flow): the active
// side's ECE reaches the passive side in the REQ, the options it accepts
// come back in the REP.
TEST_F(CmApi, EceTravelsInTheReqAndTheRep) {
  listen();
  resolve_client(/*with_qp=*/false);
  ibv_cq* cq = ibv_create_cq(client_->verbs, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.cap.max_send_wr = init.cap.max_recv_wr = 2;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  init.qp_type = IBV_QPT_RC;
  ibv_qp* cqp = ibv_create_qp(client_->pd, &init);
  ibv_qp* sqp = ibv_create_qp(client_->pd, &init);
  ASSERT_NE(cqp, nullptr);
  ASSERT_NE(sqp, nullptr);
  ibv_ece mine{0x0002c9, 0x80000007, 0};
  ASSERT_EQ(rdma_set_local_ece(client_, &mine), 0) << std::strerror(errno);
  rdma_conn_param cp{};
  cp.qp_num = cqp->qp_num;
  ASSERT_EQ(rdma_connect(client_, &cp), 0);
  rdma_cm_id* child = take_request();
  ASSERT_NE(child, nullptr);
  ibv_ece got{};
  ASSERT_EQ(rdma_get_remote_ece(child, &got), 0);
  EXPECT_EQ(got.vendor_id, 0x0002c9u);
  EXPECT_EQ(got.options, 0x80000007u);
  ibv_ece accepted{0x0002c9, 0x80000005, 0};  // a subset of what was offered
  ASSERT_EQ(rdma_set_local_ece(child, &accepted), 0);
  rdma_conn_param ap{};
  ap.qp_num = sqp->qp_num;
  ASSERT_EQ(rdma_accept(child, &ap), 0);
  if (rdma_cm_event* ev = expect_event(client_ch_, RDMA_CM_EVENT_CONNECT_RESPONSE)) {
    EXPECT_EQ(ev->param.conn.qp_num, sqp->qp_num);
    rdma_ack_cm_event(ev);
  }
  got = {};
  ASSERT_EQ(rdma_get_remote_ece(client_, &got), 0);
  EXPECT_EQ(got.vendor_id, 0x0002c9u);
  EXPECT_EQ(got.options, 0x80000005u);
  ASSERT_EQ(rdma_establish(client_), 0);
  expect_and_ack(server_ch_, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_EQ(rdma_disconnect(client_), 0);
  expect_and_ack(client_ch_, RDMA_CM_EVENT_DISCONNECTED);
  expect_and_ack(server_ch_, RDMA_CM_EVENT_DISCONNECTED);
  ibv_destroy_qp(cqp);
  ibv_destroy_qp(sqp);
  ibv_destroy_cq(cq);
}

TEST_F(CmApi, NobodyListeningIsRejectedWithInvalidServiceId) {
  resolve_client();
  rdma_conn_param cp{};
  ASSERT_EQ(rdma_connect(client_, &cp), 0);
  if (rdma_cm_event* ev = expect_event(client_ch_, RDMA_CM_EVENT_REJECTED, 2000)) {
    EXPECT_EQ(ev->status, 8) << "IBA table 109: invalid service ID";
    rdma_ack_cm_event(ev);
  }
}

TEST_F(CmApi, AnAddressNobodyOwnsIsAnAddrError) {
  ASSERT_EQ(rdma_create_id(client_ch_, &client_, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = loopback(port_);
  inet_pton(AF_INET, "192.0.2.1", &dst.sin_addr);  // TEST-NET-1: on no device of this host
  ASSERT_EQ(rdma_resolve_addr(client_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  if (rdma_cm_event* ev = expect_event(client_ch_, RDMA_CM_EVENT_ADDR_ERROR)) {
    EXPECT_EQ(ev->status, -EHOSTUNREACH);
    rdma_ack_cm_event(ev);
  }
  EXPECT_EQ(rdma_resolve_route(client_, 2000), -1) << "no address, no route";
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(CmApi, APortIsBoundOnce) {
  listen();
  rdma_cm_id* other = nullptr;
  ASSERT_EQ(rdma_create_id(server_ch_, &other, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in a = loopback(port_);
  EXPECT_EQ(rdma_bind_addr(other, reinterpret_cast<sockaddr*>(&a)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  sockaddr_in eph = loopback(0);
  EXPECT_EQ(rdma_bind_addr(other, reinterpret_cast<sockaddr*>(&eph)), 0);
  EXPECT_NE(rdma_get_src_port(other), 0) << "port 0 takes an ephemeral port";
  sockaddr_in nobody{};
  nobody.sin_family = AF_INET;
  inet_pton(AF_INET, "192.0.2.1", &nobody.sin_addr);  // TEST-NET-1: no address of this host
  rdma_cm_id* third = nullptr;
  ASSERT_EQ(rdma_create_id(server_ch_, &third, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(rdma_bind_addr(third, reinterpret_cast<sockaddr*>(&nobody)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  rdma_destroy_id(third);
  rdma_destroy_id(other);
}

TEST_F(CmApi, DestroyIdWaitsForItsEventsToBeAcked) {
  ASSERT_EQ(rdma_create_id(client_ch_, &client_, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = loopback(port_);
  ASSERT_EQ(rdma_resolve_addr(client_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  rdma_cm_event* ev = expect_event(client_ch_, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(ev, nullptr);
  std::atomic<bool> destroyed{false};
  rdma_cm_id* id = client_;
  client_ = nullptr;
  std::thread t([&] {
    rdma_destroy_id(id);
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(destroyed) << "rdma_destroy_id returned with an event not acked";
  rdma_ack_cm_event(ev);
  t.join();
  EXPECT_TRUE(destroyed);
}

TEST_F(CmApi, AQpMadeElsewhereMovesThroughInitQpAttr) {
  listen();
  resolve_client(/*with_qp=*/false);
  ibv_cq* cq = ibv_create_cq(client_->verbs, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.cap.max_send_wr = init.cap.max_recv_wr = 2;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  init.qp_type = IBV_QPT_RC;
  ibv_qp* qp = ibv_create_qp(client_->pd, &init);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr a{};
  int mask = 0;
  a.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(rdma_init_qp_attr(client_, &a, &mask), 0);
  ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
  rdma_conn_param cp{};
  cp.qp_num = qp->qp_num;
  cp.responder_resources = cp.initiator_depth = 1;
  ASSERT_EQ(rdma_connect(client_, &cp), 0);
  rdma_cm_id* child = take_request();
  ASSERT_NE(child, nullptr);
  create_qp(child);
  ASSERT_EQ(rdma_accept(child, nullptr), 0);
  if (rdma_cm_event* ev = expect_event(client_ch_, RDMA_CM_EVENT_CONNECT_RESPONSE)) {
    EXPECT_EQ(ev->param.conn.qp_num, child->qp->qp_num);
    rdma_ack_cm_event(ev);
  }
  for (ibv_qp_state s : {IBV_QPS_RTR, IBV_QPS_RTS}) {
    a = {};
    a.qp_state = s;
    ASSERT_EQ(rdma_init_qp_attr(client_, &a, &mask), 0);
    if (s == IBV_QPS_RTR) {
      EXPECT_EQ(a.dest_qp_num, child->qp->qp_num);
    }
    ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0) << "to state " << s;
  }
  ASSERT_EQ(rdma_establish(client_), 0);
  expect_and_ack(server_ch_, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_EQ(rdma_disconnect(child), 0);
  expect_and_ack(server_ch_, RDMA_CM_EVENT_DISCONNECTED);
  expect_and_ack(client_ch_, RDMA_CM_EVENT_DISCONNECTED);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}

// The peer sends one message and disconnects while the receiver has not
// polled it: DISCONNECTED waits for that poll (cm/held_disconnect.h), so a
// consumer that destroys its QP on DISCONNECTED (ofi_rxm) does not lose the
// message with the QP's completions.
class CmHeldDisconnect : public CmApi {
 protected:
  // Connects, then the client sends `in_` one message, which the server has
  // a receive for, and disconnects once its send completed.
  void send_then_disconnect() {
    listen();
    resolve_client();
    rdma_conn_param cp{};
    cp.retry_count = cp.rnr_retry_count = 7;
    ASSERT_EQ(rdma_connect(client_, &cp), 0);
    rdma_cm_id* child = take_request();
    ASSERT_NE(child, nullptr);
    create_qp(child);
    rmr_ = rdma_reg_msgs(child, in_, sizeof in_);
    ASSERT_NE(rmr_, nullptr);
    ASSERT_EQ(rdma_post_recv(child, nullptr, in_, sizeof in_, rmr_), 0);
    ASSERT_EQ(rdma_accept(child, nullptr), 0);
    expect_and_ack(client_ch_, RDMA_CM_EVENT_ESTABLISHED);
    expect_and_ack(server_ch_, RDMA_CM_EVENT_ESTABLISHED);
    char out[16] = "last words";
    ibv_mr* smr = rdma_reg_msgs(client_, out, sizeof out);
    ASSERT_NE(smr, nullptr);
    ASSERT_EQ(rdma_post_send(client_, nullptr, out, sizeof out, smr, 0), 0);
    ibv_wc wc{};
    ASSERT_EQ(rdma_get_send_comp(client_, &wc), 1);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << "the message sits in the server's CQ";
    rdma_dereg_mr(smr);
    ASSERT_EQ(rdma_disconnect(client_), 0);
    disconnected_at_ = std::chrono::steady_clock::now();
    expect_and_ack(client_ch_, RDMA_CM_EVENT_DISCONNECTED);
  }
  void TearDown() override {
    if (rmr_ != nullptr) rdma_dereg_mr(rmr_);
    CmApi::TearDown();
  }
  char in_[16] = {};
  ibv_mr* rmr_ = nullptr;
  std::chrono::steady_clock::time_point disconnected_at_;
};

TEST_F(CmHeldDisconnect, DisconnectedWaitsForThePollOfWhatCameBefore) {
  send_then_disconnect();
  EXPECT_FALSE(readable(server_ch_->fd, 150)) << "DISCONNECTED before the receive was polled";
  ibv_wc wc{};
  ASSERT_EQ(ibv_poll_cq(child_->recv_cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(in_, "last words");
  EXPECT_TRUE(readable(server_ch_->fd, 2000)) << "the poll released DISCONNECTED";
  expect_and_ack(server_ch_, RDMA_CM_EVENT_DISCONNECTED);
}

TEST_F(CmHeldDisconnect, AnUnpolledCqHoldsItHalfASecondAtMost) {
  send_then_disconnect();
  expect_and_ack(server_ch_, RDMA_CM_EVENT_DISCONNECTED);
  const auto waited = std::chrono::steady_clock::now() - disconnected_at_;
  EXPECT_GE(waited, std::chrono::milliseconds(450));
  EXPECT_LT(waited, std::chrono::milliseconds(3000));
  ibv_wc wc{};
  ASSERT_EQ(ibv_poll_cq(child_->recv_cq, 1, &wc), 1) << "the completion is still there";
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

TEST_F(CmHeldDisconnect, RdmaDisconnectReleasesIt) {
  send_then_disconnect();
  // The DREQ came and the hold began (its bound is 500 ms away): the
  // application's own disconnect ends it well before that.
  EXPECT_FALSE(readable(server_ch_->fd, 100));
  ASSERT_EQ(rdma_disconnect(child_), 0);
  EXPECT_TRUE(readable(server_ch_->fd, 250)) << "the application went down itself";
  expect_and_ack(server_ch_, RDMA_CM_EVENT_DISCONNECTED);
}

TEST(CmDevices, GetDevicesGivesTheContextsIdsUse) {
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_GE(n, 1);
  EXPECT_EQ(list[n], nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0) << "synchronous id";
  sockaddr_in a = loopback(next_port());
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)), 0);
  EXPECT_EQ(id->verbs, list[0]);
  rdma_destroy_id(id);
  rdma_free_devices(list);
}

}  // namespace
