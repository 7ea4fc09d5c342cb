#include "shm/port_link.h"

#include <gtest/gtest.h>

#include <memory>

namespace softverbs::shm {
namespace {

TEST(PortLink, ParsesWidthAndSpeed) {
  LinkConfig c;
  ASSERT_TRUE(parse_link_rate("4xSDR", &c));
  EXPECT_EQ(c.width, 2);
  EXPECT_EQ(c.speed, 1);
  EXPECT_EQ(link_data_mbps(c), 8000u);  // 10 Gb/s signalling, 8b/10b
  ASSERT_TRUE(parse_link_rate("12X-hdr", &c));
  EXPECT_EQ(c.width, 8);
  EXPECT_EQ(c.speed, 64);
  EXPECT_EQ(link_data_mbps(c), 600000u);
  ASSERT_TRUE(parse_link_rate("1x EDR", &c));
  EXPECT_EQ(link_data_mbps(c), 25000u);
  ASSERT_TRUE(parse_link_rate("2xfdr10", &c));
  EXPECT_EQ(c.width, 16);
  EXPECT_EQ(c.speed, 8);
  for (const char* bad : {"", "4x", "SDR", "3xSDR", "4xSDR2", "x4SDR", "4xqdr!"})
    EXPECT_FALSE(parse_link_rate(bad, &c)) << bad;
}

TEST(PortLink, FirstClaimWins) {
  auto h = std::make_unique<SegmentHeader>();
  const LinkConfig fallback{1, 32, false};
  EXPECT_EQ(load_link(*h, fallback), fallback);
  const LinkConfig sdr{2, 1, true};
  const uint32_t generation = h->qos.generation.load();
  EXPECT_EQ(claim_link(*h, sdr), sdr);
  EXPECT_NE(h->qos.generation.load(), generation);  // cached path state is read again
  EXPECT_EQ(claim_link(*h, LinkConfig{}), sdr);
  EXPECT_EQ(load_link(*h, fallback), sdr);
}

}  // namespace
}  // namespace softverbs::shm
