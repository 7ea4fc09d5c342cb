#include "mad/subnet_sma.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "mad/mad_layout.h"

namespace softverbs::mad {
namespace {

using Bytes = std::vector<uint8_t>;
using Mad = std::array<uint8_t, kMadBytes>;

// The device's CA on sw-a port 1; sw-a and sw-b joined by ports 7 and 8;
// sw-a port 3 has no link.
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
[2] "ca-4"[2]

Hca 2 "dev"
caguid=0x0011000000000300
Hca 1 "ca-2"
caguid=0x0011000000000400
Hca 2 "ca-3"
Hca 2 "ca-4"
)";

class SubnetSmaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TopologyParse p = parse_topology(kNet);
    ASSERT_TRUE(p.ok()) << p.error;
    topo_ = std::move(p.topology);
    path_ = "/dev/shm/softverbs-subnet-sma-test-" + std::to_string(getpid());
    unlink(path_.c_str());
    auto st = shm::SubnetState::open(path_);
    ASSERT_TRUE(st.is_ok());
    state_ = std::move(st.value());
    subnet_.topology = &topo_;
    subnet_.state = state_.get();
    subnet_.local.node_guid = 0x0200000000000010ull;
    subnet_.local.sys_image_guid = 0x0200000000000010ull;
    subnet_.local.port_guid = 0x0200000000000011ull;
    subnet_.local.vendor_id = 0x5356;
    subnet_.local.device_id = 1;
    subnet_.local.revision = 1;
    subnet_.local.lid = 1;
    subnet_.local.sm_lid = 1;
    subnet_.local.cap_mask = 0x14802;
    std::strcpy(subnet_.local.node_desc, "host softverbs0");
  }
  void TearDown() override {
    state_.reset();
    unlink(path_.c_str());
  }

  // A directed-route SMP along `path` (InitialPath[1..n]).
  static Mad dr(uint8_t method, uint16_t attr, uint32_t modifier, std::initializer_list<uint8_t> path) {
    Mad m{};
    m[0] = 1;
    m[1] = 0x81;
    m[2] = 1;
    m[3] = method;
    TransactionId::set(m.data(), 0x0102030405060708ull);
    AttributeId::set(m.data(), attr);
    AttributeModifier::set(m.data(), modifier);
    DrHopCount::set(m.data(), static_cast<uint8_t>(path.size()));
    DrSlid::set(m.data(), kPermissiveLid);
    DrDlid::set(m.data(), kPermissiveLid);
    unsigned i = 1;
    for (uint8_t p : path) m[kDrInitialPathOffset + i++] = p;
    return m;
  }
  static Mad lid_routed(uint8_t method, uint16_t attr, uint32_t modifier) {
    Mad m = dr(method, attr, modifier, {});
    m[1] = 0x01;
    return m;
  }

  struct Answer {
    Disposition d;
    Mad out{};
    SmpEffect effect;
    RaisedTraps traps;
  };
  Answer ask(const Mad& in, uint16_t dlid = 0) {
    Answer a;
    shm::SubnetLock lock(*state_);
    a.d = answer_subnet_smp(subnet_, in.data(), in.size(), dlid, a.out.data(), &a.effect, &a.traps);
    return a;
  }
  static Bytes data(const Mad& m, size_t n = kSmpDataBytes) {
    return Bytes(m.begin() + kSmpDataOffset, m.begin() + kSmpDataOffset + n);
  }
  // A big-endian field of `bytes` bytes at `off` in the attribute data.
  static uint64_t be(const Mad& m, size_t off, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v = v << 8 | m[kSmpDataOffset + off + i];
    return v;
  }
  static uint16_t status(const Mad& m) { return static_cast<uint16_t>(DrStatus::get(m.data())); }

  // PortInfo Set of LID, SM LID and PortState on a node reached by `path`.
  Answer set_port(std::initializer_list<uint8_t> path, uint32_t port, uint16_t lid, uint8_t state) {
    Mad m = dr(0x02, 0x0015, port, path);
    uint8_t* d = m.data() + kSmpDataOffset;
    d[16] = static_cast<uint8_t>(lid >> 8);
    d[17] = static_cast<uint8_t>(lid);
    d[19] = 1;  // MasterSMLID 1
    d[32] = state;  // PortState in the low nibble, LinkSpeedSupported 0
    return ask(m);
  }

  Topology topo_;
  std::string path_;
  std::unique_ptr<shm::SubnetState> state_;
  Subnet subnet_;
};

