#include "shm/port_pkeys.h"

#include <gtest/gtest.h>

#include <memory>

namespace softverbs::shm {
namespace {

TEST(PortPKeys, MatchRules) {
  EXPECT_TRUE(pkeys_match(0xffff, 0xffff));
  EXPECT_TRUE(pkeys_match(0xffff, 0x7fff));   // a full member talks to a limited one
  EXPECT_TRUE(pkeys_match(0x0001, 0x8001));
  EXPECT_FALSE(pkeys_match(0x0001, 0x0001));  // two limited members never do
  EXPECT_FALSE(pkeys_match(0x8001, 0x8002));  // another partition
  EXPECT_FALSE(pkeys_match(0x8000, 0x8000));  // the invalid P_Key matches nothing
  EXPECT_FALSE(pkeys_match(0x0000, 0x8000));
  // The one-compare path takes only what pkeys_match takes.
  for (uint32_t own : {0xffffu, 0x7fffu, 0x8001u, 0x0001u, 0x8000u, 0x0000u}) {
    for (uint32_t got = 0; got <= 0xffff; ++got) {
      if (got == fast_pkey(static_cast<uint16_t>(own))) {
        EXPECT_TRUE(pkeys_match(static_cast<uint16_t>(got), static_cast<uint16_t>(own))) << own << " " << got;
      }
    }
  }
  EXPECT_EQ(fast_pkey(0xffff), 0xffffu);
  EXPECT_EQ(fast_pkey(0x0001), kNoFastPKey);
}

TEST(PortPKeys, TableBootsWithTheDefaultKeyAndCountsSaturate) {
  auto h = std::make_unique<SegmentHeader>();
  store_pkeys(*h, default_pkeys());
  EXPECT_EQ(pkey_at(*h, 0), kDefaultPKey);
  EXPECT_EQ(pkey_at(*h, 1), 0);
  EXPECT_EQ(pkey_at(*h, kPKeyTableCap), 0);  // beyond the table: invalid
  PKeyTable t = default_pkeys();
  t[3] = 0x8001;
  const uint32_t gen = h->pkeys.generation.load();
  store_pkeys(*h, t);
  EXPECT_EQ(h->pkeys.generation.load(), gen + 1);
  EXPECT_EQ(load_pkeys(*h), t);
  EXPECT_EQ(pkey_index_matching(*h, 0x0001), 3);
  EXPECT_EQ(pkey_index_matching(*h, 0x8002), -1);
  EXPECT_EQ(pkey_violations(*h), 0);
  count_pkey_violation(*h);
  EXPECT_EQ(pkey_violations(*h), 1);
  h->pkeys.violations.store(0x12345);
  EXPECT_EQ(pkey_violations(*h), 0xffff);
}

}  // namespace
}  // namespace softverbs::shm
