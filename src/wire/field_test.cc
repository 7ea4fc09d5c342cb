#include "wire/field.h"

#include <gtest/gtest.h>

#include <array>

namespace softverbs::wire {
namespace {

// Constexpr use: a descriptor works at compile time over a local buffer.
constexpr uint32_t roundtrip_24_at_bit_0() {
  std::array<uint8_t, 4> b{};
  Field<1, 0, 24>::set(b.data(), 0xabcdef);
  return Field<1, 0, 24>::get(b.data());
}
static_assert(roundtrip_24_at_bit_0() == 0xabcdef);
static_assert(Field<1, 2, 2>::kSpan == 1 && Field<1, 2, 2>::kShift == 4);
static_assert(Field<1, 4, 20>::kSpan == 3 && Field<1, 4, 20>::kEnd == 4);
static_assert(std::is_same_v<Field<0, 0, 1>::value_type, uint8_t>);
static_assert(std::is_same_v<Field<0, 4, 20>::value_type, uint32_t>);
static_assert(std::is_same_v<BeField<0, 8>::value_type, uint64_t>);

TEST(Field, ReadsBigEndianMsbFirst) {
  const uint8_t b[] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11};
  EXPECT_EQ((BeField<0, 1>::get(b)), 0x12);
  EXPECT_EQ((BeField<0, 2>::get(b)), 0x1234);
  EXPECT_EQ((BeField<1, 4>::get(b)), 0x3456789au);
  EXPECT_EQ((BeField<1, 8>::get(b)), 0x3456789abcdef011ull);
  EXPECT_EQ((Field<0, 0, 4>::get(b)), 0x1);  // high nibble
  EXPECT_EQ((Field<0, 4, 4>::get(b)), 0x2);  // low nibble
  EXPECT_EQ((Field<1, 4, 20>::get(b)), 0x45678u);
  EXPECT_EQ((Field<4, 0, 1>::get(b)), 1);    // 0x9a = 1001 1010
  EXPECT_EQ((Field<4, 1, 1>::get(b)), 0);
  EXPECT_EQ((Field<4, 2, 2>::get(b)), 1);
}

TEST(Field, SetTouchesOnlyItsBits) {
  std::array<uint8_t, 6> b;
  b.fill(0xff);
  Field<1, 2, 2>::set(b.data(), 0);
  EXPECT_EQ(b[1], 0xcf);
  Field<1, 2, 2>::set(b.data(), 2);
  EXPECT_EQ(b[1], 0xef);
  b.fill(0x00);
  Field<1, 4, 20>::set(b.data(), 0xfffff);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x0f);
  EXPECT_EQ(b[2], 0xff);
  EXPECT_EQ(b[3], 0xff);
  EXPECT_EQ(b[4], 0x00);
}

TEST(Field, SetTruncatesToWidth) {
  std::array<uint8_t, 4> b{};
  Field<1, 0, 24>::set(b.data(), 0xff123456);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ((Field<1, 0, 24>::get(b.data())), 0x123456u);
}

TEST(Field, SixtyFourBitsUnaligned) {
  std::array<uint8_t, 11> b{};
  BeField<3, 8>::set(b.data(), 0x0102030405060708ull);
  EXPECT_EQ(b[2], 0);
  EXPECT_EQ(b[3], 1);
  EXPECT_EQ(b[10], 8);
  EXPECT_EQ((BeField<3, 8>::get(b.data())), 0x0102030405060708ull);
}

}  // namespace
}  // namespace softverbs::wire