TEST_F(SubnetSmaTest, NodeInfoOfTheSwitchOneHopAwayGolden) {
  const Answer a = ask(dr(0x01, 0x0011, 0, {1}));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[1], 0x81);
  EXPECT_EQ(a.out[3], 0x81);   // GetResp
  EXPECT_EQ(a.out[4], 0x80);   // direction: returning; status 0
  EXPECT_EQ(a.out[5], 0x00);
  EXPECT_EQ(DrHopPointer::get(a.out.data()), 0);
  EXPECT_EQ(DrHopCount::get(a.out.data()), 1);
  EXPECT_EQ(a.out[kDrReturnPathOffset + 1], 1);  // it came in on sw-a's port 1
  EXPECT_EQ(TransactionId::get(a.out.data()), 0x0102030405060708ull);
  EXPECT_EQ(data(a.out, 40), Bytes({0x01, 0x01, 0x02, 0x08,                          // versions, switch, 8 ports
                                    0x00, 0x11, 0, 0, 0, 0, 0x01, 0x00,              // SystemImageGUID
                                    0x00, 0x11, 0, 0, 0, 0, 0x01, 0x00,              // NodeGUID
                                    0x00, 0x11, 0, 0, 0, 0, 0x01, 0x00,              // PortGUID (port 0's)
                                    0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,  // PartitionCap, DeviceID, Revision
                                    0x01, 0x00, 0x53, 0x56}));                       // LocalPortNum 1, VendorID
}

TEST_F(SubnetSmaTest, DirectedRouteAcrossTwoSwitchesToACa) {
  Answer a = ask(dr(0x01, 0x0011, 0, {1, 7}));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[64 + 12 + 6], 0x02);  // sw-b's NodeGUID ends 0x0200
  EXPECT_EQ(a.out[64 + 36], 7);         // arrived on port 7
  EXPECT_EQ(a.out[kDrReturnPathOffset + 1], 1);
  EXPECT_EQ(a.out[kDrReturnPathOffset + 2], 7);

  a = ask(dr(0x01, 0x0011, 0, {1, 7, 1}));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(data(a.out, 4), Bytes({1, 1, 1, 2}));  // CA, 2 ports
  EXPECT_EQ(be(a.out, 12, 8), 0x0011000000000400ull);
  EXPECT_EQ(be(a.out, 20, 8), 0x0011000000000401ull);  // port 1's GUID
  EXPECT_EQ(a.out[kDrReturnPathOffset + 3], 1);

  a = ask(dr(0x01, 0x0010, 0, {1, 7, 2}));  // ca-4 through its port 2
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(data(a.out, 5), Bytes({'c', 'a', '-', '4', 0}));
  a = ask(dr(0x01, 0x0011, 0, {1, 7, 2}));
  EXPECT_EQ(a.out[64 + 36], 2);

  // Out and back to the device's own port: the device answers, with its GUIDs.
  a = ask(dr(0x01, 0x0011, 0, {1, 1}));
  EXPECT_EQ(a.d, Disposition::kDrop);  // never back out of the port it came in on
  a = ask(dr(0x01, 0x0011, 0, {1, 7, 8, 1}));  // over to sw-b, back by the other link
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(be(a.out, 12, 8), 0x0200000000000010ull);
}

// Hop 0 and the port's own LID: the device's CA as the topology has it.
TEST_F(SubnetSmaTest, TheDevicesOwnCaHasTheTopologysPorts) {
  Answer a = ask(dr(0x01, 0x0011, 0, {}));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(data(a.out, 4), Bytes({1, 1, 1, 2}));  // CA, 2 ports
  EXPECT_EQ(be(a.out, 12, 8), 0x0200000000000010ull);
  EXPECT_EQ(be(a.out, 20, 8), 0x0200000000000011ull);
  EXPECT_EQ(a.out[64 + 36], 1);
  a = ask(dr(0x01, 0x0015, 2, {}));  // port 2: in the subnet state, no link
  ASSERT_EQ(status(a.out), 0);
  EXPECT_EQ(a.out[64 + 32] & 0xf, 1);
  a = ask(dr(0x01, 0x0015, 0, {}));  // port 1: the device's
  EXPECT_EQ(be(a.out, 16, 2), 1);
  EXPECT_EQ(a.out[64 + 32] & 0xf, 4);
  a = ask(lid_routed(0x01, 0x0011, 0), 1);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[1], 0x01);
  EXPECT_EQ(a.out[64 + 3], 2);
  a = ask(dr(0x01, 0x0014, 0, {}));  // GUIDInfo
  EXPECT_EQ(be(a.out, 0, 8), 0x0200000000000011ull);
}

TEST_F(SubnetSmaTest, PathsOffTheFabricAreDropped) {
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 3})).d, Disposition::kDrop);      // sw-a port 3: no link
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 9})).d, Disposition::kDrop);      // sw-a has 8 ports
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 0})).d, Disposition::kDrop);      // port 0 is no way out
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {2})).d, Disposition::kDrop);         // the device sends on port 1
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 2, 1})).d, Disposition::kDrop);   // ca-2 forwards nothing
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 7, 2, 1})).d, Disposition::kDrop);
  Mad m = dr(0x01, 0x0011, 0, {1});
  DrHopPointer::set(m.data(), 1);  // already under way
  EXPECT_EQ(ask(m).d, Disposition::kDrop);
  m = dr(0x01, 0x0011, 0, {1});
  DrHopCount::set(m.data(), 64);
  EXPECT_EQ(ask(m).d, Disposition::kDrop);
  m = dr(0x01, 0x0011, 0, {1});
  DrSlid::set(m.data(), 5);  // a LID-routed first part whose answer would go to another port
  EXPECT_EQ(ask(m, 2).d, Disposition::kDrop);
}

