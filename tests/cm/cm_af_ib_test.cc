// IB addresses (AF_IB, struct sockaddr_ib) through our librdmacm.so.1 on
// softverbs0: rdma_getaddrinfo's RAI_FAMILY conversion of a GID, binding by
// GID and service ID, a connection whose REQ carries no CMA header (all 92
// bytes of private data are the consumer's), and the ids' addresses.
#include <arpa/inet.h>
#include <endian.h>
#include <gtest/gtest.h>
#include <infiniband/ib.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "cm_events.h"

namespace {

using cm_test::expect_and_ack;
using cm_test::expect_event;

uint16_t next_port() {
  static uint16_t port = static_cast<uint16_t>(40000 + getpid() % 20000);
  return port++;
}

// softverbs0's port GID (the InfiniBand device; a RoCE one takes no AF_IB).
bool ib_gid(ibv_gid* out) {
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  bool found = false;
  for (int i = 0; i < n && !found; ++i) {
    ibv_port_attr pa{};
    if (ibv_query_port(list[i], 1, &pa) != 0 || pa.link_layer == IBV_LINK_LAYER_ETHERNET) continue;
    found = ibv_query_gid(list[i], 1, 0, out) == 0;
  }
  rdma_free_devices(list);
  return found;
}

sockaddr_ib ib_addr(const ibv_gid& gid, uint64_t sid, uint64_t mask) {
  sockaddr_ib a{};
  a.sib_family = AF_IB;
  a.sib_pkey = htobe16(0xffff);
  std::memcpy(&a.sib_addr, gid.raw, 16);
  a.sib_sid = htobe64(sid);
  a.sib_sid_mask = htobe64(mask);
  return a;
}

const sockaddr_ib* as_ib(const sockaddr* sa) { return reinterpret_cast<const sockaddr_ib*>(sa); }

class CmAfIb : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ib_gid(&gid_)) << "no InfiniBand device";
    server_ch_ = rdma_create_event_channel();
    client_ch_ = rdma_create_event_channel();
    ASSERT_NE(server_ch_, nullptr);
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

  static void create_qp(rdma_cm_id* id) {
    ibv_qp_init_attr attr{};
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    attr.qp_type = IBV_QPT_RC;
    ASSERT_EQ(rdma_create_qp(id, nullptr, &attr), 0) << std::strerror(errno);
  }

  ibv_gid gid_{};
  rdma_event_channel* server_ch_ = nullptr;
  rdma_event_channel* client_ch_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  rdma_cm_id* client_ = nullptr;
  rdma_cm_id* child_ = nullptr;
  uint16_t port_ = 0;
};

TEST_F(CmAfIb, GetaddrinfoReadsAGidAsAnIbAddress) {
  char text[INET6_ADDRSTRLEN];
  ASSERT_NE(inet_ntop(AF_INET6, gid_.raw, text, sizeof text), nullptr);
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST | RAI_FAMILY;
  hints.ai_family = AF_IB;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(text, "7471", &hints, &res), 0);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->ai_family, AF_IB);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  ASSERT_NE(res->ai_dst_addr, nullptr);
  EXPECT_EQ(res->ai_dst_len, socklen_t(sizeof(sockaddr_ib)));
  const sockaddr_ib* sib = as_ib(res->ai_dst_addr);
  EXPECT_EQ(sib->sib_family, AF_IB);
  EXPECT_EQ(std::memcmp(&sib->sib_addr, gid_.raw, 16), 0);
  EXPECT_EQ(be16toh(sib->sib_pkey), 0xffff);
  EXPECT_EQ(be64toh(sib->sib_sid), RDMA_IB_IP_PS_TCP | 7471) << "(port space << 16) | port";
  EXPECT_EQ(be64toh(sib->sib_sid_mask), RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
  rdma_freeaddrinfo(res);

  hints.ai_flags |= RAI_PASSIVE;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, "7471", &hints, &res), 0);
  ASSERT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_src_addr->sa_family, AF_IB) << "a passive wildcard: the zero GID";
  rdma_freeaddrinfo(res);
}

TEST_F(CmAfIb, BindingChecksTheGidAndTheServiceId) {
  ASSERT_EQ(rdma_create_id(server_ch_, &listener_, nullptr, RDMA_PS_TCP), 0);
  ibv_gid other = gid_;
  other.raw[15] ^= 0x5a;
  sockaddr_ib a = ib_addr(other, RDMA_IB_IP_PS_TCP | port_, RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
  EXPECT_EQ(rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&a)), -1) << "a GID of no port";
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  a = ib_addr(gid_, RDMA_IB_IP_PS_UDP | port_, RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
  EXPECT_EQ(rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&a)), -1) << "a UDP service for a TCP id";
  EXPECT_EQ(errno, EPROTONOSUPPORT);
  a = ib_addr(gid_, RDMA_IB_IP_PS_TCP, RDMA_IB_IP_PS_MASK);
  ASSERT_EQ(rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&a)), 0) << std::strerror(errno);
  const uint16_t eph = be16toh(rdma_get_src_port(listener_));
  EXPECT_NE(eph, 0) << "no port: an ephemeral one";
  const sockaddr_ib* bound = as_ib(rdma_get_local_addr(listener_));
  EXPECT_EQ(bound->sib_family, AF_IB);
  EXPECT_EQ(be64toh(bound->sib_sid), RDMA_IB_IP_PS_TCP | eph);
  EXPECT_EQ(be64toh(bound->sib_sid_mask), ~uint64_t{0});
  EXPECT_NE(listener_->verbs, nullptr);
}

