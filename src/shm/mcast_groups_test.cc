#include "shm/mcast_groups.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace softverbs::shm {
namespace {

class McastGroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-mcast-test-" + std::to_string(getpid());
    Result<std::unique_ptr<Segment>> s = Segment::open(path_);
    ASSERT_TRUE(s.is_ok()) << s.code();
    seg_ = std::move(s.value());
  }
  void TearDown() override {
    seg_.reset();
    unlink(path_.c_str());
  }
  // A live QP in `slot` (what attach checks for stale entries), its QPN.
  uint32_t live_qp(uint32_t slot) {
    SharedQp& qp = seg_->qp(slot);
    qp.qpn = (1u << kQpSlotBits) | slot;
    qp.slot_state.store(static_cast<uint32_t>(SlotState::kLive));
    return qp.qpn;
  }
  void kill_qp(uint32_t slot) { seg_->qp(slot).slot_state.store(static_cast<uint32_t>(SlotState::kDead)); }
  std::vector<uint32_t> members(const uint8_t* mgid, uint16_t mlid = 0) {
    std::vector<uint32_t> out;
    for_each_mcast_member(*seg_, mgid, mlid, [&](const SharedMcastGroup&, uint32_t qpn) { out.push_back(qpn); });
    return out;
  }
  std::string path_;
  std::unique_ptr<Segment> seg_;
};

constexpr uint8_t kGroupA[16] = {0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
constexpr uint8_t kGroupB[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3};

TEST(McastAddresses, MulticastGidsAndLids) {
  EXPECT_TRUE(is_multicast_gid(kGroupA));
  EXPECT_TRUE(is_multicast_gid(kGroupB));
  constexpr uint8_t kUnicastV4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  constexpr uint8_t kLinkLocal[16] = {0xfe, 0x80};
  EXPECT_FALSE(is_multicast_gid(kUnicastV4));
  EXPECT_FALSE(is_multicast_gid(kLinkLocal));
  EXPECT_TRUE(is_multicast_lid(0xc000));
  EXPECT_TRUE(is_multicast_lid(0xfffe));
  EXPECT_FALSE(is_multicast_lid(0xbfff));
  EXPECT_FALSE(is_multicast_lid(0xffff));  // the permissive LID
}

TEST_F(McastGroupsTest, AttachDetachAndLookupByMgidOrMlid) {
  const uint32_t a = live_qp(10);
  const uint32_t b = live_qp(11);
  EXPECT_TRUE(mcast_attach(*seg_, kGroupA, 0xc001, a).added);
  EXPECT_FALSE(mcast_attach(*seg_, kGroupA, 0xc001, a).added);  // already in: one entry
  EXPECT_TRUE(mcast_attach(*seg_, kGroupA, 0xc001, b).added);
  EXPECT_TRUE(mcast_attach(*seg_, kGroupB, 0xc002, b).added);
  EXPECT_EQ((std::vector<uint32_t>{a, b}), members(kGroupA));
  EXPECT_EQ((std::vector<uint32_t>{a, b}), members(nullptr, 0xc001));
  EXPECT_EQ((std::vector<uint32_t>{b}), members(kGroupB));
  EXPECT_EQ(0, mcast_detach(*seg_, kGroupA, a));
  EXPECT_EQ(EINVAL, mcast_detach(*seg_, kGroupA, a));
  EXPECT_EQ((std::vector<uint32_t>{b}), members(kGroupA));
  std::vector<const uint8_t*> left;
  mcast_detach_all(*seg_, b, [&](const uint8_t*) { left.push_back(nullptr); });
  EXPECT_EQ(2u, left.size());
  EXPECT_TRUE(members(kGroupA).empty());
  EXPECT_TRUE(members(kGroupB).empty());
  EXPECT_EQ(EINVAL, mcast_detach(*seg_, kGroupB, b));
}

// A process that died without detaching leaves QPNs in groups; the next
// attach frees their places, so the limits hold for the living only.
TEST_F(McastGroupsTest, QpsThatAreGoneFreeTheirPlaces) {
  std::vector<uint32_t> qps;
  for (uint32_t i = 0; i < kMaxMcastQpAttach; ++i) qps.push_back(live_qp(100 + i));
  for (uint32_t qpn : qps) ASSERT_TRUE(mcast_attach(*seg_, kGroupA, 0xc001, qpn).added);
  const uint32_t late = live_qp(99);
  EXPECT_EQ(ENOMEM, mcast_attach(*seg_, kGroupA, 0xc001, late).error);
  kill_qp(100);
  EXPECT_TRUE(mcast_attach(*seg_, kGroupA, 0xc001, late).added);

  // Every group taken by a QP that then died: a new group still fits.
  const uint32_t owner_of_all = live_qp(2000);
  uint8_t mgid[16] = {0xff, 0x0e};
  for (uint32_t g = 0; g + 1 < kMaxMcastGroups; ++g) {
    mgid[14] = static_cast<uint8_t>(g >> 8);
    mgid[15] = static_cast<uint8_t>(g + 2);
    ASSERT_EQ(0, mcast_attach(*seg_, mgid, 0xc003, owner_of_all).error) << g;
  }
  mgid[13] = 0x77;
  EXPECT_EQ(ENOMEM, mcast_attach(*seg_, mgid, 0xc003, owner_of_all).error);
  kill_qp(2000);
  EXPECT_TRUE(mcast_attach(*seg_, mgid, 0xc003, late).added);
}

}  // namespace
}  // namespace softverbs::shm