TEST_F(SubnetSmaTest, MalformedAndUnsupportedRequests) {
  Mad m = dr(0x01, 0x0011, 0, {1});
  {
    shm::SubnetLock lock(*state_);
    uint8_t out[kMadBytes];
    EXPECT_EQ(answer_subnet_smp(subnet_, m.data(), 100, 0, out, nullptr), Disposition::kDrop);
    EXPECT_EQ(answer_subnet_smp(subnet_, nullptr, kMadBytes, 0, out, nullptr), Disposition::kDrop);
  }
  m[3] = 0x81;  // a response
  EXPECT_EQ(ask(m).d, Disposition::kDrop);
  m = dr(0x01, 0x0011, 0, {1});
  m[2] = 2;  // class version
  Answer a = ask(m);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(status(a.out), 0x0004);
  a = ask(dr(0x01, 0x0012, 0, {1, 2}));  // SwitchInfo of a CA
  EXPECT_EQ(status(a.out), 0x000c);
  a = ask(dr(0x02, 0x0011, 0, {1}));  // a Set of the read-only NodeInfo
  EXPECT_EQ(status(a.out), 0x000c);
  a = ask(dr(0x01, 0x0015, 9, {1}));  // PortInfo of a port sw-a lacks
  EXPECT_EQ(status(a.out), 0x001c);
  a = ask(dr(0x01, 0x0019, shm::kLftCap / 64, {1}));  // an LFT block beyond LinearFDBCap
  EXPECT_EQ(status(a.out), 0x001c);
  EXPECT_EQ(data(a.out), Bytes(kSmpDataBytes, 0));
  a = ask(dr(0x01, 0x001b, 1u << 28, {1}));  // MFT position 1 (ports 16-31) of an 8-port switch
  EXPECT_EQ(status(a.out), 0x001c);
  a = ask(dr(0x03, 0x0011, 0, {1}));  // Send: no such SMA method
  EXPECT_EQ(status(a.out), 0x0008);
}

TEST_F(SubnetSmaTest, PortStatesBeforeAnySm) {
  Answer a = ask(dr(0x01, 0x0015, 0, {1}));  // sw-a's port 0
  ASSERT_EQ(status(a.out), 0);
  EXPECT_EQ(be(a.out, 16, 2), 0);  // LID 0
  EXPECT_EQ(a.out[64 + 32] & 0xf, 2);                    // INIT
  EXPECT_EQ(a.out[64 + 28], 1);                          // LocalPortNum: arrived on port 1
  a = ask(dr(0x01, 0x0015, 3, {1}));  // port 3: no link
  EXPECT_EQ(a.out[64 + 32] & 0xf, 1);         // DOWN
  EXPECT_EQ(a.out[64 + 33] >> 4, 2);          // Polling
  a = ask(dr(0x01, 0x0015, 2, {1, 7, 2}));  // ca-4 port 2
  EXPECT_EQ(a.out[64 + 32] & 0xf, 2);
  EXPECT_EQ(be(a.out, 20, 4) & 2u, 0u);  // no IsSM
  a = ask(dr(0x01, 0x0015, 1, {1, 7, 2}));  // ca-4 port 1: no link
  EXPECT_EQ(a.out[64 + 32] & 0xf, 1);
}

TEST_F(SubnetSmaTest, AnSmBringsPortsUpInOrder) {
  // ACTIVE straight from INIT is refused; ARMED then ACTIVE is taken.
  Answer a = set_port({1, 7, 1}, 0, 4, 4);
  EXPECT_EQ(status(a.out), 0x001c);
  a = set_port({1, 7, 1}, 0, 4, 3);
  EXPECT_EQ(status(a.out), 0);
  EXPECT_EQ(be(a.out, 16, 2), 4);
  EXPECT_EQ(a.out[64 + 32] & 0xf, 3);
  a = set_port({1, 7, 1}, 0, 4, 4);
  EXPECT_EQ(status(a.out), 0);
  a = ask(dr(0x01, 0x0015, 0, {1, 7, 1}));
  EXPECT_EQ(a.out[64 + 32] & 0xf, 4);
  EXPECT_EQ(be(a.out, 18, 2), 1);  // MasterSMLID
  // A port without a link cannot be armed; a multicast LID is no port's.
  EXPECT_EQ(status(set_port({1}, 3, 0, 3).out), 0x001c);
  EXPECT_EQ(status(set_port({1}, 0, 0xc001, 0).out), 0x001c);
  // DOWN restarts the link: it comes back INIT.
  EXPECT_EQ(status(set_port({1, 7, 1}, 0, 4, 1).out), 0);
  a = ask(dr(0x01, 0x0015, 0, {1, 7, 1}));
  EXPECT_EQ(a.out[64 + 32] & 0xf, 2);
}

