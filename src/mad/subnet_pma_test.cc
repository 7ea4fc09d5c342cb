#include "mad/subnet_pma.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "mad/mad_layout.h"
#include "mad/pma_counters.h"

namespace softverbs::mad {
namespace {

using Bytes = std::vector<uint8_t>;
using Mad = std::array<uint8_t, kMadBytes>;

// The device's CA ("dev", two ports) on sw-a port 1; sw-a and sw-b joined
// by ports 7 and 8; ca-3 behind sw-b.
constexpr char kNet[] = R"(
switchguid=0x0011000000000100
Switch 8 "sw-a"
[1] "dev"[1]
[2] "ca-2"[1]
[7] "sw-b"[7]
[8] "sw-b"[8]

switchguid=0x0011000000000200
Switch 8 "sw-b"
[1] "ca-3"[1]

Hca 2 "dev"
Hca 1 "ca-2"
Hca 2 "ca-3"
)";
// Node indices in file order, and the LIDs an SM would give.
constexpr unsigned kSwA = 0, kSwB = 1, kDev = 2, kCa2 = 3, kCa3 = 4;
constexpr uint16_t kDevLid = 1, kSwALid = 2, kSwBLid = 3, kCa2Lid = 4, kCa3Lid = 5, kDevPort2Lid = 6;

Mad pma(uint8_t method, uint16_t attr, uint8_t port_select, uint16_t select = 0) {
  Mad m{};
  m[0] = 1;
  m[1] = 0x04;
  m[2] = 1;
  m[3] = method;
  TransactionId::set(m.data(), 7);
  AttributeId::set(m.data(), attr);
  m[kGsiDataOffset + 1] = port_select;
  m[kGsiDataOffset + 2] = static_cast<uint8_t>(select >> 8);
  m[kGsiDataOffset + 3] = static_cast<uint8_t>(select);
  return m;
}

class SubnetPmaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TopologyParse p = parse_topology(kNet);
    ASSERT_TRUE(p.ok()) << p.error;
    topo_ = std::move(p.topology);
    ASSERT_EQ(topo_.local_ca(), static_cast<int>(kDev));
    path_ = "/dev/shm/softverbs-subnet-pma-test-" + std::to_string(getpid());
    unlink(path_.c_str());
    auto st = shm::SubnetState::open(path_);
    ASSERT_TRUE(st.is_ok());
    state_ = std::move(st.value());
    subnet_.topology = &topo_;
    subnet_.state = state_.get();
    subnet_.local.lid = kDevLid;
    // What opensm would program: LIDs and both switches' LFTs.
    state_->node(kSwA).ports[0].lid = kSwALid;
    state_->node(kSwB).ports[0].lid = kSwBLid;
    state_->node(kCa2).ports[1].lid = kCa2Lid;
    state_->node(kCa3).ports[1].lid = kCa3Lid;
    state_->node(kDev).ports[2].lid = kDevPort2Lid;
    uint8_t* a = state_->node(kSwA).sw.lft;
    a[kDevLid] = 1, a[kCa2Lid] = 2, a[kSwBLid] = 7, a[kCa3Lid] = 7;
    uint8_t* b = state_->node(kSwB).sw.lft;
    b[kDevLid] = 7, b[kSwALid] = 8, b[kCa3Lid] = 1;
    // dev's port 2 has no link: its LID is programmed but unreachable.
    a[kDevPort2Lid] = 1;
    counters_.local.v[kXmitPkts] = 100;
    counters_.local.v[kRcvPkts] = 90;
    counters_.local.v[kXmitData] = 0x01020304;
    counters_.local.v[kRcvData] = 0x0a0b;
    counters_.local.v[kXmitDiscards] = 3;
    counters_.peer = mirror_pma_counters(counters_.local);
  }
  void TearDown() override {
    state_.reset();
    unlink(path_.c_str());
  }

  struct Answer {
    Disposition d;
    Mad out{};
    LinkPmaReset reset;
  };
  Answer ask(const Mad& in, uint16_t dlid) {
    Answer a;
    shm::SubnetLock lock(*state_);
    a.d = answer_subnet_pma(subnet_, counters_, in.data(), in.size(), dlid, a.out.data(), &a.reset);
    return a;
  }
  static Bytes data(const Mad& m, size_t n) {
    return Bytes(m.begin() + kGsiDataOffset, m.begin() + kGsiDataOffset + static_cast<long>(n));
  }

  Topology topo_;
  std::string path_;
  std::unique_ptr<shm::SubnetState> state_;
  Subnet subnet_;
  LinkPmaCounters counters_;
};

