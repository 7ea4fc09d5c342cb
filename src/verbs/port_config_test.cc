#include "verbs/port_config.h"

#include <gtest/gtest.h>

namespace softverbs::verbs {
namespace {

TEST(PortConfig, UnsetIsTheHostDevice) {
  const PortConfig c = parse_port_config(nullptr, nullptr, nullptr, nullptr);
  EXPECT_TRUE(c.error.empty());
  EXPECT_FALSE(c.roce);
  EXPECT_EQ("softverbs0", c.device_name);
  EXPECT_FALSE(c.faults.active());
}

TEST(PortConfig, RoceAddressesBecomeGidsInOrder) {
  const PortConfig c = parse_port_config("10.0.0.1,fd00::2", "5000", "2048");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_TRUE(c.roce);
  EXPECT_EQ("softverbs_roce0", c.device_name);
  ASSERT_EQ(2u, c.gids.size());
  const wire::Gid v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  EXPECT_EQ(v4, c.gids[0]);
  EXPECT_EQ(0xfd, c.gids[1][0]);
  EXPECT_EQ(2, c.gids[1][15]);
  EXPECT_EQ(5000, c.udp_port);
  EXPECT_EQ(IBV_MTU_2048, c.mtu);  // not the default (IBV_MTU_4096), so the value was parsed
}

TEST(PortConfig, BadValuesAreNamed) {
  EXPECT_NE(std::string::npos, parse_port_config("10.0.0.300", nullptr, nullptr).error.find("10.0.0.300"));
  EXPECT_NE(std::string::npos, parse_port_config("10.0.0.1", "70000", nullptr).error.find("SOFTVERBS_ROCE_PORT"));
  EXPECT_NE(std::string::npos, parse_port_config("10.0.0.1", nullptr, "1500").error.find("SOFTVERBS_ROCE_MTU"));
}

TEST(PortConfig, FaultsParsedOrRefusedByName) {
  const PortConfig ok = parse_port_config("10.0.0.1", nullptr, nullptr, "loss=0.01,dup=0.02,seed=9");
  ASSERT_TRUE(ok.error.empty()) << ok.error;
  EXPECT_TRUE(ok.faults.active());
  EXPECT_DOUBLE_EQ(0.01, ok.faults.loss);
  EXPECT_DOUBLE_EQ(0.02, ok.faults.duplicate);
  EXPECT_EQ(9u, ok.faults.seed);
  const PortConfig bad = parse_port_config("10.0.0.1", nullptr, nullptr, "loss=2");
  EXPECT_NE(std::string::npos, bad.error.find("SOFTVERBS_FAULTS")) << bad.error;
  EXPECT_TRUE(parse_port_config("10.0.0.1", nullptr, nullptr, "").error.empty());
}

TEST(PortConfig, LinkRateAndPacing) {
  PortConfig ib = parse_port_config(nullptr, nullptr, nullptr);
  parse_link_config(nullptr, nullptr, &ib);
  EXPECT_EQ((shm::LinkConfig{2, 32, false}), ib.link);  // 4X EDR, as before links had a rate
  EXPECT_FALSE(ib.link_set);
  PortConfig roce = parse_port_config("10.0.0.1", nullptr, nullptr);
  parse_link_config(nullptr, nullptr, &roce);
  EXPECT_EQ((shm::LinkConfig{1, 32, false}), roce.link);  // 1X EDR
  PortConfig sdr = parse_port_config(nullptr, nullptr, nullptr);
  parse_link_config("4xSDR", "1", &sdr);
  ASSERT_TRUE(sdr.error.empty()) << sdr.error;
  EXPECT_EQ((shm::LinkConfig{2, 1, true}), sdr.link);
  EXPECT_TRUE(sdr.link_set);
  PortConfig bad = parse_port_config(nullptr, nullptr, nullptr);
  parse_link_config("4xSSD", nullptr, &bad);
  EXPECT_NE(std::string::npos, bad.error.find("SOFTVERBS_LINK:")) << bad.error;
  bad = parse_port_config(nullptr, nullptr, nullptr);
  parse_link_config(nullptr, "yes", &bad);
  EXPECT_NE(std::string::npos, bad.error.find("SOFTVERBS_LINK_PACING")) << bad.error;
}

}  // namespace
}  // namespace softverbs::verbs
