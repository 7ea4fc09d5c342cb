// The host fabric's guesses of where the next WR lands (SendSide's hints):
// post_send prefetches them, so a hint that does not name the line the data
// or the completion really goes to loses the overlap without any other sign.
// Both QPs are this process's, in a private segment.
#include "fabric/host/host_fabric.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "shm/rings.h"
#include "transport/send_side.h"
#include "transport/testing/hand_built.h"

namespace softverbs::fabric::host {
namespace {

namespace hand_built = transport::hand_built;

constexpr uint32_t kTargetSlot = 2;
constexpr uint32_t kTargetQpn = (1u << shm::kQpSlotBits) | kTargetSlot;
constexpr uint32_t kRequesterSlot = 3;
constexpr uint32_t kRequesterQpn = (1u << shm::kQpSlotBits) | kRequesterSlot;
constexpr uint32_t kPd = 7;
constexpr uint32_t kCqSlot = 1;
constexpr uint32_t kMrSlot = 3;
constexpr uint32_t kPsn = 100;
constexpr shm::OwnerId kOwner{5, 1};
constexpr uint32_t kLkey = hand_built::lkey_of(kMrSlot);
constexpr uint32_t kRkey = hand_built::rkey_of(kMrSlot);

// Remembers the deadline the completer asked for (an RNR wait).
struct RecordingTimers final : transport::TimerService {
  void arm(transport::SendSide&, uint64_t deadline_ns) override { armed_at = deadline_ns; }
  uint64_t armed_at = 0;
};

class HostFabricHintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-host-fabric-test-" + std::to_string(getpid());
    Result<std::unique_ptr<shm::Segment>> s = shm::Segment::open(path_);
    ASSERT_TRUE(s.is_ok());
    seg_ = std::move(s.value());
    hand_built::make_cq(*seg_, kCqSlot, 64, kOwner);
    hand_built::make_qp(*seg_, kTargetSlot, {
        .qpn = kTargetQpn, .owner = kOwner, .pd = kPd, .dest_qpn = kRequesterQpn, .access = IBV_ACCESS_REMOTE_WRITE,
        .recv_cq = kCqSlot, .send_cq = kCqSlot, .epsn = kPsn, .rq_capacity = 8});
    shm::SharedQp& requester = hand_built::make_qp(*seg_, kRequesterSlot, {
        .qpn = kRequesterQpn, .owner = kOwner, .send_cq = kCqSlot});
    mem_.assign(4096, 0);
    hand_built::make_mr(*seg_, kMrSlot, mem_.data(), mem_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, kPd,
                        kOwner);

    side_.qp.seg = seg_.get();
    side_.qp.shared = &requester;
    side_.qp.qp_slot = kRequesterSlot;
    side_.qp.qpn = kRequesterQpn;
    side_.qp.qp_type = IBV_QPT_RC;
    side_.qp.pd_id = kPd;
    side_.qp.send_cq = kCqSlot;
    side_.qp.max_sge = 1;
    side_.qp.notifier = &notifier_;
    side_.qp.timers = &timers_;
    side_.qp.self = kOwner;
    side_.conn.link = &host_fabric();
    side_.conn.dest_qpn = kTargetQpn;
    side_.conn.ah.port_num = 1;
    side_.conn.ah.dlid = seg_->header().lid;
    side_.requester.next_psn = kPsn;
  }
  void TearDown() override {
    seg_.reset();
    unlink(path_.c_str());
  }

  uint64_t va(size_t off) const { return reinterpret_cast<uint64_t>(mem_.data()) + off; }

  std::string path_;
  std::unique_ptr<shm::Segment> seg_;
  std::vector<uint8_t> mem_;
  hand_built::QuietNotifier notifier_;
  RecordingTimers timers_;
  transport::SendSide side_;
};

