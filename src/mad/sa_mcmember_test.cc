#include "mad/sa_mcmember.h"

#include <gtest/gtest.h>

#include <array>

namespace softverbs::mad {
namespace {

std::array<uint8_t, kMadBytes> sa_mad(uint8_t method, uint16_t attr, uint8_t join_state) {
  std::array<uint8_t, kMadBytes> m{};
  m[0] = 1;
  m[1] = kSaClass;
  m[2] = 2;
  m[3] = method;
  AttributeId::set(m.data(), attr);
  m[kSaRecordOffset + 48] = static_cast<uint8_t>(0x20 | join_state);  // a scope in the high nibble
  return m;
}

TEST(SaMcMember, SetJoinsDeleteLeavesOthersAreNoChange) {
  EXPECT_EQ(mcmember_change(sa_mad(0x02, kMcMemberRecord, 1).data()), McmChange::kJoin);
  EXPECT_EQ(mcmember_change(sa_mad(kSaDelete, kMcMemberRecord, 1).data()), McmChange::kLeave);
  EXPECT_EQ(mcmember_change(sa_mad(0x01, kMcMemberRecord, 1).data()), McmChange::kNone);   // Get
  EXPECT_EQ(mcmember_change(sa_mad(0x95, kMcMemberRecord, 1).data()), McmChange::kNone);   // DeleteResp
  EXPECT_EQ(mcmember_change(sa_mad(0x02, 0x0035, 1).data()), McmChange::kNone);            // PathRecord
  auto pma = sa_mad(0x02, kMcMemberRecord, 1);
  pma[1] = 0x04;
  EXPECT_EQ(mcmember_change(pma.data()), McmChange::kNone);
}

TEST(SaMcMember, JoinStateIsTheLowNibbleOfRecordByte48) {
  auto m = sa_mad(0x02, kMcMemberRecord, 0x5);
  EXPECT_EQ(McmJoinState::get(m.data()), 0x5u);
  McmJoinState::set(m.data(), 0x4);
  EXPECT_EQ(m[kSaRecordOffset + 48], 0x24);  // the scope is kept
}

}  // namespace
}  // namespace softverbs::mad