// IBA 14.2.5.6 ClientReregister: a CA's port passes it to its clients (the
// caller raises IBV_EVENT_CLIENT_REREGISTER on that CA's device); a
// switch has no clients, and a Set without the bit asks nothing.
TEST_F(SubnetSmaTest, ClientReregisterOfARemoteCaIsPassedOn) {
  auto set_rereg = [&](std::initializer_list<uint8_t> path, bool rereg) {
    Mad m = dr(0x02, 0x0015, 0, path);
    uint8_t* d = m.data() + kSmpDataOffset;
    d[19] = 1;  // MasterSMLID 1
    if (rereg) d[51] |= 0x80;
    return ask(m);
  };
  Answer a = set_rereg({1, 7, 1}, true);
  EXPECT_EQ(status(a.out), 0);
  const auto ca = static_cast<unsigned>(topo_.find("ca-3"));
  EXPECT_EQ(a.effect.reregistered_ca_nodes, std::vector<unsigned>{ca});
  EXPECT_FALSE(a.effect.client_reregister);  // not the device's own port
  EXPECT_TRUE(set_rereg({1, 7, 1}, false).effect.reregistered_ca_nodes.empty());
  EXPECT_TRUE(set_rereg({1}, true).effect.reregistered_ca_nodes.empty());
}

TEST_F(SubnetSmaTest, MKeyProtectsANode) {
  // The SM sets M_Key 0x1234 with protection level 1 on sw-b.
  Mad m = dr(0x02, 0x0015, 0, {1, 7});
  m[64 + 6] = 0x12;
  m[64 + 7] = 0x34;
  m[64 + 34] = 0x40;  // M_KeyProtectBits 1
  Answer a = ask(m);
  ASSERT_EQ(status(a.out), 0);
  EXPECT_EQ(be(a.out, 0, 8), 0x1234u);
  // The wrong key: a Get is answered with the key hidden, a Set discarded.
  a = ask(dr(0x01, 0x0015, 0, {1, 7}));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(be(a.out, 0, 8), 0u);
  EXPECT_EQ(a.out[64 + 34] >> 6, 1);
  EXPECT_EQ(ask(dr(0x02, 0x0012, 0, {1, 7})).d, Disposition::kDrop);
  // The right key: the Get shows it, a Set goes through; other nodes are free.
  m = dr(0x01, 0x0015, 0, {1, 7});
  SmpMKey::set(m.data(), 0x1234);
  EXPECT_EQ(be(ask(m).out, 0, 8), 0x1234u);
  m = dr(0x02, 0x0012, 0, {1, 7});
  SmpMKey::set(m.data(), 0x1234);
  EXPECT_EQ(status(ask(m).out), 0);
  EXPECT_EQ(ask(dr(0x02, 0x0012, 0, {1})).d, Disposition::kRespond);
  // Level 2: a Get with the wrong key is discarded too.
  m = dr(0x02, 0x0015, 0, {1, 7});
  SmpMKey::set(m.data(), 0x1234);
  m[64 + 6] = 0x12;
  m[64 + 7] = 0x34;
  m[64 + 34] = 0x80;
  ASSERT_EQ(status(ask(m).out), 0);
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 7})).d, Disposition::kDrop);
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 7, 1})).d, Disposition::kRespond);  // the CA beyond has no key
}