TEST_F(HostFabricHintTest, PlacedWriteLeavesTheAddressItLandedAt) {
  std::memcpy(mem_.data(), "payload!", 8);
  ibv_sge sge{va(0), 8, kLkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = va(1024);
  wr.wr.rdma.rkey = kRkey;
  EXPECT_EQ(side_.hints.write_rkey.load(), 0u);
  ASSERT_NE(host_fabric().place_at_post(side_, wr, 8), 0u);
  EXPECT_EQ(std::memcmp(mem_.data() + 1024, "payload!", 8), 0);
  // The hint maps the next WRITE's remote address (same R_Key) to where it will land.
  EXPECT_EQ(side_.hints.write_rkey.load(), kRkey);
  const uint64_t next_remote = va(2048);
  EXPECT_EQ(next_remote + static_cast<uint64_t>(side_.hints.write_delta.load()),
            reinterpret_cast<uint64_t>(mem_.data() + 2048));

  // A WRITE the responder refuses (outside the region) is carried out —
  // answered with a NAK for transmit to report — and leaves the hint alone.
  side_.requester.next_psn = kPsn + 1;
  wr.wr.rdma.remote_addr = va(4092);
  side_.hints.write_rkey.store(0);
  EXPECT_NE(host_fabric().place_at_post(side_, wr, 8), 0u);
  EXPECT_EQ(side_.hints.write_rkey.load(), 0u);
  EXPECT_EQ(seg_->qp(kTargetSlot).state.load(), IBV_QPS_ERR);  // IBA 9.9.3: a remote access error
}

TEST_F(HostFabricHintTest, SendLeavesTheSlotOfTheTargetsNextReceiveCompletion) {
  for (uint64_t k = 0; k < 2; ++k) {
    const shm::Sge recv{va(512 + 128 * k), 64, kLkey};
    ASSERT_TRUE(shm::rq_post(*seg_, seg_->qp(kTargetSlot).rq, k + 1, &recv, 1));
  }
  ASSERT_TRUE(side_.sq.init(4, 1, 0));

  for (uint32_t k = 0; k < 2; ++k) {
    transport::SendWqe& w = side_.sq.at(k);
    std::memset(static_cast<void*>(&w), 0, sizeof w);
    w.opcode = IBV_WR_SEND;
    w.num_sge = 1;
    w.sge[0] = {va(0), 16, kLkey};
    w.length = 16;
    w.psn = kPsn + k;
    w.packets = 1;
    side_.sq.posted = side_.sq.next = k + 1;  // the requester hands it over
    iovec iov{mem_.data(), 16};
    const transport::IoList local{&iov, 1, 16};
    ASSERT_EQ(host_fabric().transmit(side_, w, local, w.psn), IBV_WC_SUCCESS);
    // Answered before transmit returned: the completer took its ACK.
    ASSERT_EQ(side_.sq.done, k + 1u);
    // The receive completion just written is followed by the slot the hint names.
    const shm::SharedCq& cq = seg_->cq(kCqSlot);
    EXPECT_EQ(cq.tail.load(), k + 1);
    EXPECT_EQ(side_.hints.recv_cqe.load(), reinterpret_cast<uintptr_t>(shm::cq_slot(*seg_, cq, k + 1)));
  }
}

TEST_F(HostFabricHintTest, PlacedSendCompletesTheReceiveBeforeItIsQueued) {
  const shm::Sge recv{va(512), 64, kLkey};
  ASSERT_TRUE(shm::rq_post(*seg_, seg_->qp(kTargetSlot).rq, 41, &recv, 1));
  // Inline, in two pieces, as UCX posts its active messages.
  char header[] = "head:";
  char body[] = "body";
  ibv_sge pieces[2] = {{reinterpret_cast<uint64_t>(header), 5, 0}, {reinterpret_cast<uint64_t>(body), 4, 0}};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_INLINE;
  wr.sg_list = pieces;
  wr.num_sge = 2;
  ASSERT_NE(host_fabric().place_at_post(side_, wr, 9), 0u);
  EXPECT_EQ(std::memcmp(mem_.data() + 512, "head:body", 9), 0);
  shm::SharedCq& cq = seg_->cq(kCqSlot);
  shm::Cqe cqe;
  ASSERT_TRUE(shm::cq_pop(*seg_, cq, &cqe));
  EXPECT_EQ(cqe.wr_id, 41u);
  EXPECT_EQ(cqe.byte_len, 9u);
  EXPECT_EQ(seg_->qp(kTargetSlot).resp.epsn, kPsn + 1);

  // No receive left: the responder answers RNR, nothing is consumed, and
  // the WQE's transmit reports that answer to the completer.
  side_.requester.next_psn = kPsn + 1;
  const uint32_t token = host_fabric().place_at_post(side_, wr, 9);
  ASSERT_NE(token, 0u);
  EXPECT_FALSE(shm::cq_pop(*seg_, cq, &cqe));
  EXPECT_EQ(seg_->qp(kTargetSlot).resp.epsn, kPsn + 1);
  ASSERT_TRUE(side_.sq.init(4, 1, 16));
  transport::SendWqe& w = side_.sq.at(0);
  std::memset(static_cast<void*>(&w), 0, sizeof w);
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  w.length = 9;
  w.psn = kPsn + 1;
  w.packets = 1;
  w.placed = token;
  side_.sq.posted = side_.sq.next = 1;
  side_.conn.rnr_retry = 7;  // IBA 9.7.5.2.8: retry for ever
  iovec iov{nullptr, 0};
  const transport::IoList local{&iov, 0, 9};
  ASSERT_EQ(host_fabric().transmit(side_, w, local, w.psn), IBV_WC_SUCCESS);
  EXPECT_TRUE(side_.completer.rnr_wait);
  EXPECT_NE(timers_.armed_at, 0u);
  EXPECT_EQ(side_.sq.done, 0u);
}

}  // namespace
}  // namespace softverbs::fabric::host
