#include "mad/data_route.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <initializer_list>
#include <memory>
#include <string>

namespace softverbs::mad {
namespace {

// Nodes in file order: sw-a 0, sw-b 1, dev 2 (the device's CA), ca-2 3,
// ca-3 4, ca-4 5 (its port 1 unlinked, port 2 on sw-b). sw-a and sw-b are
// joined by ports 7 and 8.
constexpr char kNet[] = R"(
Switch 8 "sw-a"
[1] "dev"[1]
[2] "ca-2"[1]
[7] "sw-b"[7]
[8] "sw-b"[8]

Switch 8 "sw-b"
[1] "ca-3"[1]
[2] "ca-4"[2]

Hca 2 "dev"
Hca 1 "ca-2"
Hca 2 "ca-3"
Hca 2 "ca-4"
)";
constexpr unsigned kSwA = 0, kSwB = 1, kDev = 2, kCa2 = 3, kCa3 = 4, kCa4 = 5;
constexpr uint8_t kActive = 4, kInit = 2;

// The subnet as an SM leaves it: LIDs sw-a 1, sw-b 2, dev 3, ca-2 4, ca-3 5
// (LMC 1: 5 and 6), every linked port ACTIVE; sw-a sends sw-b's LIDs out
// of port 7, sw-b sends sw-a's out of port 8.
class DataRouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TopologyParse p = parse_topology(kNet);
    ASSERT_TRUE(p.ok()) << p.error;
    topo_ = std::move(p.topology);
    ASSERT_EQ(static_cast<int>(kDev), topo_.local_ca());
    path_ = "/dev/shm/softverbs-data-route-test-" + std::to_string(getpid());
    unlink(path_.c_str());
    auto st = shm::SubnetState::open(path_);
    ASSERT_TRUE(st.is_ok());
    state_ = std::move(st.value());
    s_.topology = &topo_;
    s_.state = state_.get();
    s_.local.lid = 3;
    s_.local.port_state = kActive;
    s_.local.node_guid = 0x0200000000000010ull;
    s_.local.port_guid = 0x0200000000000011ull;
    shm::SubnetLock lock(*state_);
    for (unsigned n = 0; n < topo_.nodes.size(); ++n)
      for (unsigned port = 0; port <= topo_.nodes[n].num_ports; ++port) node(n).ports[port].port_state = kActive;
    node(kSwA).ports[0].lid = 1;
    node(kSwB).ports[0].lid = 2;
    node(kCa2).ports[1].lid = 4;
    node(kCa3).ports[1].lid = 5;
    node(kCa3).ports[1].lmc = 1;
    const uint8_t a[] = {0, 0, 7, 1, 2, 7, 7}, b[] = {0, 8, 0, 8, 8, 1, 1};
    for (unsigned lid = 1; lid < sizeof a; ++lid) {
      node(kSwA).sw.lft[lid] = a[lid];
      node(kSwB).sw.lft[lid] = b[lid];
    }
  }
  void TearDown() override {
    state_.reset();
    unlink(path_.c_str());
  }
  shm::SubnetNode& node(unsigned i) { return state_->node(i); }
  bool route(unsigned from, uint16_t dlid, unsigned to, const uint8_t* guid = nullptr) {
    shm::SubnetLock lock(*state_);
    return route_data(s_, from, dlid, guid, to);
  }
  // Switch `sw` sends `sl` from input port `in` to output `out` on `vl`.
  void map_sl(unsigned sw, unsigned in, unsigned out, unsigned sl, uint8_t vl) {
    uint8_t vls[16];
    shm::unpack_sl2vl(node(sw).sw.sl2vl[in][out], vls);
    vls[sl] = vl;
    shm::pack_sl2vl(vls, node(sw).sw.sl2vl[in][out]);
  }

  Topology topo_;
  std::string path_;
  std::unique_ptr<shm::SubnetState> state_;
  Subnet s_;
};

TEST_F(DataRouteTest, DevicesAreTheLocalCaThenTheOthersInFileOrder) {
  EXPECT_EQ((std::vector<int>{kDev, kCa2, kCa3, kCa4}), ca_device_nodes(topo_));
}

TEST_F(DataRouteTest, FollowsTheForwardingTablesToTheCaHoldingTheLid) {
  EXPECT_TRUE(route(kCa2, 5, kCa3));   // sw-a 7, sw-b 1
  EXPECT_TRUE(route(kCa2, 6, kCa3));   // the LMC's second LID
  EXPECT_TRUE(route(kCa3, 4, kCa2));   // sw-b 8, sw-a 2
  EXPECT_TRUE(route(kDev, 4, kCa2));   // the device's own CA sends too
  EXPECT_TRUE(route(kCa3, 3, kDev));   // and receives
}

