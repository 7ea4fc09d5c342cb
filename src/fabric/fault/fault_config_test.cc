#include "fabric/fault/fault_config.h"

#include <gtest/gtest.h>

namespace softverbs::fabric::fault {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(FaultConfig, ParsesTheDocumentedExample) {
  const FaultConfigParse r =
      parse_fault_config("loss=0.01,dup=0.01,reorder=0.02:8,corrupt=0.001,delay=50us,jitter=20us,seed=42");
  ASSERT_TRUE(r.ok()) << r.error;
  const FaultConfig& c = r.config;
  EXPECT_DOUBLE_EQ(c.loss, 0.01);
  EXPECT_DOUBLE_EQ(c.duplicate, 0.01);
  EXPECT_DOUBLE_EQ(c.reorder, 0.02);
  EXPECT_EQ(c.reorder_window, 8u);
  EXPECT_DOUBLE_EQ(c.corrupt, 0.001);
  EXPECT_EQ(c.delay, microseconds(50));
  EXPECT_EQ(c.jitter, microseconds(20));
  EXPECT_EQ(c.seed, 42u);
  EXPECT_TRUE(c.active());
}

TEST(FaultConfig, EmptyIsInactiveAndKeysAreOptional) {
  const FaultConfigParse empty = parse_fault_config("");
  ASSERT_TRUE(empty.ok()) << empty.error;
  EXPECT_FALSE(empty.config.active());

  // A seed or pool size alone injects nothing.
  const FaultConfigParse seed_only = parse_fault_config("seed=7,capacity=4,max_datagram=100");
  ASSERT_TRUE(seed_only.ok()) << seed_only.error;
  EXPECT_FALSE(seed_only.config.active());
  EXPECT_EQ(seed_only.config.capacity, 4u);
  EXPECT_EQ(seed_only.config.max_datagram, 100u);

  const FaultConfigParse reorder = parse_fault_config("reorder=1");
  ASSERT_TRUE(reorder.ok()) << reorder.error;
  EXPECT_EQ(reorder.config.reorder, 1.0);
  EXPECT_EQ(reorder.config.reorder_window, FaultConfig{}.reorder_window);
}

TEST(FaultConfig, DurationUnits) {
  struct Case {
    const char* text;
    nanoseconds want;
  } cases[] = {{"delay=7ns", nanoseconds(7)},  {"delay=3us", microseconds(3)},
               {"delay=2ms", milliseconds(2)}, {"delay=1s", std::chrono::seconds(1)},
               {"delay=0us", nanoseconds(0)}};
  for (const Case& c : cases) {
    const FaultConfigParse r = parse_fault_config(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error;
    EXPECT_EQ(r.config.delay, c.want) << c.text;
  }
  const FaultConfigParse hold = parse_fault_config("hold=250us");
  ASSERT_TRUE(hold.ok()) << hold.error;
  EXPECT_EQ(hold.config.hold, microseconds(250));
}

TEST(FaultConfig, FormatRoundTrips) {
  FaultConfig c;
  c.loss = 0.1;
  c.duplicate = 1.0 / 3;
  c.reorder = 0.25;
  c.reorder_window = 17;
  c.corrupt = 1e-9;
  c.delay = microseconds(1500);
  c.jitter = nanoseconds(1234567);
  c.hold = std::chrono::seconds(2);
  c.seed = UINT64_MAX;
  c.capacity = 33;
  c.max_datagram = 65535;
  const std::string text = format_fault_config(c);
  const FaultConfigParse r = parse_fault_config(text);
  ASSERT_TRUE(r.ok()) << text << ": " << r.error;
  EXPECT_EQ(r.config.loss, c.loss);
  EXPECT_EQ(r.config.duplicate, c.duplicate);
  EXPECT_EQ(r.config.reorder, c.reorder);
  EXPECT_EQ(r.config.reorder_window, c.reorder_window);
  EXPECT_EQ(r.config.corrupt, c.corrupt);
  EXPECT_EQ(r.config.delay, c.delay);
  EXPECT_EQ(r.config.jitter, c.jitter);
  EXPECT_EQ(r.config.hold, c.hold);
  EXPECT_EQ(r.config.seed, c.seed);
  EXPECT_EQ(r.config.capacity, c.capacity);
  EXPECT_EQ(r.config.max_datagram, c.max_datagram);
}

TEST(FaultConfig, BadStringsNameTheProblem) {
  struct Case {
    const char* text;
    const char* says;  // a piece of the error the user must see
  } cases[] = {
      {"loss", "'loss' is not key=value"},
      {"loss=", "loss must be a probability"},
      {"loss=1.5", "'loss=1.5': loss must be a probability in [0,1]"},
      {"loss=-0.1", "loss must be a probability"},
      {"loss=nan", "loss must be a probability"},
      {"loss=0.1x", "loss must be a probability"},
      {"dup=2", "dup must be a probability"},
      {"corrupt=abc", "corrupt must be a probability"},
      {"reorder=0.1:0", "reorder must be P or P:W"},
      {"reorder=0.1:", "reorder must be P or P:W"},
      {"reorder=0.1:8:2", "reorder must be P or P:W"},
      {"delay=50", "delay must be a duration"},
      {"delay=50 us", "delay must be a duration"},
      {"delay=-5us", "delay must be a duration"},
      {"delay=5min", "delay must be a duration"},
      {"delay=99999999999999999s", "delay must be a duration"},
      {"jitter=1.5us", "jitter must be a duration"},
      {"hold=0ms", "hold must be a positive duration"},
      {"seed=-1", "seed must be an unsigned 64-bit integer"},
      {"capacity=0", "capacity must be an integer in 1..65536"},
      {"capacity=1000000000", "capacity must be an integer"},
      {"max_datagram=70000", "max_datagram must be an integer in 1..65535"},
      {"lose=0.1", "unknown key 'lose'"},
      {"loss=0.1,loss=0.2", "key 'loss' given twice"},
      {"loss=0.1,", "trailing ','"},
      {"loss=0.1,,dup=0.1", "empty item"},
      {" loss=0.1", "unknown key ' loss'"},
  };
  for (const Case& c : cases) {
    const FaultConfigParse r = parse_fault_config(c.text);
    EXPECT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error.find(c.says), std::string::npos) << c.text << " -> " << r.error;
    EXPECT_EQ(r.error.rfind("fault config: ", 0), 0u) << r.error;
    // A refused string never leaves a half-applied config behind.
    EXPECT_FALSE(r.config.active()) << c.text;
  }
}

}  // namespace
}  // namespace softverbs::fabric::fault
