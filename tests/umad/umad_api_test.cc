// libibumad.so.3's contract as rdma-core documents it (umad_*(3)), on the
// default device: discovery, agents, MADs to the port's own SMA/PMA, TIDs,
// ENOSPC, timeouts, and an fd that poll and a blocking read wake on.
#include <infiniband/umad.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kMad = 256;
using Clock = std::chrono::steady_clock;

struct Buffer {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(umad_size() + kMad);
  void* umad() { return bytes.data(); }
  uint8_t* mad() { return static_cast<uint8_t*>(umad_get_mad(umad())); }
};

uint64_t be64_at(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

// A Get of `attr` in `mgmt_class` (0x81: directed route to this port).
Buffer request(uint8_t mgmt_class, uint16_t attr, uint64_t tid, uint16_t dlid = 1) {
  Buffer b;
  uint8_t* m = b.mad();
  m[0] = 1;
  m[1] = mgmt_class;
  m[2] = 1;
  m[3] = 0x01;
  for (int i = 0; i < 8; ++i) m[8 + i] = static_cast<uint8_t>(tid >> (56 - 8 * i));
  m[16] = static_cast<uint8_t>(attr >> 8);
  m[17] = static_cast<uint8_t>(attr);
  if (mgmt_class == 0x81) {
    m[32] = m[33] = m[34] = m[35] = 0xff;  // DrSLID, DrDLID permissive
  } else if (mgmt_class == 0x04) {
    m[64 + 1] = 1;  // PortSelect
  }
  umad_set_addr(b.umad(), dlid, mgmt_class == 0x04 ? 1 : 0, 0, mgmt_class == 0x04 ? 0x80010000 : 0);
  return b;
}

// The device segment and what lives beside it go when the tests are done.
class RemoveSegment : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* path = getenv("SOFTVERBS_DEVICE_PATH");
    if (path == nullptr) return;
    for (const char* suffix : {"", ".pma"}) unlink((std::string(path) + suffix).c_str());
    // The agents' registry (umad_agents_test.cc) and the SA joins
    // (sa_joins.cc): their locks; every process's file went with it.
    for (const char* dir : {".agents", ".sa-joins"}) {
      const std::string d = std::string(path) + dir;
      unlink((d + "/.lock").c_str());
      rmdir(d.c_str());
    }
  }
};
const ::testing::Environment* const kRemoveSegment = ::testing::AddGlobalTestEnvironment(new RemoveSegment);

class Umad : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(umad_init(), 0);
    fd_ = umad_open_port(nullptr, 0);
    ASSERT_GE(fd_, 0) << fd_;
  }
  void TearDown() override {
    if (fd_ >= 0) {
      EXPECT_EQ(umad_close_port(fd_), 0);
    }
    umad_done();
  }
  int fd_ = -1;
};

TEST(UmadDiscovery, CaAndPortAsTheDeviceReportsThem) {
  char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
  ASSERT_EQ(umad_get_cas_names(names, UMAD_MAX_DEVICES), 1);
  EXPECT_STREQ(names[0], "softverbs0");
  umad_ca_t ca;
  ASSERT_EQ(umad_get_ca(nullptr, &ca), 0);
  EXPECT_STREQ(ca.ca_name, "softverbs0");
  EXPECT_EQ(ca.node_type, 1u);
  EXPECT_EQ(ca.numports, 1);
  ASSERT_NE(ca.ports[1], nullptr);
  EXPECT_EQ(ca.ports[0], nullptr);
  EXPECT_EQ(ca.ports[1]->state, 4u);
  EXPECT_EQ(ca.ports[1]->phys_state, 5u);
  EXPECT_EQ(ca.ports[1]->base_lid, 1u);
  EXPECT_EQ(ca.ports[1]->sm_lid, 1u);
  EXPECT_STREQ(ca.ports[1]->link_layer, "InfiniBand");
  ASSERT_EQ(ca.ports[1]->pkeys_size, 32u);  // NodeInfo:PartitionCap, ibv_query_port's pkey_tbl_len
  EXPECT_EQ(ca.ports[1]->pkeys[0], 0xffff);
  EXPECT_EQ(ca.ports[1]->pkeys[1], 0);
  __be64 guids[4];
  ASSERT_EQ(umad_get_ca_portguids("softverbs0", guids, 4), 2);
  EXPECT_EQ(guids[0], 0u);
  EXPECT_EQ(guids[1], ca.ports[1]->port_guid);
  EXPECT_EQ(umad_get_ca_portguids("softverbs0", guids, 1), -ENOMEM);
  EXPECT_EQ(umad_release_ca(&ca), 0);

  umad_port_t port;
  ASSERT_EQ(umad_get_port("softverbs0", 1, &port), 0);
  EXPECT_EQ(port.portnum, 1);
  EXPECT_EQ(umad_release_port(&port), 0);
  EXPECT_EQ(umad_get_port("softverbs0", 2, &port), -EINVAL);
  EXPECT_EQ(umad_get_ca("mlx5_0", &ca), -ENODEV);
  EXPECT_EQ(umad_open_port("mlx5_0", 1), -ENODEV);

  umad_device_node* list = umad_get_ca_device_list();
  ASSERT_NE(list, nullptr);
  EXPECT_STREQ(list->ca_name, "softverbs0");
  EXPECT_EQ(list->next, nullptr);
  EXPECT_EQ(umad_sort_ca_device_list(&list, 1), 0);
  umad_free_ca_device_list(list);
}