TEST(MirrorPmaCounters, WhatOneEndSendsTheOtherReceives) {
  PmaCounters c;
  c.v[kXmitData] = 1, c.v[kRcvData] = 2, c.v[kXmitPkts] = 3, c.v[kRcvPkts] = 4;
  c.v[kMcastXmitPkts] = 5, c.v[kMcastRcvPkts] = 6, c.v[kXmitDataSl0 + 2] = 7, c.v[kRcvDataSl0 + 3] = 8;
  c.v[kSymbolErrors] = 9, c.v[kRcvErrors] = 10, c.v[kXmitDiscards] = 11, c.v[kVl15Dropped] = 12;
  c.v[kXmitWaitVl0] = 13;
  const PmaCounters m = mirror_pma_counters(c);
  EXPECT_EQ(m.v[kXmitData], 2u);
  EXPECT_EQ(m.v[kRcvData], 1u);
  EXPECT_EQ(m.v[kXmitPkts], 4u);
  EXPECT_EQ(m.v[kRcvPkts], 3u);
  EXPECT_EQ(m.v[kMcastXmitPkts], 6u);
  EXPECT_EQ(m.v[kMcastRcvPkts], 5u);
  EXPECT_EQ(m.v[kRcvDataSl0 + 2], 7u);
  EXPECT_EQ(m.v[kXmitDataSl0 + 3], 8u);
  // The device's errors and waits are its own port's, not the link's far end.
  EXPECT_EQ(m.v[kSymbolErrors] + m.v[kRcvErrors] + m.v[kXmitDiscards] + m.v[kVl15Dropped] + m.v[kXmitWaitVl0], 0u);
  // PortOpRcvCounters: the far end received all the device sent; per VL,
  // what the device sent on each VL, and the other way round.
  EXPECT_EQ(m.v[kOpRcvPkts], 3u);
  EXPECT_EQ(m.v[kOpRcvData], 1u);
  c.v[kRcvPktsVl0 + 1] = 14, c.v[kRcvDataVl0 + 1] = 15, c.v[kXmitPktsVl0 + 2] = 16, c.v[kXmitDataVl0 + 2] = 17;
  const PmaCounters m2 = mirror_pma_counters(c);
  EXPECT_EQ(m2.v[kRcvPktsVl0 + 2], 16u);
  EXPECT_EQ(m2.v[kRcvDataVl0 + 2], 17u);
  EXPECT_EQ(m2.v[kXmitPktsVl0 + 1], 14u);
  EXPECT_EQ(m2.v[kXmitDataVl0 + 1], 15u);
  EXPECT_EQ(m2.v[kRcvPktsVl0 + 1] + m2.v[kRcvDataVl0 + 1], 0u);
}

