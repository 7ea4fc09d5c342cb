#include "shm/gsi_table.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace softverbs::shm {
namespace {

class GsiTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-gsi-table-test-" + std::to_string(getpid());
    auto t = GsiTable::open(path_);
    ASSERT_TRUE(t.has_value());
    table_.emplace(std::move(*t));
  }
  void TearDown() override {
    table_.reset();
    unlink(path_.c_str());
  }

  static TableAddr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    TableAddr x;
    x.family = AF_INET;
    x.bytes[12] = a;
    x.bytes[13] = b;
    x.bytes[14] = c;
    x.bytes[15] = d;
    return x;
  }
  static TableAddr any() {
    TableAddr x;
    x.family = AF_INET;
    return x;
  }

  std::string path_;
  std::optional<GsiTable> table_;
};

constexpr uint16_t kTcp = 0x0106;

TEST_F(GsiTableTest, SlotsNameTheirAgent) {
  const int slot = table_->claim_slot(0x1234);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(table_->agent_of_slot(slot), 0x1234u);
  EXPECT_EQ(table_->any_agent(), 0x1234u);
  table_->release_slot(slot);
  EXPECT_EQ(table_->agent_of_slot(slot), 0u);
  EXPECT_EQ(table_->agent_of_slot(-1), 0u);
  EXPECT_EQ(table_->agent_of_slot(GsiTable::kSlots), 0u);
}

TEST_F(GsiTableTest, APortIsHeldOncePerAddressAndTheWildcardConflictsWithAll) {
  const int slot = table_->claim_slot(7);
  uint16_t port = 7174;
  ASSERT_GE(table_->bind(slot, kTcp, v4(127, 0, 0, 1), &port, false), 0);
  EXPECT_EQ(port, 7174);
  port = 7174;
  EXPECT_EQ(table_->bind(slot, kTcp, v4(127, 0, 0, 1), &port, false), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  port = 7174;
  EXPECT_EQ(table_->bind(slot, kTcp, any(), &port, false), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  port = 7174;
  EXPECT_GE(table_->bind(slot, kTcp, v4(127, 0, 0, 2), &port, false), 0) << "another address";
  port = 7174;
  EXPECT_GE(table_->bind(slot, 0x0111, v4(127, 0, 0, 1), &port, false), 0) << "another port space";
}

TEST_F(GsiTableTest, PortZeroTakesAnEphemeralPort) {
  const int slot = table_->claim_slot(7);
  uint16_t a = 0, b = 0;
  ASSERT_GE(table_->bind(slot, kTcp, any(), &a, false), 0);
  ASSERT_GE(table_->bind(slot, kTcp, any(), &b, false), 0);
  EXPECT_GE(a, 32768);
  EXPECT_GE(b, 32768);
  EXPECT_NE(a, b);
}

TEST_F(GsiTableTest, ListenersAreFoundByAddressOrWildcard) {
  const int s1 = table_->claim_slot(11);
  uint16_t port = 5000;
  const int b = table_->bind(s1, kTcp, any(), &port, false);
  ASSERT_GE(b, 0);
  EXPECT_EQ(table_->listener_slot(kTcp, 5000, v4(10, 0, 0, 1)), -1) << "bound, not listening";
  table_->set_listening(b, true);
  EXPECT_EQ(table_->listener_slot(kTcp, 5000, v4(10, 0, 0, 1)), s1);
  EXPECT_EQ(table_->listener_slot(kTcp, 5001, v4(10, 0, 0, 1)), -1);
  EXPECT_EQ(table_->listener_slot(0x0111, 5000, v4(10, 0, 0, 1)), -1);
  table_->unbind(b);
  EXPECT_EQ(table_->listener_slot(kTcp, 5000, v4(10, 0, 0, 1)), -1);
}

TEST_F(GsiTableTest, WhatADeadProcessHeldIsFreeAgain) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto t = GsiTable::open(path_);
    if (!t) _exit(1);
    const int slot = t->claim_slot(99);
    uint16_t port = 6000;
    const int b = t->bind(slot, kTcp, any(), &port, false);
    if (b < 0) _exit(2);
    t->set_listening(b, true);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(table_->listener_slot(kTcp, 6000, any()), -1);
  EXPECT_EQ(table_->any_agent(), 0u);
  const int slot = table_->claim_slot(5);
  uint16_t port = 6000;
  EXPECT_GE(table_->bind(slot, kTcp, any(), &port, false), 0);
}

}  // namespace
}  // namespace softverbs::shm