TEST_F(DataRouteTest, ArrivesOnlyAtTheTargetQpsCa) {
  EXPECT_FALSE(route(kCa2, 5, kCa2));
  EXPECT_FALSE(route(kCa2, 5, kDev));
  EXPECT_FALSE(route(kCa2, 7, kCa3));  // no table has an entry for LID 7
  EXPECT_FALSE(route(kCa2, 1, kCa3));  // a switch's LID is no CA's
}

TEST_F(DataRouteTest, OwnLidStaysInTheCa) {
  EXPECT_TRUE(route(kCa2, 4, kCa2));
  EXPECT_FALSE(route(kCa2, 4, kCa3));
  s_.local.port_state = kInit;
  EXPECT_FALSE(route(kDev, 3, kDev));  // only an ACTIVE port loops back
}

TEST_F(DataRouteTest, SenderPortMustBeActive) {
  {
    shm::SubnetLock lock(*state_);
    node(kCa2).ports[1].port_state = kInit;
  }
  EXPECT_FALSE(route(kCa2, 5, kCa3));
  s_.local.port_state = kInit;
  EXPECT_FALSE(route(kDev, 4, kCa3));
}

TEST_F(DataRouteTest, EveryPortCrossedMustBeActive) {
  {
    shm::SubnetLock lock(*state_);
    node(kSwB).ports[7].port_state = kInit;  // where ca-2's packets to ca-3 enter sw-b
  }
  EXPECT_FALSE(route(kCa2, 5, kCa3));
  EXPECT_TRUE(route(kCa3, 4, kCa2));  // the other way goes by port 8
  {
    shm::SubnetLock lock(*state_);
    node(kSwB).ports[7].port_state = kActive;
    node(kCa3).ports[1].port_state = kInit;  // the arrival port
  }
  EXPECT_FALSE(route(kDev, 5, kCa3));
}

TEST_F(DataRouteTest, DisabledLinkLosesWhatCrossesIt) {
  {
    shm::SubnetLock lock(*state_);
    node(kSwA).ports[7].phys_disabled = 1;  // ibportstate disable: the link is down at both ends
  }
  EXPECT_FALSE(route(kCa2, 5, kCa3));
  EXPECT_TRUE(route(kCa3, 4, kCa2));  // by port 8
  EXPECT_TRUE(route(kCa2, 3, kDev));  // never leaves sw-a
}

TEST_F(DataRouteTest, UnprogrammedOrLoopingTablesLoseIt) {
  {
    shm::SubnetLock lock(*state_);
    node(kSwA).sw.lft[5] = shm::kLftUnset;
  }
  EXPECT_FALSE(route(kCa2, 5, kCa3));
  {
    shm::SubnetLock lock(*state_);
    node(kSwA).sw.lft[5] = 8;
    node(kSwB).sw.lft[5] = 8;  // back and forth between the switches
  }
  EXPECT_FALSE(route(kCa2, 5, kCa3));
  {
    shm::SubnetLock lock(*state_);
    node(kSwA).sw.lft[5] = 3;  // a port without a link
  }
  EXPECT_FALSE(route(kCa2, 5, kCa3));
}

TEST_F(DataRouteTest, PortWithoutLinkSendsNothing) {
  // ca-4's port 1 has no link: DOWN, whatever the SM wrote.
  {
    shm::SubnetLock lock(*state_);
    node(kCa4).ports[1].lid = 8;
  }
  EXPECT_FALSE(route(kCa4, 4, kCa2));
  EXPECT_FALSE(route(kCa2, 8, kCa4));
}

