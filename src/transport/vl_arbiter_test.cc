#include "transport/vl_arbiter.h"

#include <gtest/gtest.h>

namespace softverbs::transport {
namespace {

shm::QosTables tables(std::initializer_list<shm::VlArbEntry> low, std::initializer_list<shm::VlArbEntry> high,
                      uint8_t limit) {
  shm::QosTables t = shm::default_qos();
  for (auto& e : t.low) e = {};
  unsigned i = 0;
  for (auto e : low) t.low[i++] = e;
  i = 0;
  for (auto e : high) t.high[i++] = e;
  t.vl_high_limit = limit;
  return t;
}

double share(const shm::QosTables& t, uint32_t active, uint8_t vl, uint32_t packet = 4096) {
  return arbitration_share(t, vl_weights(t), active, vl, packet);
}

constexpr uint32_t bit(unsigned vl) { return 1u << vl; }

TEST(VlArbiter, LowWeightsSplitTheLink) {
  const auto t = tables({{0, 1}, {2, 3}}, {}, 0);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(2), 0), 0.25);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(2), 2), 0.75);
  // Alone, a VL has the whole link, whatever its weight.
  EXPECT_DOUBLE_EQ(share(t, bit(0), 0), 1.0);
  EXPECT_DOUBLE_EQ(share(t, 0, 2), 1.0);  // its own traffic makes it busy
  // Entries for one VL add up.
  const auto u = tables({{0, 1}, {2, 1}, {2, 2}}, {}, 0);
  EXPECT_DOUBLE_EQ(share(u, bit(0) | bit(2), 2), 0.75);
}

TEST(VlArbiter, HighPriorityBoundedByVlHighLimit) {
  // Limit 0: one high packet, then one low packet.
  auto t = tables({{0, 1}}, {{1, 1}}, 0);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1), 1), 0.5);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1), 0), 0.5);
  // Limit 3: 12 KiB of high per 4 KiB packet of low.
  t = tables({{0, 1}}, {{1, 1}}, 3);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1), 1), 0.75);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1), 0), 0.25);
  // Low alone has everything; high alone too.
  EXPECT_DOUBLE_EQ(share(t, bit(0), 0), 1.0);
  EXPECT_DOUBLE_EQ(share(t, bit(1), 1), 1.0);
  // 255: unlimited, low waits.
  t = tables({{0, 1}}, {{1, 1}}, 255);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1), 1), 1.0);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1), 0), 0.0);
}

TEST(VlArbiter, HighWeightsSplitHighPart) {
  const auto t = tables({{0, 1}}, {{1, 1}, {2, 3}}, 1);
  // H = 4096, P = 4096: high half, split 1:3.
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1) | bit(2), 1), 0.125);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1) | bit(2), 2), 0.375);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1) | bit(2), 0), 0.5);
}

TEST(VlArbiter, UnlistedAndNonOperationalVlsNeverSend) {
  auto t = tables({{0, 1}, {2, 3}}, {}, 0);
  EXPECT_DOUBLE_EQ(share(t, bit(3), 3), 0.0);       // in neither list
  EXPECT_DOUBLE_EQ(share(t, 0, shm::kVl15), 0.0);  // VL15 is never arbitrated
  t.oper_vls = 1;                                   // VL0 only: VL2's entry names no VL
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(2), 2), 0.0);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(2), 0), 1.0);
}

TEST(VlArbiter, AVlInBothListsIsHighPriority) {
  const auto t = tables({{0, 1}, {1, 5}}, {{1, 1}}, 0);
  const VlWeights w = vl_weights(t);
  EXPECT_EQ(w.high[1], 1u);
  EXPECT_EQ(w.low[1], 0u);
  EXPECT_DOUBLE_EQ(share(t, bit(0) | bit(1), 0), 0.5);
}

}  // namespace
}  // namespace softverbs::transport