TEST_F(Umad, AgentsRegisterAndUnregister) {
  long mask[16 / sizeof(long)] = {};
  const int a = umad_register(fd_, 0x81, 1, 0, mask);
  const int b = umad_register(fd_, 0x04, 1, 0, mask);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(a, b);
  uint8_t oui[3] = {0, 0x14, 0x05};
  EXPECT_EQ(umad_register_oui(fd_, 0x09, 0, oui, mask), -EINVAL);  // not an OUI class
  EXPECT_GE(umad_register_oui(fd_, 0x30, 0, oui, mask), 0);
  umad_reg_attr attr = {};
  attr.mgmt_class = 0x01;
  attr.mgmt_class_version = 1;
  uint32_t id = 99;
  EXPECT_EQ(umad_register2(fd_, &attr, &id), 0);
  EXPECT_LT(id, 99u);
  EXPECT_EQ(umad_unregister(fd_, a), 0);
  EXPECT_EQ(umad_unregister(fd_, a), -EINVAL);
  Buffer req = request(0x81, 0x0011, 1);
  EXPECT_EQ(umad_send(fd_, a, req.umad(), kMad, 100, 0), -EINVAL);  // unregistered
  EXPECT_EQ(umad_send(fd_ + 1000, b, req.umad(), kMad, 100, 0), -EINVAL);
  EXPECT_EQ(umad_register(fd_ + 1000, 0x81, 1, 0, mask), -EINVAL);
}

TEST_F(Umad, DirectedRouteNodeInfoKeepsTheTransaction) {
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd_, 0x81, 1, 0, mask);
  ASSERT_GE(agent, 0);
  Buffer req = request(0x81, 0x0011, 0x0102030405060708ull);
  EXPECT_EQ(umad_poll(fd_, 0), -ETIMEDOUT);  // nothing queued yet
  ASSERT_EQ(umad_send(fd_, agent, req.umad(), kMad, 1000, 2), 0);
  EXPECT_EQ(umad_poll(fd_, 1000), 0);
  Buffer resp;
  int len = kMad;
  ASSERT_EQ(umad_recv(fd_, resp.umad(), &len, 1000), agent);
  EXPECT_EQ(len, kMad);
  EXPECT_EQ(umad_status(resp.umad()), 0);
  const uint8_t* m = resp.mad();
  EXPECT_EQ(m[3], 0x81);                                 // GetResp
  EXPECT_EQ(be64_at(m + 8), 0x0102030405060708ull);      // TID
  EXPECT_EQ(m[4] & 0x7f, 0);                             // status
  EXPECT_EQ(m[64 + 2], 1);                               // NodeType CA
  umad_ca_t ca;
  ASSERT_EQ(umad_get_ca(nullptr, &ca), 0);
  EXPECT_EQ(be64_at(m + 64 + 12), be64toh(ca.node_guid));
  umad_release_ca(&ca);
}

TEST_F(Umad, TooSmallABufferLeavesTheMadQueued) {
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd_, 0x04, 1, 0, mask);
  Buffer req = request(0x04, 0x0001, 77);
  ASSERT_EQ(umad_send(fd_, agent, req.umad(), kMad, 1000, 0), 0);
  Buffer resp;
  int len = 100;
  EXPECT_EQ(umad_recv(fd_, resp.umad(), &len, 1000), -ENOSPC);
  EXPECT_EQ(len, kMad);
  ASSERT_EQ(umad_recv(fd_, resp.umad(), &len, 0), agent);
  EXPECT_EQ(be64_at(resp.mad() + 8), 77u);
  EXPECT_EQ(umad_recv(fd_, resp.umad(), &len, 0), -ETIMEDOUT);
}

