#include "mad/vl15_buffer.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

namespace softverbs::mad {
namespace {

TEST(Vl15Buffer, ParsesTheEnvironment) {
  bool error = true;
  EXPECT_EQ(parse_vl15_buffer(nullptr, &error), kVl15BufferDefault);
  EXPECT_FALSE(error);
  EXPECT_EQ(parse_vl15_buffer("", &error), kVl15BufferDefault);
  EXPECT_EQ(parse_vl15_buffer("1", &error), 1u);
  EXPECT_FALSE(error);
  EXPECT_EQ(parse_vl15_buffer("64", &error), 64u);
  for (const char* bad : {"0", "65", "-1", "2x", "x", "4294967297"}) {
    EXPECT_EQ(parse_vl15_buffer(bad, &error), kVl15BufferDefault) << bad;
    EXPECT_TRUE(error) << bad;
  }
}

TEST(Vl15Buffer, AFullBufferDropsAndCountsAndFreesItsSlots) {
  auto b = std::make_unique<shm::Vl15Buffer>();
  {
    Vl15Slot a(*b, 2, 100), c(*b, 2, 100);
    EXPECT_TRUE(a.held());
    EXPECT_TRUE(c.held());
    EXPECT_EQ(b->capacity.load(), 2u);
    Vl15Slot d(*b, 2, 100);
    EXPECT_FALSE(d.held());
    EXPECT_EQ(b->dropped.load(), 1u);
  }
  // Both slots came back: two more fit, the third is dropped.
  Vl15Slot e(*b, 2, 200), f(*b, 2, 200), g(*b, 2, 200);
  EXPECT_TRUE(e.held() && f.held());
  EXPECT_FALSE(g.held());
  EXPECT_EQ(b->dropped.load(), 2u);
}

TEST(Vl15Buffer, TheFirstSmpFixesTheSize) {
  auto b = std::make_unique<shm::Vl15Buffer>();
  std::vector<std::unique_ptr<Vl15Slot>> held;
  held.push_back(std::make_unique<Vl15Slot>(*b, 3, 1));
  // Another process with another SOFTVERBS_VL15_BUFFER gets the port's size.
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<Vl15Slot>(*b, 40, 1));
  int taken = 0;
  for (auto& s : held) taken += s->held() ? 1 : 0;
  EXPECT_EQ(taken, 3);
  EXPECT_EQ(b->dropped.load(), 2u);
}

TEST(Vl15Buffer, ALeaseThatEndedIsTakenOver) {
  auto b = std::make_unique<shm::Vl15Buffer>();
  // A holder that died: its slot stays taken until its lease ends.
  std::optional<Vl15Slot> dead(std::in_place, *b, 1, 1000);
  ASSERT_TRUE(dead->held());
  EXPECT_FALSE(Vl15Slot(*b, 1, 1000 + kVl15LeaseNs - 1).held());
  {
    Vl15Slot late(*b, 1, 1000 + kVl15LeaseNs + 1);
    EXPECT_TRUE(late.held());
    // The first holder's release does not free the slot it lost.
    dead.reset();
    EXPECT_FALSE(Vl15Slot(*b, 1, 1000 + kVl15LeaseNs + 2).held());
  }
  EXPECT_TRUE(Vl15Slot(*b, 1, 1000 + kVl15LeaseNs + 3).held());
}

}  // namespace
}  // namespace softverbs::mad
