#include "mad/sma.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "mad/mad_layout.h"

namespace softverbs::mad {
namespace {

using Bytes = std::vector<uint8_t>;

PortView test_port() {
  PortView p;
  p.node_guid = 0x0002c90300000001ull;
  p.sys_image_guid = 0x0002c90300000001ull;
  p.port_guid = 0x0002c90300000002ull;
  p.vendor_id = 0x5356;
  p.device_id = 1;
  p.revision = 1;
  p.partition_cap = 1;
  p.lid = 1;
  p.sm_lid = 1;
  p.cap_mask = 0x14802;
  std::strcpy(p.node_desc, "host softverbs0");
  return p;
}

// A SubnGet/Set as an SM would send it; `hops` < 0 for a LID-routed one.
std::array<uint8_t, kMadBytes> smp(uint8_t method, uint16_t attr, uint32_t modifier, int hops = 0) {
  std::array<uint8_t, kMadBytes> m{};
  m[0] = 1;
  m[1] = hops < 0 ? 0x01 : 0x81;
  m[2] = 1;
  m[3] = method;
  TransactionId::set(m.data(), 0x1122334455667788ull);
  AttributeId::set(m.data(), attr);
  AttributeModifier::set(m.data(), modifier);
  if (hops >= 0) {
    DrHopCount::set(m.data(), static_cast<uint8_t>(hops));
    DrSlid::set(m.data(), kPermissiveLid);
    DrDlid::set(m.data(), kPermissiveLid);
    m[kDrInitialPathOffset + 1] = 1;
  }
  return m;
}

Bytes data_of(const uint8_t* out) { return Bytes(out + kSmpDataOffset, out + kSmpDataOffset + kSmpDataBytes); }

Bytes padded(Bytes head) {
  head.resize(kSmpDataBytes, 0);
  return head;
}

struct Answer {
  Disposition d;
  std::array<uint8_t, kMadBytes> out{};
};

Answer ask(const std::array<uint8_t, kMadBytes>& in, const PortView& p = test_port()) {
  Answer a;
  a.d = answer_smp(p, in.data(), in.size(), a.out.data());
  return a;
}

TEST(Sma, DirectedRouteNodeInfoGolden) {
  const Answer a = ask(smp(0x01, 0x0011, 0));
  ASSERT_EQ(a.d, Disposition::kRespond);
  // GetResp, the direction bit set, status 0, the transaction kept.
  EXPECT_EQ(a.out[3], 0x81);
  EXPECT_EQ(a.out[4], 0x80);
  EXPECT_EQ(a.out[5], 0x00);
  EXPECT_EQ(TransactionId::get(a.out.data()), 0x1122334455667788ull);
  EXPECT_EQ(data_of(a.out.data()), padded({0x01, 0x01, 0x01, 0x01,                          // versions, CA, 1 port
                                           0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x01,  // SystemImageGUID
                                           0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x01,  // NodeGUID
                                           0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x02,  // PortGUID
                                           0x00, 0x01, 0x00, 0x01,                          // PartitionCap, DeviceID
                                           0x00, 0x00, 0x00, 0x01,                          // Revision
                                           0x01, 0x00, 0x53, 0x56}));                       // LocalPortNum, VendorID
}

TEST(Sma, LidRoutedPortInfoGolden) {
  const Answer a = ask(smp(0x01, 0x0015, 0, -1));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[3], 0x81);
  EXPECT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data_of(a.out.data()),
            Bytes({0, 0, 0, 0, 0, 0, 0, 0,                            // M_Key
                   0xfe, 0x80, 0, 0, 0, 0, 0, 0,                      // GidPrefix
                   0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x48, 0x02,    // LID, MasterSMLID, CapabilityMask
                   0x00, 0x00, 0x00, 0x00,                            // DiagCode, M_KeyLeasePeriod
                   0x01, 0x02, 0x03, 0x02,                            // LocalPortNum, LinkWidth*
                   0x14, 0x52, 0x00, 0x11,                            // speeds/Active, LinkUp/Polling, LMC
                   0x50, 0x40, 0x00, 0x08, 0x08, 0x05, 0xff, 0x40,    // MTU/SL, VLCap 0-7, VLHighLimit, VLArb caps, OperVLs 0-7
                   0, 0, 0, 0, 0, 0,                                  // violation counters
                   0x01, 0x12, 0x10, 0x00, 0x00, 0x00, 0, 0, 0, 0,    // GUIDCap, SubnetTimeOut, RespTime
                   0x00, 0x00, 0x23, 0x03}));                         // CapabilityMask2, extended speeds
}