TEST_F(SubnetPmaTest, TheFacingSwitchPortMirrorsTheDevicesPortGolden) {
  const Answer a = ask(pma(0x01, 0x0012, 1), kSwALid);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[3], 0x81);
  EXPECT_EQ(TransactionId::get(a.out.data()), 7u);
  EXPECT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 44), Bytes({0x00, 0x01, 0x00, 0x00,  // PortSelect 1, CounterSelect
                                    0, 0, 0, 0,              // SymbolErrorCounter, link counters
                                    0, 0, 0, 0, 0, 0,        // PortRcvErrors...
                                    0, 0,                    // PortXmitDiscards: the device's own
                                    0, 0, 0, 0, 0, 0, 0, 0,  // constraint errors, VL15Dropped
                                    0, 0, 0x0a, 0x0b,        // PortXmitData: what the device received
                                    0x01, 0x02, 0x03, 0x04,  // PortRcvData: what it sent
                                    0, 0, 0, 90,             // PortXmitPkts
                                    0, 0, 0, 100,            // PortRcvPkts
                                    0, 0, 0, 0}));
}

// The per-VL and Op attributes on a switch: the facing port received all
// the device sent (PortOpRcvCounters), per VL nothing is known (0), and no
// flow control runs on any port.
TEST_F(SubnetPmaTest, TheFacingSwitchPortAnswersTheOpAndVlAttributesGolden) {
  counters_.local.v[kRcvPktsVl0 + 2] = 5;  // the device's own receive side: not the switch's
  counters_.peer = mirror_pma_counters(counters_.local);
  Answer a = ask(pma(0x01, 0x0017, 1), kSwALid);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 12), Bytes({0x00, 0x01, 0x00, 0x00,    // OpCode, PortSelect, CounterSelect
                                    0, 0, 0, 100,              // PortOpRcvPkts: what the device sent
                                    0x01, 0x02, 0x03, 0x04}));  // PortOpRcvData
  for (uint16_t attr : {0x0018, 0x0019, 0x001a, 0x001b}) {
    a = ask(pma(0x01, attr, 1), kSwALid);
    ASSERT_EQ(Status::get(a.out.data()), 0) << attr;
    Bytes want(68, 0);
    want[1] = 1;
    EXPECT_EQ(data(a.out, 68), want) << attr;
  }
  // A port the switch lacks: 0x1C, as for every attribute with PortSelect.
  EXPECT_EQ(Status::get(ask(pma(0x01, 0x0019, 9), kSwALid).out.data()), 0x1c);
}

TEST_F(SubnetPmaTest, PortsWithoutTrafficCountZero) {
  // Another port of the same switch, the far switch, another CA.
  for (auto [dlid, port] : {std::pair{kSwALid, 2}, {kSwALid, 7}, {kSwBLid, 1}, {kSwBLid, 7}, {kCa3Lid, 1},
                            {kCa3Lid, 2}, {kCa2Lid, 1}}) {
    const Answer a = ask(pma(0x01, 0x001d, static_cast<uint8_t>(port)), dlid);
    ASSERT_EQ(a.d, Disposition::kRespond) << dlid << " " << port;
    EXPECT_EQ(Status::get(a.out.data()), 0);
    Bytes want(72, 0);
    want[1] = static_cast<uint8_t>(port);
    EXPECT_EQ(data(a.out, 72), want) << dlid << " " << port;
  }
}

TEST_F(SubnetPmaTest, AllPortsOfASwitchSumAndResetTogether) {
  Answer a = ask(pma(0x01, 0x001d, 0xff), kSwALid);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  Bytes want(72, 0);
  want[1] = 0xff;
  want[14] = 0x0a, want[15] = 0x0b;                      // PortXmitData
  want[20] = 1, want[21] = 2, want[22] = 3, want[23] = 4;  // PortRcvData
  want[31] = 90, want[39] = 100, want[47] = 90, want[55] = 100;  // packets, unicast
  EXPECT_EQ(data(a.out, 72), want);
  // Set of all ports: the facing port is reset, the device's is not.
  a = ask(pma(0x02, 0x0012, 0xff, 0xffff), kSwALid);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(a.reset.local, 0u);
  EXPECT_EQ(a.reset.peer, (1ull << kSymbolErrors) | (1ull << kRcvErrors) | (1ull << kXmitDiscards) |
                              (1ull << kVl15Dropped) | (1ull << kXmitData) | (1ull << kRcvData) |
                              (1ull << kXmitPkts) | (1ull << kRcvPkts));
  EXPECT_EQ(data(a.out, 44)[31], 0);  // shown cleared
  // A Set of one other port resets nothing that counts.
  a = ask(pma(0x02, 0x0012, 2, 0xffff), kSwALid);
  EXPECT_EQ(a.reset.local | a.reset.peer, 0u);
}