TEST_F(DataRouteTest, GrhMustNameTheArrivalPort) {
  const uint64_t guid = topo_.nodes[kCa3].port_guid(1);
  uint8_t be[8];
  for (int i = 0; i < 8; ++i) be[i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  EXPECT_TRUE(route(kCa2, 5, kCa3, be));
  be[7] ^= 1;
  EXPECT_FALSE(route(kCa2, 5, kCa3, be));
}

TEST_F(DataRouteTest, NoSwitchesAndNoMulticast) {
  EXPECT_FALSE(route(kSwA, 4, kCa2));
  EXPECT_FALSE(route(kCa2, 1, kSwA));
  EXPECT_FALSE(route(kCa2, 0xc001, kCa3));
  EXPECT_FALSE(route(kCa2, 0, kCa3));
}

TEST_F(DataRouteTest, CountsOnEveryPortItCrossesAndNoOther) {
  // ca-2 to ca-3: ca-2 1 -> sw-a 2, sw-a 7 -> sw-b 7, sw-b 1 -> ca-3 1.
  shm::SubnetLock lock(*state_);
  DataPath path;
  ASSERT_TRUE(route_data(s_, kCa2, 5, nullptr, kCa3, 0, &path));
  ASSERT_EQ(3u, path.links);
  count_data_path(s_, path, 0, 3, 5000);  // three packets, 5000 octets of payload
  const uint64_t words = (5000 + 3 * 24) / 4;
  const auto expect = [&](unsigned n, unsigned port, uint64_t xp, uint64_t xw, uint64_t rp, uint64_t rw) {
    const shm::SubnetTraffic& t = node(n).ports[port].traffic;
    EXPECT_EQ(xp, t.xmit_packets) << "node " << n << " port " << port;
    EXPECT_EQ(xw, t.xmit_words) << "node " << n << " port " << port;
    EXPECT_EQ(rp, t.rcv_packets) << "node " << n << " port " << port;
    EXPECT_EQ(rw, t.rcv_words) << "node " << n << " port " << port;
  };
  expect(kCa2, 1, 3, words, 0, 0);
  expect(kSwA, 2, 0, 0, 3, words);
  expect(kSwA, 7, 3, words, 0, 0);
  expect(kSwB, 7, 0, 0, 3, words);
  expect(kSwB, 1, 3, words, 0, 0);
  expect(kCa3, 1, 0, 0, 3, words);
  // Off the route: the other inter-switch link, the device's port and its
  // switch port count nothing.
  expect(kSwA, 8, 0, 0, 0, 0);
  expect(kSwB, 8, 0, 0, 0, 0);
  expect(kSwA, 1, 0, 0, 0, 0);
  expect(kDev, 1, 0, 0, 0, 0);
  // The answer goes back by sw-b 8: it adds there, not on port 7.
  ASSERT_TRUE(route_data(s_, kCa3, 4, nullptr, kCa2, 0, &path));
  count_data_path(s_, path, 0, 1, 0);
  expect(kSwB, 8, 1, 6, 0, 0);
  expect(kSwA, 8, 0, 0, 1, 6);
  expect(kSwA, 7, 3, words, 0, 0);
  expect(kCa2, 1, 3, words, 1, 6);
}

TEST_F(DataRouteTest, LoopbackInTheCaCrossesNoPort) {
  shm::SubnetLock lock(*state_);
  DataPath path;
  ASSERT_TRUE(route_data(s_, kCa2, 4, nullptr, kCa2, 0, &path));
  EXPECT_EQ(0u, path.links);
  count_data_path(s_, path, 0, 1, 64);
  EXPECT_EQ(0u, node(kCa2).ports[1].traffic.xmit_packets);
  EXPECT_EQ(0u, node(kSwA).ports[2].traffic.rcv_packets);
}

// Each link carries SL 5 on the VL its sender maps it to: ca-2's port
// table, then sw-a's table for input port 2 to output 7, then sw-b's for 7
// to 1. The receiving port counts it per VL, every port per SL.
TEST_F(DataRouteTest, CountsPerSlAndPerVlAsEachHopMapsIt) {
  shm::SubnetLock lock(*state_);
  node(kCa2).ports[1].qos.sl_to_vl[5] = 1;
  map_sl(kSwA, 2, 7, 5, 2);
  map_sl(kSwA, 1, 7, 5, 6);  // another input port's table: not this route's
  map_sl(kSwB, 7, 1, 5, 3);
  DataPath path;
  ASSERT_TRUE(route_data(s_, kCa2, 5, nullptr, kCa3, 5, &path));
  ASSERT_EQ(3u, path.links);
  EXPECT_EQ(1, path.vl[0]);
  EXPECT_EQ(2, path.vl[1]);
  EXPECT_EQ(3, path.vl[2]);
  count_data_path(s_, path, 5, 2, 1000);
  const uint64_t words = (1000 + 2 * 24) / 4;
  const auto rcv = [&](unsigned n, unsigned port, unsigned vl) {
    const shm::SubnetTraffic& t = node(n).ports[port].traffic;
    EXPECT_EQ(words, t.rcv_words_sl[5]) << "node " << n << " port " << port;
    EXPECT_EQ(2u, t.rcv_packets_vl[vl]) << "node " << n << " port " << port;
    EXPECT_EQ(words, t.rcv_words_vl[vl]) << "node " << n << " port " << port;
    uint64_t all = 0;
    for (uint64_t p : t.rcv_packets_vl) all += p;
    EXPECT_EQ(2u, all) << "node " << n << " port " << port;
  };
  rcv(kSwA, 2, 1);
  rcv(kSwB, 7, 2);
  rcv(kCa3, 1, 3);
  EXPECT_EQ(words, node(kCa2).ports[1].traffic.xmit_words_sl[5]);
  EXPECT_EQ(words, node(kSwA).ports[7].traffic.xmit_words_sl[5]);
  EXPECT_EQ(words, node(kSwB).ports[1].traffic.xmit_words_sl[5]);
  EXPECT_EQ(0u, node(kSwB).ports[1].traffic.xmit_words_sl[0]);
  EXPECT_EQ(0u, node(kSwB).ports[1].traffic.xmit_discards);
}

// IBA 7.6.6: the switch port whose table maps the SL to VL15 drops it and
// counts PortXmitDiscards; what it crossed before counts it, nothing after.
TEST_F(DataRouteTest, SwitchHopOnVl15DiscardsAndCounts) {
  shm::SubnetLock lock(*state_);
  map_sl(kSwB, 7, 1, 4, shm::kVl15);
  DataPath path;
  EXPECT_FALSE(route_data(s_, kCa2, 5, nullptr, kCa3, 4, &path));
  ASSERT_TRUE(path.discarded);
  EXPECT_EQ(kSwB, path.discard_node);
  EXPECT_EQ(1, path.discard_port);
  EXPECT_EQ(2u, path.links);
  count_data_path(s_, path, 4, 3, 300);
  EXPECT_EQ(3u, node(kSwB).ports[1].traffic.xmit_discards);
  EXPECT_EQ(0u, node(kSwB).ports[1].traffic.xmit_packets);
  EXPECT_EQ(3u, node(kSwB).ports[7].traffic.rcv_packets);
  EXPECT_EQ(0u, node(kCa3).ports[1].traffic.rcv_packets);
  // Other SLs, and the same SL by another route (ca-3's answer), pass.
  EXPECT_TRUE(route_data(s_, kCa2, 5, nullptr, kCa3, 3, &path));
  EXPECT_FALSE(path.discarded);
  EXPECT_TRUE(route_data(s_, kCa3, 4, nullptr, kCa2, 4, &path));
  // The sending CA's own table mapping it to VL15: its port drops it.
  node(kCa2).ports[1].qos.sl_to_vl[4] = shm::kVl15;
  EXPECT_FALSE(route_data(s_, kCa2, 5, nullptr, kCa3, 4, &path));
  EXPECT_TRUE(path.discarded);
  EXPECT_EQ(kCa2, path.discard_node);
  EXPECT_EQ(0u, path.links);
}

// IBA 18.2.4.3 over MLID 0xc005 (entry 5): sw-a sends it out of ports 2
// and 7, sw-b out of 7 and 1, each never back by the port it came in.
class MulticastRouteTest : public DataRouteTest {
 protected:
  static constexpr uint16_t kMlid = 0xc005;
  void SetUp() override {
    DataRouteTest::SetUp();
    shm::SubnetLock lock(*state_);
    set_mft(kSwA, {2, 7});
    set_mft(kSwB, {7, 1});
  }
  void set_mft(unsigned sw, std::initializer_list<unsigned> ports) {
    uint16_t* masks = node(sw).sw.mft[kMlid - 0xc000];
    for (unsigned i = 0; i < shm::kMftPositions; ++i) masks[i] = 0;
    for (unsigned p : ports) masks[p / 16] = static_cast<uint16_t>(masks[p / 16] | 1u << (p % 16));
  }
  uint64_t reach(unsigned from, uint16_t mlid = kMlid, uint8_t sl = 0) {
    shm::SubnetLock lock(*state_);
    return route_multicast(s_, from, mlid, sl);
  }
  static uint64_t bit(unsigned n) { return 1ull << n; }
};

TEST_F(MulticastRouteTest, ReachesTheCasOnTheTreeOnly) {
  EXPECT_EQ(bit(kCa3), reach(kCa2));           // not dev: sw-a's port 1 is not in the entry
  EXPECT_EQ(bit(kCa2) | bit(kCa3), reach(kDev));
  EXPECT_EQ(bit(kCa2), reach(kCa3));           // back across by sw-b's 7, then sw-a's 2
  // Another MLID's entry is empty: no switch forwards it.
  EXPECT_EQ(0u, reach(kCa2, 0xc006));
  // Not a multicast LID, the permissive LID, an entry beyond the cap, a switch as sender.
  EXPECT_EQ(0u, reach(kCa2, 5));
  EXPECT_EQ(0u, reach(kCa2, 0xffff));
  EXPECT_EQ(0u, reach(kCa2, static_cast<uint16_t>(0xc000 + shm::kMftCap)));
  EXPECT_EQ(0u, reach(kSwA));
}

TEST_F(MulticastRouteTest, ActivePortsAndUpLinksOnly) {
  {
    shm::SubnetLock lock(*state_);
    node(kCa3).ports[1].port_state = kInit;
  }
  EXPECT_EQ(0u, reach(kCa2));
  EXPECT_EQ(0u, reach(kCa3));  // nor from it
  {
    shm::SubnetLock lock(*state_);
    node(kCa3).ports[1].port_state = kActive;
    node(kSwA).ports[7].phys_disabled = 1;  // the link to sw-b goes down
  }
  EXPECT_EQ(0u, reach(kCa2));
  EXPECT_EQ(bit(kCa2), reach(kDev));
}

TEST_F(MulticastRouteTest, TablesWithALoopForwardOncePerSwitch) {
  {
    shm::SubnetLock lock(*state_);
    set_mft(kSwA, {1, 2, 7, 8});
    set_mft(kSwB, {1, 7, 8});
  }
  EXPECT_EQ(bit(kDev) | bit(kCa3), reach(kCa2));
}

TEST_F(MulticastRouteTest, CountsEveryPortItCrossesAsMulticast) {
  shm::SubnetLock lock(*state_);
  EXPECT_EQ(bit(kCa2) | bit(kCa3), route_multicast(s_, kDev, kMlid, 2, 1, 100));
  const uint64_t words = (100 + 24) / 4;
  const auto sent = [&](unsigned n, unsigned port, uint64_t packets) {
    const shm::SubnetTraffic& t = node(n).ports[port].traffic;
    EXPECT_EQ(packets, t.xmit_packets) << "node " << n << " port " << port;
    EXPECT_EQ(packets, t.mcast_xmit_packets) << "node " << n << " port " << port;
    EXPECT_EQ(packets * words, t.xmit_words_sl[2]) << "node " << n << " port " << port;
  };
  const auto received = [&](unsigned n, unsigned port, uint64_t packets) {
    const shm::SubnetTraffic& t = node(n).ports[port].traffic;
    EXPECT_EQ(packets, t.rcv_packets) << "node " << n << " port " << port;
    EXPECT_EQ(packets, t.mcast_rcv_packets) << "node " << n << " port " << port;
    EXPECT_EQ(packets, t.rcv_packets_vl[2]) << "node " << n << " port " << port;  // SL 2 on VL 2 everywhere
  };
  sent(kDev, 1, 1);
  received(kSwA, 1, 1);
  sent(kSwA, 2, 1);
  received(kCa2, 1, 1);
  sent(kSwA, 7, 1);
  received(kSwB, 7, 1);
  sent(kSwB, 1, 1);
  received(kCa3, 1, 1);
  sent(kSwA, 8, 0);
  sent(kSwB, 2, 0);
  received(kSwA, 2, 0);
  // Without packets it only asks: nothing more is counted.
  route_multicast(s_, kDev, kMlid, 2);
  sent(kDev, 1, 1);
}

TEST_F(MulticastRouteTest, ABranchOnVl15IsDroppedThereAlone) {
  shm::SubnetLock lock(*state_);
  map_sl(kSwA, 1, 7, 3, shm::kVl15);
  EXPECT_EQ(bit(kCa2), route_multicast(s_, kDev, kMlid, 3, 4, 0));
  EXPECT_EQ(4u, node(kSwA).ports[7].traffic.xmit_discards);
  EXPECT_EQ(0u, node(kSwA).ports[7].traffic.xmit_packets);
  EXPECT_EQ(0u, node(kSwB).ports[7].traffic.rcv_packets);
  // From ca-2 the input port is 2: that table still carries SL 3.
  EXPECT_EQ(bit(kCa3), route_multicast(s_, kCa2, kMlid, 3));
}

}  // namespace
}  // namespace softverbs::mad