TEST(Sma, TablesGolden) {
  Answer a = ask(smp(0x01, 0x0016, 0));
  EXPECT_EQ(DrStatus::get(a.out.data()), 0);
  EXPECT_EQ(data_of(a.out.data()), padded({0xff, 0xff}));
  a = ask(smp(0x01, 0x0014, 0));
  EXPECT_EQ(data_of(a.out.data()), padded({0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x02}));
  // The boot tables: SL n on VL n mod 8; every data VL once, low priority.
  a = ask(smp(0x01, 0x0017, 0));
  EXPECT_EQ(data_of(a.out.data()), padded({0x01, 0x23, 0x45, 0x67, 0x01, 0x23, 0x45, 0x67}));
  a = ask(smp(0x01, 0x0018, 1));
  EXPECT_EQ(data_of(a.out.data()), padded({0, 0x40, 1, 0x40, 2, 0x40, 3, 0x40, 4, 0x40, 5, 0x40, 6, 0x40, 7, 0x40}));
  a = ask(smp(0x01, 0x0018, 3u << 16 | 1));  // as smpquery and opensm send it: block << 16 | port
  EXPECT_EQ(DrStatus::get(a.out.data()), 0);
  EXPECT_EQ(data_of(a.out.data()), padded({}));
  a = ask(smp(0x01, 0x0018, 3));
  EXPECT_EQ(DrStatus::get(a.out.data()), 0);
  EXPECT_EQ(data_of(a.out.data()), padded({}));
  a = ask(smp(0x01, 0x0010, 0));
  EXPECT_EQ(data_of(a.out.data()), padded({'h', 'o', 's', 't', ' ', 's', 'o', 'f', 't', 'v', 'e', 'r', 'b', 's', '0'}));
  a = ask(smp(0x01, 0x0020, 0));
  EXPECT_EQ(data_of(a.out.data()), padded({0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x02,  // GUID
                                           0, 0, 0, 0, 0, 0, 0, 0,                          // SM_Key
                                           0, 0, 0, 0,                                      // ActCount
                                           0x03}));                                         // MASTER
}

TEST(Sma, StatusForWhatItCannotAnswer) {
  // An attribute the SMA does not have (LinearForwardingTable): 0x0C, no data.
  Answer a = ask(smp(0x01, 0x0019, 0));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(DrStatus::get(a.out.data()), 0x000c);
  EXPECT_EQ(DrDirection::get(a.out.data()), 1);
  EXPECT_EQ(data_of(a.out.data()), padded({}));
  // Set of an attribute that is not writable (NodeInfo).
  a = ask(smp(0x02, 0x0011, 0, -1));
  EXPECT_EQ(Status::get(a.out.data()), 0x000c);
  // A method the SMA has not (Send).
  a = ask(smp(0x03, 0x0011, 0, -1));
  EXPECT_EQ(Status::get(a.out.data()), 0x0008);
  // Out-of-range modifiers.
  a = ask(smp(0x01, 0x0016, 1, -1));
  EXPECT_EQ(Status::get(a.out.data()), 0x001c);
  a = ask(smp(0x01, 0x0014, 1, -1));
  EXPECT_EQ(Status::get(a.out.data()), 0x001c);
  a = ask(smp(0x01, 0x0018, 5, -1));
  EXPECT_EQ(Status::get(a.out.data()), 0x001c);
  a = ask(smp(0x01, 0x0015, 2, -1));
  EXPECT_EQ(Status::get(a.out.data()), 0x001c);
  // A class version the SMA does not speak.
  auto in = smp(0x01, 0x0011, 0, -1);
  in[2] = 2;
  a = ask(in);
  EXPECT_EQ(Status::get(a.out.data()), 0x0004);
  // No SM on the port: SMInfo is not there.
  PortView no_sm = test_port();
  no_sm.cap_mask &= ~2u;
  a = ask(smp(0x01, 0x0020, 0, -1), no_sm);
  EXPECT_EQ(Status::get(a.out.data()), 0x000c);
  // An external SM holding the port's issm file: IsSM in PortInfo, but its
  // SMInfo is its own process's to answer (mad/user_agent.h), not the SMA's.
  PortView external = test_port();
  external.external_sm = true;
  a = ask(smp(0x01, 0x0015, 0, -1), external);
  EXPECT_EQ(a.out[kSmpDataOffset + 23] & 0x02, 0x02);
  a = ask(smp(0x01, 0x0020, 0, -1), external);
  EXPECT_EQ(Status::get(a.out.data()), 0x000c);
}