TEST_F(Umad, UnansweredSendComesBackTimedOutAfterItsRetries) {
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd_, 0x01, 1, 0, mask);
  Buffer req = request(0x01, 0x0011, 4242, /*dlid=*/7);  // no port has LID 7
  const auto start = Clock::now();
  ASSERT_EQ(umad_send(fd_, agent, req.umad(), kMad, 60, 2), 0);
  EXPECT_EQ(umad_poll(fd_, 0), -ETIMEDOUT);
  Buffer resp;
  int len = kMad;
  ASSERT_EQ(umad_recv(fd_, resp.umad(), &len, 5000), agent);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(180));  // 60 ms x 3 tries
  EXPECT_EQ(umad_status(resp.umad()), ETIMEDOUT);
  EXPECT_EQ(be64_at(resp.mad() + 8), 4242u);
  EXPECT_EQ(resp.mad()[3], 0x01);  // the request itself, as sent
  // A send that waits for nothing hears nothing.
  ASSERT_EQ(umad_send(fd_, agent, req.umad(), kMad, 0, 0), 0);
  EXPECT_EQ(umad_poll(fd_, 200), -ETIMEDOUT);
  // A directed route that leaves the port: nobody there.
  Buffer dr = request(0x81, 0x0011, 5);
  dr.mad()[7] = 1;        // hop count
  dr.mad()[128 + 1] = 1;  // out of port 1
  const int dr_agent = umad_register(fd_, 0x81, 1, 0, mask);
  ASSERT_EQ(umad_send(fd_, dr_agent, dr.umad(), kMad, 20, 0), 0);
  ASSERT_EQ(umad_recv(fd_, resp.umad(), &len, 5000), dr_agent);
  EXPECT_EQ(umad_status(resp.umad()), ETIMEDOUT);
}

TEST_F(Umad, BlockingReadAndPollWakeOnAnAnswer) {
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd_, 0x81, 1, 0, mask);
  std::atomic<ssize_t> got{-2};
  Buffer into;
  std::thread reader([&] { got = read(umad_get_fd(fd_), into.umad(), into.bytes.size()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(got.load(), -2);  // still blocked
  Buffer req = request(0x81, 0x0015, 9);
  ASSERT_EQ(umad_send(fd_, agent, req.umad(), kMad, 1000, 0), 0);
  reader.join();
  EXPECT_EQ(got.load(), static_cast<ssize_t>(umad_size() + kMad));
  EXPECT_EQ(be64_at(into.mad() + 8), 9u);
  pollfd p{umad_get_fd(fd_), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
}

TEST_F(Umad, PmaSetClearsTheCountersItSelects) {
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd_, 0x04, 1, 0, mask);
  Buffer set = request(0x04, 0x0012, 1);
  set.mad()[3] = 0x02;
  set.mad()[64 + 2] = set.mad()[64 + 3] = 0xff;  // CounterSelect: all
  ASSERT_EQ(umad_send(fd_, agent, set.umad(), kMad, 1000, 0), 0);
  Buffer resp;
  int len = kMad;
  ASSERT_EQ(umad_recv(fd_, resp.umad(), &len, 1000), agent);
  EXPECT_EQ(resp.mad()[4], 0);
  EXPECT_EQ(resp.mad()[5], 0);
  for (int i = 24; i < 40; ++i) EXPECT_EQ(resp.mad()[64 + i], 0) << i;  // data and packets
  // Unknown attribute: answered with status 0x0C, not echoed back as success.
  Buffer bad = request(0x04, 0x0030, 2);  // SwPortVLCongestion: a switch's
  ASSERT_EQ(umad_send(fd_, agent, bad.umad(), kMad, 1000, 0), 0);
  ASSERT_EQ(umad_recv(fd_, resp.umad(), &len, 1000), agent);
  EXPECT_EQ(resp.mad()[5], 0x0c);
}

// VL15Dropped as the PMA reports it (PortCounters, IBA 16.1.3.5).
int vl15_dropped(int fd) {
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd, 0x04, 1, 0, mask);
  Buffer get = request(0x04, 0x0012, 99);
  if (umad_send(fd, agent, get.umad(), kMad, 1000, 0) != 0) return -1;
  Buffer resp;
  int len = kMad;
  const int got = umad_recv(fd, resp.umad(), &len, 1000);
  umad_unregister(fd, agent);
  if (got != agent) return -1;
  return resp.mad()[64 + 22] << 8 | resp.mad()[64 + 23];
}

// SMPs from several threads at once share VL15's buffer: each is answered
// or dropped and counted, never both, never neither.
TEST_F(Umad, ConcurrentSmpsAreAnsweredOrCountedAsDropped) {
  const int before = vl15_dropped(fd_);
  ASSERT_GE(before, 0);
  constexpr int kThreads = 4, kEach = 500;
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&answered] {
      const int fd = umad_open_port(nullptr, 0);
      ASSERT_GE(fd, 0);
      long mask[16 / sizeof(long)] = {};
      const int agent = umad_register(fd, 0x01, 1, 0, mask);
      Buffer req = request(0x01, 0x0011, 7, 0xffff);
      Buffer resp;
      for (int i = 0; i < kEach; ++i) {
        ASSERT_EQ(umad_send(fd, agent, req.umad(), kMad, 0, 0), 0);
        int len = kMad;
        while (umad_recv(fd, resp.umad(), &len, 0) >= 0) answered.fetch_add(1), len = kMad;
      }
      int len = kMad;
      while (umad_recv(fd, resp.umad(), &len, 200) >= 0) answered.fetch_add(1), len = kMad;
      umad_close_port(fd);
    });
  }
  for (auto& t : threads) t.join();
  const int after = vl15_dropped(fd_);
  EXPECT_EQ(answered.load() + (after - before), kThreads * kEach);
}