TEST_F(SubnetPmaTest, PortsShowWhatTheOtherCasSentThroughThemAndResetIt) {
  {
    shm::SubnetLock lock(*state_);
    shm::SubnetTraffic& t = state_->node(kSwB).ports[7].traffic;
    t.rcv_packets = 5, t.rcv_words = 300;
    t.xmit_packets = 2, t.xmit_words = 12;
  }
  Answer a = ask(pma(0x01, 0x001d, 7), kSwBLid);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  Bytes want(72, 0);
  want[1] = 7;
  want[15] = 12;                // PortXmitData
  want[22] = 0x01, want[23] = 0x2c;  // PortRcvData 300
  want[31] = 2, want[39] = 5, want[47] = 2, want[55] = 5;
  EXPECT_EQ(data(a.out, 72), want);
  // The switch's sum over all ports has them too; its other ports do not.
  a = ask(pma(0x01, 0x001d, 0xff), kSwBLid);
  EXPECT_EQ(data(a.out, 72)[39], 5);
  a = ask(pma(0x01, 0x001d, 8), kSwBLid);
  EXPECT_EQ(data(a.out, 72)[39], 0);
  // A Set clears what it names, in the subnet state.
  a = ask(pma(0x02, 0x0012, 7, 0xffff), kSwBLid);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  shm::SubnetLock lock(*state_);
  const shm::SubnetTraffic& t = state_->node(kSwB).ports[7].traffic;
  EXPECT_EQ(t.rcv_packets | t.rcv_words | t.xmit_packets | t.xmit_words, 0u);
}

// Per SL and per VL, as the route counted them on each port it crossed
// (mad/data_route.h), and the discards of a port whose SL2VL sent an SL
// to VL15; a Set of each attribute clears its own.
TEST_F(SubnetPmaTest, SwitchPortsShowTheOtherCasTrafficPerSlAndVlGolden) {
  {
    shm::SubnetLock lock(*state_);
    shm::SubnetTraffic& t = state_->node(kSwB).ports[7].traffic;
    t.xmit_words_sl[3] = 7, t.rcv_words_sl[4] = 9;
    t.rcv_packets_vl[2] = 5, t.rcv_words_vl[2] = 300;
    t.xmit_discards = 4;
  }
  Answer a = ask(pma(0x01, 0x0036, 7), kSwBLid);  // PortXmitDataSL
  ASSERT_EQ(Status::get(a.out.data()), 0);
  Bytes want(68, 0);
  want[1] = 7, want[4 + 3 * 4 + 3] = 7;
  EXPECT_EQ(data(a.out, 68), want);
  a = ask(pma(0x01, 0x0037, 7), kSwBLid);  // PortRcvDataSL
  want = Bytes(68, 0);
  want[1] = 7, want[4 + 4 * 4 + 3] = 9;
  EXPECT_EQ(data(a.out, 68), want);
  a = ask(pma(0x01, 0x0019, 7), kSwBLid);  // PortVLOpPackets
  want = Bytes(36, 0);
  want[1] = 7, want[4 + 2 * 2 + 1] = 5;
  EXPECT_EQ(data(a.out, 36), want);
  a = ask(pma(0x01, 0x001a, 7), kSwBLid);  // PortVLOpData
  want = Bytes(68, 0);
  want[1] = 7, want[4 + 2 * 4 + 2] = 0x01, want[4 + 2 * 4 + 3] = 0x2c;
  EXPECT_EQ(data(a.out, 68), want);
  a = ask(pma(0x01, 0x0012, 7), kSwBLid);  // PortCounters: PortXmitDiscards
  EXPECT_EQ(data(a.out, 16)[15], 4);
  // Another port of the switch saw none of it.
  a = ask(pma(0x01, 0x0019, 8), kSwBLid);
  EXPECT_EQ(data(a.out, 36)[9], 0);
  for (uint16_t attr : {0x0036, 0x0037, 0x0019, 0x001a, 0x0012})
    ASSERT_EQ(Status::get(ask(pma(0x02, attr, 7, 0xffff), kSwBLid).out.data()), 0) << attr;
  shm::SubnetLock lock(*state_);
  const shm::SubnetTraffic& t = state_->node(kSwB).ports[7].traffic;
  EXPECT_EQ(t.xmit_words_sl[3] | t.rcv_words_sl[4] | t.rcv_packets_vl[2] | t.rcv_words_vl[2] | t.xmit_discards, 0u);
}