TEST(Sma, PortInfoSetTakesOnlyWhatThePortIs) {
  // What a Get returns, sent back as a Set: accepted, answered with the same.
  const Answer got = ask(smp(0x01, 0x0015, 0, -1));
  auto set = smp(0x02, 0x0015, 0, -1);
  std::memcpy(set.data() + kSmpDataOffset, got.out.data() + kSmpDataOffset, kSmpDataBytes);
  Answer a = ask(set);
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[3], 0x81);
  EXPECT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data_of(a.out.data()), data_of(got.out.data()));
  // The "no change" encodings: PortState NOP, LinkWidthEnabled 255, OperationalVLs 0.
  auto nop = set;
  nop[kSmpDataOffset + 32] &= 0xf0;
  nop[kSmpDataOffset + 29] = 0xff;
  nop[kSmpDataOffset + 43] &= 0x0f;
  EXPECT_EQ(Status::get(ask(nop).out.data()), 0);
  // A change the port cannot make: 0x1C, and the answer shows the port unchanged.
  const std::pair<size_t, uint8_t> changes[] = {
      {17, 0x05},  // LID 5
      {19, 0x07},  // MasterSMLID 7
      {7, 0x01},   // an M_Key
      {36, 0x40},  // NeighborMTU 2048
      {43, 0x50},  // OperationalVLs 0-14: beyond VLCap
      {32, 0x13},  // PortState Armed
  };
  for (const auto& [offset, value] : changes) {
    auto bad = set;
    bad[kSmpDataOffset + offset] = value;
    a = ask(bad);
    EXPECT_EQ(Status::get(a.out.data()), 0x001c) << offset;
    EXPECT_EQ(data_of(a.out.data()), data_of(got.out.data())) << offset;
  }
  // A read-only field is ignored (CapabilityMask).
  auto ro = set;
  ro[kSmpDataOffset + 23] ^= 0x01;
  EXPECT_EQ(Status::get(ask(ro).out.data()), 0);
}

// Under an external SM the port's LID, the SM's LID and the state are the
// SM's: ARMED from INIT, ACTIVE from ARMED, in that order only.
TEST(Sma, ExternalSmSetsLidAndBringsThePortUp) {
  PortView p = test_port();
  p.external_sm = true;
  p.lid = 0;
  p.sm_lid = 0;
  p.port_state = 2;  // INIT
  auto set_with = [&](uint16_t lid, uint8_t state, SmpEffect* effect) {
    const Answer got = ask(smp(0x01, 0x0015, 0), p);
    auto m = smp(0x02, 0x0015, 0);
    std::memcpy(m.data() + kSmpDataOffset, got.out.data() + kSmpDataOffset, kSmpDataBytes);
    m[kSmpDataOffset + 16] = static_cast<uint8_t>(lid >> 8);
    m[kSmpDataOffset + 17] = static_cast<uint8_t>(lid);
    m[kSmpDataOffset + 19] = 0x07;  // MasterSMLID 7
    m[kSmpDataOffset + 32] = static_cast<uint8_t>((m[kSmpDataOffset + 32] & 0xf0) | state);
    Answer a;
    a.d = answer_smp(p, m.data(), m.size(), a.out.data(), effect);
    return a;
  };
  SmpEffect e;
  Answer a = set_with(9, 4, &e);  // ACTIVE from INIT: refused, nothing to store
  EXPECT_EQ(DrStatus::get(a.out.data()), 0x001c);
  EXPECT_FALSE(e.port_changed);
  a = set_with(9, 3, &e);  // LID 9 and ARMED
  EXPECT_EQ(DrStatus::get(a.out.data()), 0);
  ASSERT_TRUE(e.port_changed);
  EXPECT_EQ(e.lid, 9);
  EXPECT_EQ(e.sm_lid, 7);
  EXPECT_EQ(e.port_state, 3);
  EXPECT_EQ(a.out[kSmpDataOffset + 17], 9);  // the answer shows the port as set
  EXPECT_EQ(a.out[kSmpDataOffset + 32] & 0xf, 3);
  p.lid = e.lid;
  p.sm_lid = e.sm_lid;
  p.port_state = e.port_state;
  e = SmpEffect{};
  a = set_with(9, 4, &e);
  EXPECT_EQ(DrStatus::get(a.out.data()), 0);
  EXPECT_EQ(e.port_state, 4);
  e = SmpEffect{};
  a = set_with(0xc000, 0, &e);  // a multicast LID is no port's
  EXPECT_EQ(DrStatus::get(a.out.data()), 0x001c);
  EXPECT_FALSE(e.port_changed);
  p.port_state = 4;
  e = SmpEffect{};
  a = set_with(9, 1, &e);  // DOWN: the link retrains, back to INIT
  EXPECT_EQ(DrStatus::get(a.out.data()), 0);
  EXPECT_EQ(e.port_state, 2);
}