TEST_F(Umad, ClosingWithATimeoutPendingIsHarmless) {
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd_, 0x01, 1, 0, mask);
  Buffer req = request(0x01, 0x0011, 1, 9);
  ASSERT_EQ(umad_send(fd_, agent, req.umad(), kMad, 30, 0), 0);
  EXPECT_EQ(umad_close_port(fd_), 0);
  EXPECT_EQ(umad_close_port(fd_), -EINVAL);
  fd_ = -1;
  std::this_thread::sleep_for(std::chrono::milliseconds(80));  // the timer fires on a closed port
}

TEST_F(Umad, AProgramClosingTheFdItselfIsNotKilled) {
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd_, 0x01, 1, 0, mask);
  Buffer req = request(0x01, 0x0011, 1, 9);
  ASSERT_EQ(umad_send(fd_, agent, req.umad(), kMad, 20, 0), 0);
  ASSERT_EQ(close(fd_), 0);  // not umad_close_port: the answer finds no reader (no SIGPIPE)
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  Buffer again = request(0x81, 0x0011, 2);
  const int dr = umad_register(fd_, 0x81, 1, 0, mask);
  EXPECT_EQ(umad_send(fd_, dr, again.umad(), kMad, 20, 0), 0);
  fd_ = -1;  // its number is the program's to reuse
}

TEST(UmadBuffer, AddressHelpers) {
  Buffer b;
  EXPECT_EQ(umad_size(), 64u);
  EXPECT_EQ(static_cast<uint8_t*>(umad_get_mad(b.umad())) - b.bytes.data(), 64);
  umad_set_addr(b.umad(), 0x1234, 1, 3, 0x80010000);
  ib_mad_addr_t* a = umad_get_mad_addr(b.umad());
  EXPECT_EQ(be16toh(a->lid), 0x1234);
  EXPECT_EQ(be32toh(a->qpn), 1u);
  EXPECT_EQ(be32toh(a->qkey), 0x80010000u);
  EXPECT_EQ(a->sl, 3);
  umad_set_pkey(b.umad(), 5);
  EXPECT_EQ(umad_get_pkey(b.umad()), 5);
  ib_mad_addr_t grh = {};
  grh.gid[0] = 0xfe;
  grh.hop_limit = 64;
  grh.flow_label = 0x12345;
  umad_set_grh(b.umad(), &grh);
  EXPECT_EQ(a->grh_present, 1);
  EXPECT_EQ(a->gid[0], 0xfe);
  EXPECT_EQ(be32toh(a->flow_label), 0x12345u);
  umad_set_grh(b.umad(), nullptr);
  EXPECT_EQ(a->grh_present, 0);
  EXPECT_EQ(umad_set_addr_net(b.umad(), htobe16(2), htobe32(0), 0, 0), 0);
  EXPECT_EQ(be16toh(a->lid), 2);
}

}  // namespace