TEST_F(CmAfIb, ConnectsWithAllOfTheReqPrivateData) {
  ASSERT_EQ(rdma_create_id(server_ch_, &listener_, this, RDMA_PS_TCP), 0);
  sockaddr_ib a = ib_addr(gid_, RDMA_IB_IP_PS_TCP | port_, RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
  ASSERT_EQ(rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&a)), 0) << std::strerror(errno);
  ASSERT_EQ(rdma_listen(listener_, 4), 0);

  ASSERT_EQ(rdma_create_id(client_ch_, &client_, nullptr, RDMA_PS_TCP), 0);
  ibv_gid far = gid_;
  far.raw[0] ^= 0x40;  // another subnet prefix: no port reaches it
  sockaddr_ib away = ib_addr(far, RDMA_IB_IP_PS_TCP | port_, RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
  EXPECT_EQ(rdma_resolve_addr(client_, nullptr, reinterpret_cast<sockaddr*>(&away), 2000), -1);
  EXPECT_EQ(errno, ENODEV);
  ASSERT_EQ(rdma_resolve_addr(client_, nullptr, reinterpret_cast<sockaddr*>(&a), 2000), 0) << std::strerror(errno);
  expect_and_ack(client_ch_, RDMA_CM_EVENT_ADDR_RESOLVED);
  const sockaddr_ib* src = as_ib(rdma_get_local_addr(client_));
  EXPECT_EQ(src->sib_family, AF_IB);
  EXPECT_EQ(std::memcmp(&src->sib_addr, gid_.raw, 16), 0) << "the source is the port's GID";
  EXPECT_EQ(be64toh(src->sib_sid) & RDMA_IB_IP_PS_MASK, RDMA_IB_IP_PS_TCP);
  ASSERT_EQ(rdma_resolve_route(client_, 2000), 0);
  expect_and_ack(client_ch_, RDMA_CM_EVENT_ROUTE_RESOLVED);
  create_qp(client_);

  std::vector<uint8_t> data(92);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + 1);
  std::vector<uint8_t> big(93);
  rdma_conn_param cp{};
  cp.private_data = big.data();
  cp.private_data_len = 93;
  EXPECT_EQ(rdma_connect(client_, &cp), -1) << "93 bytes: over a REQ's 92";
  EXPECT_EQ(errno, EINVAL);
  cp.private_data = data.data();
  cp.private_data_len = 92;
  ASSERT_EQ(rdma_connect(client_, &cp), 0) << "92 bytes: an AF_IB REQ has no CMA header";

  rdma_cm_event* ev = expect_event(server_ch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(ev, nullptr);
  child_ = ev->id;
  EXPECT_EQ(ev->listen_id, listener_);
  ASSERT_EQ(ev->param.conn.private_data_len, 92);
  EXPECT_EQ(std::memcmp(ev->param.conn.private_data, data.data(), 92), 0);
  rdma_ack_cm_event(ev);
  const sockaddr_ib* local = as_ib(rdma_get_local_addr(child_));
  const sockaddr_ib* peer = as_ib(rdma_get_peer_addr(child_));
  EXPECT_EQ(local->sib_family, AF_IB);
  EXPECT_EQ(peer->sib_family, AF_IB);
  EXPECT_EQ(std::memcmp(&local->sib_addr, gid_.raw, 16), 0);
  EXPECT_EQ(std::memcmp(&peer->sib_addr, gid_.raw, 16), 0);
  EXPECT_EQ(be64toh(local->sib_sid), RDMA_IB_IP_PS_TCP | port_) << "the REQ's service ID";
  EXPECT_EQ(be16toh(rdma_get_src_port(child_)), port_);
  create_qp(child_);
  ASSERT_EQ(rdma_accept(child_, nullptr), 0);
  expect_and_ack(client_ch_, RDMA_CM_EVENT_ESTABLISHED);
  expect_and_ack(server_ch_, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_EQ(rdma_disconnect(client_), 0);
  expect_and_ack(client_ch_, RDMA_CM_EVENT_DISCONNECTED);
  expect_and_ack(server_ch_, RDMA_CM_EVENT_DISCONNECTED);
}

}  // namespace