// A Set as an SM sends it; the answer, the status and what to store.
struct SetAnswer {
  Answer a;
  SmpEffect effect;
  uint16_t status() const { return Status::get(a.out.data()); }
};

SetAnswer set(uint16_t attr, uint32_t modifier, const Bytes& data, const PortView& p = test_port()) {
  auto in = smp(0x02, attr, modifier, -1);
  std::memcpy(in.data() + kSmpDataOffset, data.data(), data.size());
  SetAnswer r;
  r.a.d = answer_smp(p, in.data(), in.size(), r.a.out.data(), &r.effect);
  return r;
}

TEST(Sma, PortInfoSetProgramsOperVlsAndVlHighLimit) {
  const Answer got = ask(smp(0x01, 0x0015, 0, -1));
  Bytes pi = data_of(got.out.data());
  pi[38] = 4;     // VLHighLimit
  pi[43] = 0x20;  // OperationalVLs: VL0-1
  SetAnswer r = set(0x0015, 0, pi);
  EXPECT_EQ(r.status(), 0);
  EXPECT_EQ(data_of(r.a.out.data()), pi);
  ASSERT_TRUE(r.effect.qos_changed);
  EXPECT_EQ(r.effect.qos.oper_vls, 2);
  EXPECT_EQ(r.effect.qos.vl_high_limit, 4);
  // ibportstate's modifier: the port, and bit 31 (the SM knows extended speeds).
  EXPECT_EQ(set(0x0015, 0x80000001u, pi).status(), 0);
  EXPECT_EQ(set(0x0015, 0x80000002u, pi).status(), 0x001c);
  // What opensm 3.3 sent to this port (its first PortInfo Set): nothing changes.
  r = set(0x0015, 1, {0, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
                      0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x48, 0x02, 0, 0, 0, 0, 0x01, 0x02, 0x03, 0x02,
                      0x10, 0x02, 0x00, 0x11, 0x50, 0x40, 0x00, 0x08, 0x08, 0x05, 0xff, 0x40, 0, 0, 0, 0,
                      0, 0, 0x01, 0x12, 0x10, 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0x23, 0x03});
  EXPECT_EQ(r.status(), 0);
  EXPECT_FALSE(r.effect.qos_changed);
}

TEST(Sma, SlToVlSetGoldenAndBadInput) {
  // SL n -> VL n mod 4, SL15 -> VL15 (discard).
  const Bytes table = padded({0x01, 0x23, 0x01, 0x23, 0x01, 0x23, 0x01, 0x2f});
  SetAnswer r = set(0x0017, 0, table);
  EXPECT_EQ(r.status(), 0);
  EXPECT_EQ(data_of(r.a.out.data()), table);
  ASSERT_TRUE(r.effect.qos_changed);
  EXPECT_EQ(r.effect.qos.sl_to_vl[3], 3);
  EXPECT_EQ(r.effect.qos.sl_to_vl[15], 15);
  PortView p = test_port();
  p.qos = r.effect.qos;
  EXPECT_EQ(data_of(ask(smp(0x01, 0x0017, 0, -1), p).out.data()), table);
  // A VL the port does not operate (OperVLs VL0-1, SL1 -> VL3): 0x1C, the table as it was.
  p.qos.oper_vls = 2;
  r = set(0x0017, 0, table, p);
  EXPECT_EQ(r.status(), 0x001c);
  EXPECT_FALSE(r.effect.qos_changed);
  EXPECT_EQ(data_of(r.a.out.data()), table);
  // The modifier names switch ports; a CA ignores it.
  EXPECT_EQ(set(0x0017, 0x0102, table).status(), 0);
}