TEST_F(SubnetPmaTest, TheDevicesCaAnswersForItsPortsThroughPort2sLid) {
  // dev's port 2 has no link: nothing reaches its LID.
  EXPECT_EQ(ask(pma(0x01, 0x0012, 1), kDevPort2Lid).d, Disposition::kDrop);
  // Its port 1's LID through the subnet: the device's own counters.
  const Answer a = ask(pma(0x02, 0x001d, 1, 1), kDevLid);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.reset.local, 1ull << kXmitData);
  EXPECT_EQ(a.reset.peer, 0u);
  EXPECT_EQ(data(a.out, 72)[39], 90);  // PortRcvPkts
}

TEST_F(SubnetPmaTest, TheDevicesOwnCaHasTheTopologysPorts) {
  Answer a;
  {
    shm::SubnetLock lock(*state_);
    a.d = answer_local_ca_pma(subnet_, counters_, pma(0x01, 0x0012, 2).data(), kMadBytes, a.out.data(), &a.reset);
  }
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(Status::get(a.out.data()), 0);
  Bytes want(44, 0);
  want[1] = 2;
  EXPECT_EQ(data(a.out, 44), want);  // port 2: no link, no traffic
  {
    shm::SubnetLock lock(*state_);
    a.d = answer_local_ca_pma(subnet_, counters_, pma(0x02, 0x0012, 0xff, 1u << 6).data(), kMadBytes, a.out.data(),
                              &a.reset);
  }
  EXPECT_EQ(data(a.out, 44)[15], 0);  // PortXmitDiscards (port 1's 3) shown cleared
  EXPECT_EQ(a.reset.local, 1ull << kXmitDiscards);
  EXPECT_EQ(a.reset.peer, 0u);
  {
    shm::SubnetLock lock(*state_);
    a.d = answer_local_ca_pma(subnet_, counters_, pma(0x01, 0x0012, 3).data(), kMadBytes, a.out.data(), &a.reset);
  }
  EXPECT_EQ(Status::get(a.out.data()), 0x1c);
}

// The details attributes on every node: the device's port has its own
// errors and discards, the facing switch port and every other port none.
TEST_F(SubnetPmaTest, ErrorAndDiscardDetailsOnEveryNodeGolden) {
  counters_.local.v[kLocalPhysicalErrors] = 5;
  counters_.local.v[kMalformedPktErrors] = 6;
  counters_.local.v[kInactiveDiscards] = 0x0102;
  counters_.peer = mirror_pma_counters(counters_.local);
  Answer a = ask(pma(0x01, 0x0015, 1), kDevLid);
  ASSERT_EQ(a.d, Disposition::kRespond);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 16), Bytes({0, 1, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0}));
  a = ask(pma(0x01, 0x0016, 1), kDevLid);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 12), Bytes({0, 1, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0, 0}));
  for (auto [dlid, port] : {std::pair{kSwALid, 1}, {kSwALid, 0xff}, {kSwBLid, 7}, {kCa3Lid, 2}}) {
    for (uint16_t attr : {0x0015, 0x0016}) {
      a = ask(pma(0x01, attr, static_cast<uint8_t>(port)), dlid);
      ASSERT_EQ(a.d, Disposition::kRespond);
      EXPECT_EQ(Status::get(a.out.data()), 0) << dlid << " " << port << " " << attr;
      Bytes want(16, 0);
      want[1] = static_cast<uint8_t>(port);
      EXPECT_EQ(data(a.out, 16), want) << dlid << " " << port << " " << attr;
    }
  }
  // A Set on the device's LID resets the device's port only.
  a = ask(pma(0x02, 0x0016, 1, 1), kDevLid);
  EXPECT_EQ(a.reset.local, 1ull << kInactiveDiscards);
  EXPECT_EQ(a.reset.peer, 0u);
  EXPECT_EQ(Status::get(ask(pma(0x01, 0x0015, 9), kSwALid).out.data()), 0x1c);  // no port 9
}

