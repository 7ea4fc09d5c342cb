#include "mad/notice.h"

#include <gtest/gtest.h>

#include <vector>

namespace softverbs::mad {
namespace {

using Bytes = std::vector<uint8_t>;

// IBA 14.2.5.1 / 13.4.8.2: trap 128 from the switch at LID 3 to the SM at
// LID 1, as ibsendtrap builds it (generic, Urgent, producer Switch, the
// switch's LID as issuer and as LIDADDR).
TEST(Notice, LinkStateChangeTrapGolden) {
  const Trap t = link_state_change_trap(3, 1, 2, 0x1122334455667788ull, 0x42);
  EXPECT_EQ(t.dlid, 1);
  EXPECT_EQ(t.slid, 3);
  EXPECT_EQ(t.sl, 2);
  EXPECT_EQ(Bytes(t.mad, t.mad + 32), Bytes({0x01, 0x01, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00,  // SubnTrap, status 0
                                             0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x42,  // TID: no agent's tag
                                             0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // Notice, modifier 0
                                             0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}));  // M_Key
  EXPECT_EQ(Bytes(t.mad + 32, t.mad + 64), Bytes(32, 0));
  EXPECT_EQ(Bytes(t.mad + 64, t.mad + 76), Bytes({0x81,              // IsGeneric, Type Urgent
                                                  0x00, 0x00, 0x02,  // ProducerType: switch
                                                  0x00, 0x80,        // TrapNumber 128
                                                  0x00, 0x03,        // IssuerLID
                                                  0x00, 0x00,        // NoticeToggle, NoticeCount
                                                  0x00, 0x03}));     // DataDetails: LIDADDR
  EXPECT_EQ(Bytes(t.mad + 76, t.mad + kMadBytes), Bytes(kMadBytes - 76, 0));
}

// IBA 13.4.8.2: trap 257 from the CA port at LID 5 to the SM at LID 1
// (generic, Security, producer CA): a GMP from LID 4 QP1 on SL 3 to LID 5
// QP1 carrying P_Key 0x8002, laid out as opensm reads ntc_257_258.
TEST(Notice, BadPKeyTrapGolden) {
  const Trap t = bad_pkey_trap(5, 1, 0, {.lid1 = 4, .lid2 = 5, .pkey = 0x8002, .sl = 3, .qp1 = 1, .qp2 = 1}, 0x43);
  EXPECT_EQ(t.dlid, 1);
  EXPECT_EQ(t.slid, 5);
  EXPECT_EQ(Bytes(t.mad, t.mad + 24), Bytes({0x01, 0x01, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00,  // SubnTrap
                                             0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x43,
                                             0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}));
  EXPECT_EQ(Bytes(t.mad + 24, t.mad + 64), Bytes(40, 0));  // no M_Key
  EXPECT_EQ(Bytes(t.mad + 64, t.mad + 92), Bytes({0x82,              // IsGeneric, Type Security
                                                  0x00, 0x00, 0x01,  // ProducerType: CA
                                                  0x01, 0x01,        // TrapNumber 257
                                                  0x00, 0x05,        // IssuerLID
                                                  0x00, 0x00,        // NoticeToggle, NoticeCount
                                                  0x00, 0x00,        // reserved
                                                  0x00, 0x04,        // LID1
                                                  0x00, 0x05,        // LID2
                                                  0x00, 0x00, 0x80, 0x02,  // Key
                                                  0x30, 0x00, 0x00, 0x01,  // SL, QP1
                                                  0x00, 0x00, 0x00, 0x01}));  // QP2
  EXPECT_EQ(Bytes(t.mad + 92, t.mad + kMadBytes), Bytes(kMadBytes - 92, 0));  // GID1, GID2: no GRH
}

TEST(Notice, TrapAndTrapRepressAreTold) {
  Trap t = link_state_change_trap(3, 1, 0, 0, 1);
  EXPECT_TRUE(is_smp_trap(t.mad));
  EXPECT_FALSE(is_smp_trap_repress(t.mad));
  Method::set(t.mad, static_cast<uint8_t>(MethodId::kTrapRepress));
  EXPECT_TRUE(is_smp_trap_repress(t.mad));
  EXPECT_FALSE(is_smp_trap(t.mad));
  MgmtClass::set(t.mad, 0x81);
  EXPECT_TRUE(is_smp_trap_repress(t.mad));
  MgmtClass::set(t.mad, 0x03);  // the SA's Report/Trap methods are not SMPs
  EXPECT_FALSE(is_smp_trap_repress(t.mad));
  Method::set(t.mad, static_cast<uint8_t>(MethodId::kTrap));
  EXPECT_FALSE(is_smp_trap(t.mad));
}

TEST(Notice, RaisedTrapsHoldTwo) {
  RaisedTraps r;
  EXPECT_NE(r.add(), nullptr);
  EXPECT_NE(r.add(), nullptr);
  EXPECT_EQ(r.add(), nullptr);
  EXPECT_EQ(r.count, 2u);
}

}  // namespace
}  // namespace softverbs::mad