TEST(Sma, PKeyTableSetGoldenAndBadInput) {
  // What opensm sends for a partition: the default key, then 0x8001 (full)
  // and 0x0002 (limited); entries past PartitionCap are ignored.
  PortView p = test_port();
  p.partition_cap = 32;
  Bytes table = padded({0xff, 0xff, 0x80, 0x01, 0x00, 0x02});
  SetAnswer r = set(0x0016, 0, table, p);
  EXPECT_EQ(r.status(), 0);
  EXPECT_EQ(data_of(r.a.out.data()), table);
  ASSERT_TRUE(r.effect.pkeys_changed);
  EXPECT_EQ(r.effect.pkeys[0], 0xffff);
  EXPECT_EQ(r.effect.pkeys[1], 0x8001);
  EXPECT_EQ(r.effect.pkeys[2], 0x0002);
  EXPECT_EQ(r.effect.pkeys[3], 0);
  p.pkeys = r.effect.pkeys;
  EXPECT_EQ(data_of(ask(smp(0x01, 0x0016, 0, -1), p).out.data()), table);
  // The same table again changes nothing (no PKEY_CHANGE).
  r = set(0x0016, 0, table, p);
  EXPECT_EQ(r.status(), 0);
  EXPECT_FALSE(r.effect.pkeys_changed);
  // A one-entry table takes the first entry only and answers with it.
  PortView one = test_port();
  r = set(0x0016, 0, padded({0x80, 0x05, 0x80, 0x06}), one);
  EXPECT_EQ(r.status(), 0);
  EXPECT_EQ(data_of(r.a.out.data()), padded({0x80, 0x05}));
  EXPECT_EQ(r.effect.pkeys[1], 0);
  // A block past PartitionCap: 0x1C, nothing changes, the port's own
  // block-less answer; the upper half of the modifier (a switch port) is ignored.
  r = set(0x0016, 1, table, p);
  EXPECT_EQ(r.status(), 0x001c);
  EXPECT_FALSE(r.effect.pkeys_changed);
  EXPECT_EQ(set(0x0016, 0x00010000, padded({0xff, 0xff, 0x80, 0x07}), p).effect.pkeys[1], 0x8007);
  // A switch's table is not settable here (no partition enforcement): 0x0C.
  PortView sw = p;
  sw.node_type = 2;
  r = set(0x0016, 0, table, sw);
  EXPECT_EQ(r.status(), 0x000c);
  EXPECT_FALSE(r.effect.pkeys_changed);
  // PortInfo:P_KeyViolations at bytes 46-47.
  p.pkey_violations = 0x0102;
  const Answer pi = ask(smp(0x01, 0x0015, 0, -1), p);
  EXPECT_EQ(pi.out[kSmpDataOffset + 46], 0x01);
  EXPECT_EQ(pi.out[kSmpDataOffset + 47], 0x02);
}