// ibportstate's disable and enable: PortInfo:PortPhysicalState 3, then 2.
TEST_F(SubnetSmaTest, ALinkStateChangeRaisesTrap128ToTheSm) {
  // An SM at the device's LID 1 gives sw-a LID 2 and sw-b LID 3 and routes
  // LID 1 back to itself: sw-b over 7, sw-a over 1.
  ASSERT_EQ(status(set_port({1}, 0, 2, 0).out), 0);
  ASSERT_EQ(status(set_port({1, 7}, 0, 3, 0).out), 0);
  auto route_to_sm = [&](std::initializer_list<uint8_t> path, uint8_t out) {
    Mad m = dr(0x02, 0x0019, 0, path);
    std::memset(m.data() + 64, 0xff, 64);
    m[64 + 1] = out;
    return status(ask(m).out);
  };
  ASSERT_EQ(route_to_sm({1, 7}, 7), 0);
  ASSERT_EQ(route_to_sm({1}, 1), 0);
  auto phys = [&](std::initializer_list<uint8_t> path, uint32_t port, uint8_t phys_state) {
    Mad m = dr(0x02, 0x0015, port, path);
    m[64 + 33] = static_cast<uint8_t>(phys_state << 4);
    return ask(m);
  };

  // Disable sw-b port 1 (to ca-3): down at both ends, and sw-b tells the SM.
  Answer a = phys({1, 7}, 1, 3);
  ASSERT_EQ(status(a.out), 0);
  EXPECT_EQ(a.out[64 + 32] & 0xf, 1);   // DOWN
  EXPECT_EQ(a.out[64 + 33] >> 4, 3);    // Disabled
  ASSERT_EQ(a.traps.count, 1u);
  const Trap& t = a.traps.traps[0];
  EXPECT_EQ(t.dlid, 1);
  EXPECT_EQ(t.slid, 3);
  EXPECT_EQ(Method::get(t.mad), 0x05);
  EXPECT_EQ(AttributeId::get(t.mad), kNoticeAttr);
  EXPECT_EQ(Bytes(t.mad + 64, t.mad + 76), Bytes({0x81, 0x00, 0x00, 0x02, 0x00, 0x80, 0x00, 0x03, 0x00, 0x00, 0x00, 0x03}));
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 7, 1})).d, Disposition::kDrop);  // nothing crosses the link
  // sw-b's SwitchInfo:PortStateChange is set until a Set writes 1 to it.
  EXPECT_EQ(ask(dr(0x01, 0x0012, 0, {1, 7})).out[64 + 11] & 0x04, 0x04);
  EXPECT_EQ(ask(dr(0x01, 0x0012, 0, {1})).out[64 + 11] & 0x04, 0);  // sw-a saw no change
  Mad clear = dr(0x02, 0x0012, 0, {1, 7});
  clear[64 + 11] = 0x04;
  EXPECT_EQ(ask(clear).out[64 + 11] & 0x04, 0);

  // Disabling it again changes nothing: no trap.
  EXPECT_EQ(phys({1, 7}, 1, 3).traps.count, 0u);
  // Enabled: the link is back, INIT, and the SM hears of it again.
  a = phys({1, 7}, 1, 2);
  ASSERT_EQ(status(a.out), 0);
  EXPECT_EQ(a.out[64 + 32] & 0xf, 2);
  EXPECT_EQ(a.out[64 + 33] >> 4, 5);  // LinkUp
  EXPECT_EQ(a.traps.count, 1u);
  EXPECT_EQ(ask(dr(0x01, 0x0011, 0, {1, 7, 1})).d, Disposition::kRespond);

  // The link between the switches: both ends raise trap 128.
  a = phys({1}, 8, 3);
  ASSERT_EQ(a.traps.count, 2u);
  EXPECT_EQ(a.traps.traps[0].slid, 2);
  EXPECT_EQ(a.traps.traps[1].slid, 3);
  a = ask(dr(0x01, 0x0015, 8, {1, 7}));  // sw-b's end: down, polling
  EXPECT_EQ(a.out[64 + 32] & 0xf, 1);
  EXPECT_EQ(a.out[64 + 33] >> 4, 2);

  // An SM's own PortState Sets are no link state change: no trap.
  EXPECT_EQ(set_port({1, 7}, 0, 3, 3).traps.count, 0u);
  // A CA raises no trap 128; a port 0 has no physical state to set; other
  // physical states are not the SM's to set.
  EXPECT_EQ(phys({1, 2}, 1, 3).traps.count, 1u);  // ca-2's port: sw-a's end tells
  EXPECT_EQ(status(phys({1}, 0, 3).out), 0x001c);
  EXPECT_EQ(status(phys({1}, 3, 5).out), 0x001c);
  // With no route to the SM the bit is set but the trap goes nowhere.
  ASSERT_EQ(route_to_sm({1, 7}, 0xff), 0);
  ASSERT_EQ(ask(clear).out[64 + 11] & 0x04, 0);
  a = phys({1, 7}, 2, 3);
  EXPECT_EQ(a.traps.count, 0u);
  EXPECT_EQ(ask(dr(0x01, 0x0012, 0, {1, 7})).out[64 + 11] & 0x04, 0x04);
  // A Trap or TrapRepress to a node is taken without an answer.
  Mad repress = lid_routed(0x07, kNoticeAttr, 0);
  EXPECT_EQ(ask(repress, 3).d, Disposition::kDrop);
  EXPECT_EQ(ask(lid_routed(0x05, kNoticeAttr, 0), 3).d, Disposition::kDrop);
}

TEST_F(SubnetSmaTest, SwitchInfoGoldenAndSet) {
  Answer a = ask(dr(0x01, 0x0012, 0, {1}));
  ASSERT_EQ(status(a.out), 0);
  EXPECT_EQ(data(a.out, 20), Bytes({0x0c, 0x00, 0x00, 0x00, 0x04, 0x00,  // LinearFDBCap 3072, Random 0, Multicast 1024
                                    0x00, 0x00, 0x00, 0x00, 0x00,        // LinearFDBTop, default ports
                                    0x00, 0x00, 0x00, 0x00, 0x00,        // LifeTime/PortStateChange, LIDsPerPort, PECap
                                    0x00, 0x00, 0x00, 0x00}));           // caps, MulticastFDBTop
  Mad m = dr(0x02, 0x0012, 0, {1});
  m[64 + 7] = 0x20;          // LinearFDBTop 0x20
  m[64 + 11] = 0x12 << 3;    // LifeTimeValue 0x12
  m[64 + 18] = 0xc0;         // MulticastFDBTop 0xc000
  a = ask(m);
  EXPECT_EQ(status(a.out), 0);
  EXPECT_EQ(data(a.out, 20), Bytes({0x0c, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x90, 0x00,
                                    0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x00}));
  m[64 + 6] = 0x0c;  // LinearFDBTop 0x0c20: beyond the cap
  EXPECT_EQ(status(ask(m).out), 0x001c);
}

