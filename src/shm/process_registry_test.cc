#include "shm/process_registry.h"
#include "shm/slot_high_water.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "shm/segment.h"

namespace softverbs::shm {
namespace {

class ProcessRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-registry-test-" + std::to_string(getpid());
    Result<std::unique_ptr<Segment>> s = Segment::open(path_);
    ASSERT_TRUE(s.is_ok()) << s.code();
    seg_ = std::move(s.value());
  }
  void TearDown() override {
    seg_.reset();
    unlink(path_.c_str());
  }
  std::string path_;
  std::unique_ptr<Segment> seg_;
};

// Processes start the way a device does: sweep, then attach. A sweep that
// runs while another process takes a slot must never take the newcomer for
// dead (its generation changes under the sweeper's feet).
TEST_F(ProcessRegistryTest, SweepNeverBuriesAProcessThatIsAttaching) {
  constexpr int kRounds = 30;
  constexpr int kProcs = 4;
  for (int round = 0; round < kRounds; ++round) {
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    std::vector<pid_t> pids;
    for (int i = 0; i < kProcs; ++i) {
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        close(fds[0]);
        sweep(*seg_);
        Result<OwnerId> me = attach_process(*seg_);
        OwnerId who = me.is_ok() ? me.value() : OwnerId{kMaxProcesses, 0};
        for (int k = 0; k < 50; ++k) sweep(*seg_);
        if (write(fds[1], &who, sizeof who) != sizeof who) _exit(2);
        pause();  // holds the liveness mutex until killed
        _exit(0);
      }
      pids.push_back(pid);
    }
    close(fds[1]);
    std::vector<OwnerId> live;
    OwnerId who{};
    while (read(fds[0], &who, sizeof who) == sizeof who) {
      live.push_back(who);
      if (live.size() == kProcs) break;
    }
    close(fds[0]);
    for (const OwnerId& w : live) {
      ASSERT_LT(w.slot, kMaxProcesses) << "attach failed";
      EXPECT_TRUE(process_alive(*seg_, w)) << "round " << round << ": slot " << w.slot << " buried alive";
    }
    for (pid_t pid : pids) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    for (const OwnerId& w : live) EXPECT_FALSE(process_alive(*seg_, w)) << "a killed process still looks alive";
    sweep(*seg_);
    if (HasFailure()) return;
  }
}

// A dead process's objects are retired wherever their slots lie: the walk
// ends at the table's high-water mark, which a claim only raises.
TEST_F(ProcessRegistryTest, RetiringWalksUpToTheHighestClaimedSlot) {
  SlotHighWater& hw = seg_->header().high_water;
  EXPECT_EQ(0u, walk_end(hw.qps, kMaxQpSlots)) << "a new segment has claimed nothing";
  const OwnerId who{3, 1};
  for (uint32_t slot : {9000u, 40u}) {
    SharedQp& q = seg_->qp(slot);
    q.owner = who;
    q.state.store(IBV_QPS_RTS);
    q.slot_state.store(static_cast<uint32_t>(SlotState::kLive));
    raise_high_water(hw.qps, slot);
  }
  EXPECT_EQ(9001u, walk_end(hw.qps, kMaxQpSlots));
  retire_objects_of(*seg_, who);
  EXPECT_EQ(IBV_QPS_ERR, seg_->qp(9000).state.load());
  EXPECT_EQ(IBV_QPS_ERR, seg_->qp(40).state.load());
  raise_high_water(hw.qps, kMaxQpSlots - 1);
  EXPECT_EQ(kMaxQpSlots, walk_end(hw.qps, kMaxQpSlots));
}

// An XRC domain lives while any process holds it open: a process that is
// gone gives back exactly the opens it held, and the last one frees it.
TEST_F(ProcessRegistryTest, ReleasingAProcesssXrcdOpensFreesTheLastDomain) {
  ControlLock lock(*seg_);
  SharedXrcd& x = seg_->xrcd(3);
  x.ino = 42;
  x.opens = 3;
  x.opens_by[5] = 2;
  x.opens_by[7] = 1;
  x.slot_state.store(static_cast<uint32_t>(SlotState::kLive));
  release_xrcds_of(*seg_, OwnerId{5, 1});
  EXPECT_EQ(1u, x.opens);
  EXPECT_EQ(0u, x.opens_by[5]);
  EXPECT_EQ(static_cast<uint32_t>(SlotState::kLive), x.slot_state.load());
  release_xrcds_of(*seg_, OwnerId{9, 1});  // held none: nothing changes
  EXPECT_EQ(1u, x.opens);
  release_xrcds_of(*seg_, OwnerId{7, 4});
  EXPECT_EQ(0u, x.opens);
  EXPECT_EQ(static_cast<uint32_t>(SlotState::kFree), x.slot_state.load());
}

}  // namespace
}  // namespace softverbs::shm