TEST_F(SubnetPmaTest, ClassPortInfoOfASwitchGolden) {
  const Answer a = ask(pma(0x01, 0x0001, 0), kSwBLid);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(Status::get(a.out.data()), 0);
  // AllPortSelect and PortCountersExtended (IBA 16.1.3.1).
  EXPECT_EQ(data(a.out, 12), Bytes({0x01, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x10, 0, 0, 0, 0}));
}

TEST_F(SubnetPmaTest, BadInput) {
  // A port the node lacks: invalid field (IBA 13.4.7), no data, no reset.
  for (auto [dlid, port] : {std::pair{kSwALid, 9}, {kSwALid, 0}, {kCa2Lid, 2}, {kCa3Lid, 3}}) {
    const Answer a = ask(pma(0x02, 0x0012, static_cast<uint8_t>(port), 0xffff), dlid);
    ASSERT_EQ(a.d, Disposition::kRespond);
    EXPECT_EQ(Status::get(a.out.data()), 0x1c) << dlid << " " << port;
    EXPECT_EQ(a.reset.local | a.reset.peer, 0u);
  }
  // An attribute the PMAs do not have: 0x0C; a method: 0x08; a class version: 0x04.
  EXPECT_EQ(Status::get(ask(pma(0x01, 0x0030, 1), kSwALid).out.data()), 0x0c);
  EXPECT_EQ(Status::get(ask(pma(0x07, 0x0012, 1), kSwALid).out.data()), 0x08);
  Mad v = pma(0x01, 0x0012, 1);
  v[2] = 2;
  EXPECT_EQ(Status::get(ask(v, kSwALid).out.data()), 0x04);
  // No such LID, a response, another class, a short MAD: dropped.
  EXPECT_EQ(ask(pma(0x01, 0x0012, 1), 0x40).d, Disposition::kDrop);
  Mad r = pma(0x81, 0x0012, 1);
  EXPECT_EQ(ask(r, kSwALid).d, Disposition::kDrop);
  Mad sa = pma(0x01, 0x0012, 1);
  sa[1] = 0x03;
  EXPECT_EQ(ask(sa, kSwALid).d, Disposition::kDrop);
  Answer a;
  shm::SubnetLock lock(*state_);
  EXPECT_EQ(answer_subnet_pma(subnet_, counters_, v.data(), 23, kSwALid, a.out.data(), &a.reset), Disposition::kDrop);
}

TEST_F(SubnetPmaTest, RandomGmpsNeverCrash) {
  std::mt19937 rng(5);
  for (int i = 0; i < 5000; ++i) {
    Mad m;
    for (auto& b : m) b = static_cast<uint8_t>(rng());
    m[1] = 0x04;
    m[3] &= 0x7f;
    Answer a;
    shm::SubnetLock lock(*state_);
    (void)answer_subnet_pma(subnet_, counters_, m.data(), m.size(), static_cast<uint16_t>(rng() % 8), a.out.data(),
                            &a.reset);
  }
}

}  // namespace
}  // namespace softverbs::mad