TEST_F(SubnetSmaTest, LidRoutedSmpsFollowTheForwardingTables) {
  // Before an SM: no LFT entries, nothing reaches LID 4.
  EXPECT_EQ(ask(lid_routed(0x01, 0x0011, 0), 4).d, Disposition::kDrop);
  // An SM gives ca-3 LID 4 and sw-a LID 2, and routes LID 4 over 7 then 1.
  ASSERT_EQ(status(set_port({1, 7, 1}, 0, 4, 0).out), 0);
  ASSERT_EQ(status(set_port({1}, 0, 2, 0).out), 0);
  Mad m = dr(0x02, 0x0019, 0, {1});
  std::memset(m.data() + 64, 0xff, 64);
  m[64 + 4] = 7;
  EXPECT_EQ(status(ask(m).out), 0);
  Answer a = ask(dr(0x01, 0x0019, 0, {1}));
  EXPECT_EQ(a.out[64 + 4], 7);
  EXPECT_EQ(a.out[64 + 5], 0xff);
  m = dr(0x02, 0x0019, 0, {1, 7});
  std::memset(m.data() + 64, 0xff, 64);
  m[64 + 4] = 1;
  EXPECT_EQ(status(ask(m).out), 0);

  a = ask(lid_routed(0x01, 0x0011, 0), 4);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[1], 0x01);
  EXPECT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(be(a.out, 12, 8), 0x0011000000000400ull);
  a = ask(lid_routed(0x01, 0x0011, 0), 2);  // the first switch itself
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[64 + 2], 2);
  EXPECT_EQ(ask(lid_routed(0x01, 0x0011, 0), 5).d, Disposition::kDrop);  // no route
  EXPECT_TRUE(leaves_port(subnet_.local, lid_routed(0x01, 0x0011, 0).data(), kMadBytes, 4));
  EXPECT_FALSE(leaves_port(subnet_.local, lid_routed(0x01, 0x0011, 0).data(), kMadBytes, 1));
  EXPECT_FALSE(leaves_port(subnet_.local, dr(0x01, 0x0011, 0, {}).data(), kMadBytes, 0));
  EXPECT_TRUE(leaves_port(subnet_.local, dr(0x01, 0x0011, 0, {1}).data(), kMadBytes, 0));
}

// IBA 14.2.2: a directed route with a LID-routed part before it (DrSLID
// not permissive: smpquery -c LID,PATH) or after it (DrDLID not permissive).
TEST_F(SubnetSmaTest, DirectedRoutesWithALidRoutedPart) {
  // An SM gives ca-3 LID 4 and sw-a LID 2, and routes LID 4 over 7 then 1.
  ASSERT_EQ(status(set_port({1, 7, 1}, 0, 4, 0).out), 0);
  ASSERT_EQ(status(set_port({1}, 0, 2, 0).out), 0);
  Mad lft = dr(0x02, 0x0019, 0, {1});
  std::memset(lft.data() + 64, 0xff, 64);
  lft[64 + 4] = 7;
  ASSERT_EQ(status(ask(lft).out), 0);
  lft = dr(0x02, 0x0019, 0, {1, 7});
  std::memset(lft.data() + 64, 0xff, 64);
  lft[64 + 4] = 1;
  ASSERT_EQ(status(ask(lft).out), 0);
  const auto combined = [](std::initializer_list<uint8_t> path) {
    Mad m = dr(0x01, 0x0011, 0, path);
    DrSlid::set(m.data(), 1);  // the device's LID: the answer comes back to it
    return m;
  };
  // LID 2 (sw-a), then out of its port 7: sw-b. Golden: the response
  // keeps both LIDs and the initial path, and records the return path.
  Mad in = combined({7});
  Answer a = ask(in, 2);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(status(a.out), 0);
  EXPECT_EQ(a.out[1], 0x81);
  EXPECT_EQ(a.out[4] & 0x80, 0x80);  // D bit: returning
  EXPECT_EQ(DrHopCount::get(a.out.data()), 1u);
  EXPECT_EQ(DrSlid::get(a.out.data()), 1u);
  EXPECT_EQ(DrDlid::get(a.out.data()), kPermissiveLid);
  EXPECT_EQ(a.out[kDrInitialPathOffset + 1], 7);
  EXPECT_EQ(a.out[kDrReturnPathOffset + 1], 7);
  EXPECT_EQ(be(a.out, 12, 8), 0x0011000000000200ull);  // sw-b's NodeGUID
  EXPECT_EQ(be(a.out, 36, 1), 7);                       // LocalPortNum: it came in on 7
  // No directed hop: the node at the LID answers. Back out of the port the
  // LID-routed part came in on: the device's own CA.
  a = ask(combined({}), 2);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(be(a.out, 12, 8), 0x0011000000000100ull);
  a = ask(combined({1}), 2);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(be(a.out, 12, 8), subnet_.local.node_guid);
  // Off the fabric: no route to the first LID, a hop to nowhere, a CA
  // asked to forward, an answer for another port.
  EXPECT_EQ(ask(combined({7}), 9).d, Disposition::kDrop);
  EXPECT_EQ(ask(combined({3}), 2).d, Disposition::kDrop);
  EXPECT_EQ(ask(combined({1, 1}), 2).d, Disposition::kDrop);
  in = combined({7});
  DrSlid::set(in.data(), 3);
  EXPECT_EQ(ask(in, 2).d, Disposition::kDrop);
  // DrDLID: directed to sw-a, then by its LFT to LID 4 (ca-3).
  in = dr(0x01, 0x0011, 0, {1});
  DrDlid::set(in.data(), 4);
  a = ask(in);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(be(a.out, 12, 8), 0x0011000000000400ull);
  DrDlid::set(in.data(), 2);  // the switch that ends the directed part
  EXPECT_EQ(be(ask(in).out, 12, 8), 0x0011000000000100ull);
  DrDlid::set(in.data(), 6);  // no route
  EXPECT_EQ(ask(in).d, Disposition::kDrop);
  in = dr(0x01, 0x0011, 0, {1, 2});
  DrDlid::set(in.data(), 4);  // ca-2 routes nothing on
  EXPECT_EQ(ask(in).d, Disposition::kDrop);
  // Such SMPs leave the port unless all of them is for the port itself.
  EXPECT_TRUE(leaves_port(subnet_.local, combined({}).data(), kMadBytes, 2));
  EXPECT_FALSE(leaves_port(subnet_.local, combined({}).data(), kMadBytes, 1));
  Mad d = dr(0x01, 0x0011, 0, {});
  DrDlid::set(d.data(), 4);
  EXPECT_TRUE(leaves_port(subnet_.local, d.data(), kMadBytes, 0));
}