TEST(Sma, VlArbitrationSetGoldenAndBadInput) {
  // High priority: VL1 weight 4 then VL0 weight 0 (skipped); block 3 = high entries 0-31.
  const Bytes high = padded({0x01, 0x04, 0x00, 0x00, 0x0e, 0x00});
  SetAnswer r = set(0x0018, 3u << 16 | 1, high);
  EXPECT_EQ(r.status(), 0);
  EXPECT_EQ(data_of(r.a.out.data()), high);
  ASSERT_TRUE(r.effect.qos_changed);
  EXPECT_EQ(r.effect.qos.high[0], (shm::VlArbEntry{1, 4}));
  EXPECT_EQ(r.effect.qos.high[2], (shm::VlArbEntry{14, 0}));  // weight 0: any VL
  EXPECT_EQ(r.effect.qos.low[0], (shm::VlArbEntry{0, 64}));   // the low table untouched
  // Reserved bits above the VL are ignored; entries beyond the cap (8) too.
  Bytes low = padded({0xf0, 0x01, 0x01, 0x03});
  low[2 * 8] = 0x03;
  low[2 * 8 + 1] = 0x09;
  r = set(0x0018, 1u << 16, low);
  EXPECT_EQ(r.status(), 0);
  EXPECT_EQ(data_of(r.a.out.data()), padded({0x00, 0x01, 0x01, 0x03}));
  // Blocks 2 and 4 (entries 32-63) are beyond the cap: accepted, read as zero.
  r = set(0x0018, 2u << 16, low);
  EXPECT_EQ(r.status(), 0);
  EXPECT_FALSE(r.effect.qos_changed);
  EXPECT_EQ(data_of(r.a.out.data()), padded({}));
  // Block 0 or 5: 0x1C.
  for (uint32_t block : {0u, 5u}) {
    r = set(0x0018, block << 16, high);
    EXPECT_EQ(r.status(), 0x001c) << block;
    EXPECT_FALSE(r.effect.qos_changed);
  }
  // A weighted entry on a VL the port does not operate, or on VL15: 0x1C.
  PortView two = test_port();
  two.qos.oper_vls = 2;
  EXPECT_EQ(set(0x0018, 3u << 16, padded({0x02, 0x01}), two).status(), 0x001c);
  EXPECT_EQ(set(0x0018, 3u << 16, padded({0x0f, 0x01})).status(), 0x001c);
  EXPECT_EQ(set(0x0018, 3u << 16, padded({0x01, 0x01}), two).status(), 0);
}

TEST(Sma, WhatItDoesNotAnswer) {
  // A path out of the port: forwarded, not answered here.
  EXPECT_EQ(ask(smp(0x01, 0x0011, 0, 1)).d, Disposition::kLeavePort);
  // Beyond 63 hops, a returning SMP, a response, a short MAD, an Ethernet port.
  EXPECT_EQ(ask(smp(0x01, 0x0011, 0, 64)).d, Disposition::kDrop);
  auto returning = smp(0x01, 0x0011, 0);
  DrDirection::set(returning.data(), 1);
  EXPECT_EQ(ask(returning).d, Disposition::kDrop);
  EXPECT_EQ(ask(smp(0x81, 0x0011, 0)).d, Disposition::kDrop);
  const auto in = smp(0x01, 0x0011, 0);
  std::array<uint8_t, kMadBytes> out{};
  EXPECT_EQ(answer_smp(test_port(), in.data(), 100, out.data()), Disposition::kDrop);
  EXPECT_EQ(answer_smp(test_port(), nullptr, 0, out.data()), Disposition::kDrop);
  PortView eth = test_port();
  eth.ethernet = true;
  EXPECT_EQ(ask(in, eth).d, Disposition::kDrop);
  // A TrapRepress is taken without an answer (there is no trap to stop
  // repeating); a Trap is the SM's, never the SMA's to answer.
  EXPECT_EQ(ask(smp(0x07, 0x0002, 0)).d, Disposition::kDrop);
  EXPECT_EQ(ask(smp(0x05, 0x0002, 0)).d, Disposition::kDrop);
}

TEST(Sma, RandomBytesNeverCrash) {
  std::mt19937 rng(19);
  std::array<uint8_t, kMadBytes> in{};
  std::array<uint8_t, kMadBytes> out{};
  for (int i = 0; i < 20000; ++i) {
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    // Keep it SMP-shaped half the time so the attribute code runs.
    if (i % 2 == 0) {
      in[0] = 1;
      in[1] = i % 4 == 0 ? 0x81 : 0x01;
      in[2] = 1;
      in[3] &= 0x7f;
      in[7] = 0;
      in[4] &= 0x7f;
    }
    const Disposition d = answer_smp(test_port(), in.data(), in.size(), out.data());
    if (d == Disposition::kRespond) {
      EXPECT_EQ(ResponseBit::get(out.data()), 1);
    }
  }
}

}  // namespace
}  // namespace softverbs::mad
