#include "wire/psn.h"

#include <gtest/gtest.h>

namespace softverbs::wire {
namespace {

static_assert(Psn(0x1000000).value() == 0);
static_assert(psn_add(Psn(0xffffff), 1) == Psn(0));
static_assert(psn_diff(Psn(0), Psn(0xffffff)) == 1);

TEST(Psn, ReducesTo24Bits) {
  EXPECT_EQ(Psn(0xffffffff).value(), 0xffffffu);
  EXPECT_EQ(Psn(0x1234567).value(), 0x234567u);
}

TEST(Psn, AddWraps) {
  EXPECT_EQ(psn_add(Psn(0xfffffe), 3), Psn(1));
  EXPECT_EQ(psn_add(Psn(1), -3), Psn(0xfffffe));
  EXPECT_EQ(psn_add(Psn(5), Psn::kModulus), Psn(5));
  EXPECT_EQ(psn_add(Psn(5), -int64_t{Psn::kModulus} * 3), Psn(5));
  Psn p(0xffffff);
  ++p;
  EXPECT_EQ(p, Psn(0));
}

TEST(Psn, DiffIsSignedAcrossWrap) {
  EXPECT_EQ(psn_diff(Psn(10), Psn(3)), 7);
  EXPECT_EQ(psn_diff(Psn(3), Psn(10)), -7);
  EXPECT_EQ(psn_diff(Psn(2), Psn(0xfffffe)), 4);
  EXPECT_EQ(psn_diff(Psn(0xfffffe), Psn(2)), -4);
  EXPECT_EQ(psn_diff(Psn(7), Psn(7)), 0);
}

TEST(Psn, SerialComparisonWindowIsHalfTheSpace) {
  const Psn base(0x800000 + 17);
  // Just inside the window: ahead.
  EXPECT_TRUE(psn_after(psn_add(base, Psn::kHalf - 1), base));
  EXPECT_EQ(psn_diff(psn_add(base, Psn::kHalf - 1), base), int32_t(Psn::kHalf - 1));
  // Exactly half-way is not ahead (it reads as behind by 2^23).
  EXPECT_FALSE(psn_after(psn_add(base, Psn::kHalf), base));
  EXPECT_EQ(psn_diff(psn_add(base, Psn::kHalf), base), -int32_t(Psn::kHalf));
  // Past half-way: behind.
  EXPECT_TRUE(psn_before(psn_add(base, Psn::kHalf + 1), base));
  EXPECT_FALSE(psn_after(base, base));
  EXPECT_FALSE(psn_before(base, base));
}

TEST(Psn, DiffInvertsAdd) {
  for (uint32_t a : {0u, 1u, 0x7fffffu, 0x800000u, 0xfffffeu, 0xffffffu}) {
    for (int32_t n : {0, 1, -1, 1000, -1000, 0x7fffff, -0x800000}) {
      EXPECT_EQ(psn_diff(psn_add(Psn(a), n), Psn(a)), n) << a << " " << n;
    }
  }
}

}  // namespace
}  // namespace softverbs::wire