TEST_F(SubnetSmaTest, MulticastTableAndQosTablesOfARemotePort) {
  Mad m = dr(0x02, 0x001b, 1, {1});  // block 1, position 0
  m[64] = 0x00;
  m[65] = 0x86;  // ports 1, 2 and 7
  EXPECT_EQ(status(ask(m).out), 0);
  Answer a = ask(dr(0x01, 0x001b, 1, {1}));
  EXPECT_EQ(data(a.out, 4), Bytes({0x00, 0x86, 0x00, 0x00}));
  a = ask(dr(0x01, 0x001b, 0, {1}));
  EXPECT_EQ(data(a.out, 2), Bytes({0, 0}));

  // SL2VL of ca-3: the boot table, then what an SM sets.
  a = ask(dr(0x01, 0x0017, 0, {1, 7, 1}));
  EXPECT_EQ(data(a.out, 8), Bytes({0x01, 0x23, 0x45, 0x67, 0x01, 0x23, 0x45, 0x67}));
  m = dr(0x02, 0x0017, 0, {1, 7, 1});
  m[64] = 0x10;
  EXPECT_EQ(status(ask(m).out), 0);
  a = ask(dr(0x01, 0x0017, 0, {1, 7, 1}));
  EXPECT_EQ(data(a.out, 2), Bytes({0x10, 0x00}));
  a = ask(dr(0x01, 0x0017, 0, {1, 7, 2}));  // ca-4 is untouched
  EXPECT_EQ(data(a.out, 2), Bytes({0x01, 0x23}));
  EXPECT_FALSE(a.effect.qos_changed);
}

// IBA 14.2.5.8: a switch's SL2VL is per input (modifier bits 15-8) and
// output port (7-0); a Set of one pair leaves the others as they were.
TEST_F(SubnetSmaTest, SwitchSlToVlIsPerInputAndOutputPort) {
  Answer a = ask(dr(0x01, 0x0017, 0x0102, {1}));  // sw-a, in 1, out 2
  EXPECT_EQ(status(a.out), 0);
  EXPECT_EQ(data(a.out, 8), Bytes({0x01, 0x23, 0x45, 0x67, 0x01, 0x23, 0x45, 0x67}));
  Mad m = dr(0x02, 0x0017, 0x0102, {1});
  m[64] = 0x10;
  m[71] = 0x7f;  // SL15 on VL15: discarded
  a = ask(m);
  EXPECT_EQ(status(a.out), 0);
  EXPECT_EQ(data(a.out, 8), Bytes({0x10, 0, 0, 0, 0, 0, 0, 0x7f}));
  a = ask(dr(0x01, 0x0017, 0x0102, {1}));
  EXPECT_EQ(data(a.out, 8), Bytes({0x10, 0, 0, 0, 0, 0, 0, 0x7f}));
  a = ask(dr(0x01, 0x0017, 0x0702, {1}));  // another input, the same output
  EXPECT_EQ(data(a.out, 2), Bytes({0x01, 0x23}));
  a = ask(dr(0x01, 0x0017, 0x0201, {1}));  // the reverse direction
  EXPECT_EQ(data(a.out, 2), Bytes({0x01, 0x23}));
  // An input port the switch does not have; a VL the output port has not.
  EXPECT_EQ(status(ask(dr(0x01, 0x0017, 0x0902, {1})).out), 0x1c);
  m = dr(0x02, 0x0017, 0x0003, {1});
  m[64] = 0x90;
  EXPECT_EQ(status(ask(m).out), 0x1c);
  EXPECT_EQ(data(ask(dr(0x01, 0x0017, 0x0003, {1})).out, 1), Bytes({0x01}));
}

TEST_F(SubnetSmaTest, PKeyTableOfARemoteCaIsSettableASwitchsIsNot) {
  subnet_.local.partition_cap = 32;
  // ca-3 boots with the default P_Key alone; an SM adds 0x8001 at index 1.
  Answer a = ask(dr(0x01, 0x0016, 0, {1, 7, 1}));
  EXPECT_EQ(status(a.out), 0);
  EXPECT_EQ(data(a.out, 4), Bytes({0xff, 0xff, 0x00, 0x00}));
  Mad m = dr(0x02, 0x0016, 0, {1, 7, 1});
  m[64] = m[65] = 0xff;
  m[66] = 0x80;
  m[67] = 0x01;
  a = ask(m);
  EXPECT_EQ(status(a.out), 0);
  EXPECT_FALSE(a.effect.pkeys_changed) << "not the device's port: nothing for it to store";
  EXPECT_EQ(data(a.out, 4), Bytes({0xff, 0xff, 0x80, 0x01}));
  a = ask(dr(0x01, 0x0016, 0, {1, 7, 1}));
  EXPECT_EQ(data(a.out, 4), Bytes({0xff, 0xff, 0x80, 0x01}));
  a = ask(dr(0x01, 0x0016, 0, {1, 7, 2}));  // ca-4 is untouched
  EXPECT_EQ(data(a.out, 4), Bytes({0xff, 0xff, 0x00, 0x00}));
  // A switch's port (block 0 of port 1): read as the default, not settable.
  m = dr(0x02, 0x0016, 1u << 16, {1});
  m[64] = 0x80;
  m[65] = 0x02;
  EXPECT_EQ(status(ask(m).out), 0x000c);
  a = ask(dr(0x01, 0x0016, 1u << 16, {1}));
  EXPECT_EQ(data(a.out, 2), Bytes({0xff, 0xff}));
}

TEST_F(SubnetSmaTest, StateIsSharedThroughTheFile) {
  ASSERT_EQ(status(set_port({1, 7, 1}, 0, 9, 0).out), 0);
  auto other = shm::SubnetState::open(path_);
  ASSERT_TRUE(other.is_ok());
  Subnet s = subnet_;
  s.state = other.value().get();
  Mad in = dr(0x01, 0x0015, 0, {1, 7, 1});
  Mad out{};
  shm::SubnetLock lock(*other.value());
  ASSERT_EQ(answer_subnet_smp(s, in.data(), in.size(), 0, out.data(), nullptr), Disposition::kRespond);
  EXPECT_EQ(be(out, 16, 2), 9);
}

// Random SMPs along random short paths, Gets and Sets of any attribute and
// modifier: every answer is a response, and nothing crashes or hangs (a
// loop in the forwarding tables the random Sets write included).
TEST_F(SubnetSmaTest, RandomSmpsNeverCrash) {
  std::mt19937 rng(19);
  for (int i = 0; i < 20000; ++i) {
    Mad m{};
    for (auto& b : m) b = static_cast<uint8_t>(rng());
    if (i % 4 != 3) {  // SMP-shaped most of the time, so the walks and attributes run
      m[0] = 1;
      m[1] = i % 2 == 0 ? 0x81 : 0x01;
      m[2] = 1;
      m[3] = static_cast<uint8_t>(1 + rng() % 2);  // Get or Set
      m[4] &= 0x7f;
      m[6] = 0;
      const unsigned hops = rng() % 5;
      m[7] = static_cast<uint8_t>(hops);
      DrSlid::set(m.data(), kPermissiveLid);
      DrDlid::set(m.data(), kPermissiveLid);
      m[kDrInitialPathOffset + 1] = 1;
      for (unsigned h = 2; h <= hops; ++h) m[kDrInitialPathOffset + h] = static_cast<uint8_t>(rng() % 10);
      const uint16_t attrs[] = {0x10, 0x11, 0x12, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1b, 0x20, 0x99};
      AttributeId::set(m.data(), attrs[rng() % (sizeof attrs / sizeof attrs[0])]);
      if (rng() % 2 == 0) AttributeModifier::set(m.data(), rng() % 10);
    }
    const Answer a = ask(m, static_cast<uint16_t>(rng() % 12));
    if (a.d == Disposition::kRespond) {
      EXPECT_EQ(ResponseBit::get(a.out.data()), 1);
      EXPECT_EQ(a.out[1], m[1]);
    }
  }
}

}  // namespace
}  // namespace softverbs::mad
