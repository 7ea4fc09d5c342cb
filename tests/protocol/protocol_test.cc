// The RC protocol at the level of packets: requester, responder and
// completer — the engine both fabrics run — over a scripted link
// (src/fabric/fake/fake_link.h) that loses, duplicates, reorders and delays
// the packets the test picks. Two QPs of one process in a private segment:
// A requests, B responds.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fabric/fake/fake_link.h"
#include "shm/port_pkeys.h"
#include "shm/port_qos.h"
#include "shm/qp_pkeys.h"
#include "shm/rings.h"
#include "transport/completer.h"
#include "transport/requester.h"
#include "transport/send_side.h"
#include "transport/testing/hand_built.h"
#include "transport/vl.h"
#include "util/time.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace softverbs {
namespace {

using fabric::fake::Direction;
using fabric::fake::FakeLink;
using fabric::fake::Fate;
using fabric::fake::PacketInfo;
using wire::Opcode;
namespace hand_built = transport::hand_built;

constexpr uint32_t kA = 2, kB = 3;  // QP slots
constexpr uint32_t kQpnA = (1u << shm::kQpSlotBits) | kA;
constexpr uint32_t kQpnB = (1u << shm::kQpSlotBits) | kB;
constexpr uint32_t kCqA = 1, kCqB = 2;
constexpr uint32_t kMrA = 4, kMrB = 5;
constexpr uint32_t kPd = 9;
constexpr uint32_t kPsn = 0xfffffe;  // wraps within the first message: 24-bit PSN arithmetic on every path
constexpr uint32_t kMtu = 256;
constexpr shm::OwnerId kOwner{3, 1};

class ProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-protocol-test-" + std::to_string(getpid());
    Result<std::unique_ptr<shm::Segment>> s = shm::Segment::open(path_);
    ASSERT_TRUE(s.is_ok());
    seg_ = std::move(s.value());
    hand_built::make_cq(*seg_, kCqA, 256, kOwner);
    hand_built::make_cq(*seg_, kCqB, 256, kOwner);
    mem_a_.assign(8192, 0);
    mem_b_.assign(8192, 0);
    constexpr uint32_t kAll =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    hand_built::make_mr(*seg_, kMrA, mem_a_.data(), mem_a_.size(), kAll, kPd, kOwner);
    hand_built::make_mr(*seg_, kMrB, mem_b_.data(), mem_b_.size(), kAll, kPd, kOwner);
    shm::SharedQp& a = hand_built::make_qp(*seg_, kA, {
        .qpn = kQpnA, .owner = kOwner, .pd = kPd, .dest_qpn = kQpnB, .access = kAll, .recv_cq = kCqA,
        .send_cq = kCqA, .path_mtu = IBV_MTU_256});
    hand_built::make_qp(*seg_, kB, {
        .qpn = kQpnB, .owner = kOwner, .pd = kPd, .dest_qpn = kQpnA, .access = kAll, .recv_cq = kCqB,
        .send_cq = kCqB, .epsn = kPsn, .path_mtu = IBV_MTU_256, .min_rnr_timer = 1, .rq_capacity = 16});

    link_ = std::make_unique<FakeLink>(*seg_, side_, kB, notifier_);
    transport::QpConsts& c = side_.qp;
    c.seg = seg_.get();
    c.shared = &a;
    c.qp_slot = kA;
    c.qpn = kQpnA;
    c.qp_type = IBV_QPT_RC;
    c.pd_id = kPd;
    c.send_cq = kCqA;
    c.max_sge = 2;
    c.max_inline = 64;
    c.notifier = &notifier_;
    c.timers = &link_->timers();
    c.self = kOwner;
    side_.conn.link = link_.get();
    side_.conn.dest_qpn = kQpnB;
    side_.conn.path_mtu = IBV_MTU_256;
    side_.conn.mtu = kMtu;
    side_.conn.timeout = 1;  // 8 us local ACK timeout: the tests wait it out for real
    side_.conn.retry_cnt = 7;
    side_.conn.rnr_retry = 7;
    side_.conn.max_rd_atomic = 4;
    side_.requester.next_psn = kPsn;
    side_.completer.retries_left = 7;
    side_.completer.rnr_left = 7;
    ASSERT_TRUE(side_.sq.init(32, 2, 64));
  }
  void TearDown() override {
    link_.reset();
    seg_.reset();
    unlink(path_.c_str());
  }

  uint64_t va_a(size_t off) const { return reinterpret_cast<uint64_t>(mem_a_.data()) + off; }
  uint64_t va_b(size_t off) const { return reinterpret_cast<uint64_t>(mem_b_.data()) + off; }

  // Queues one signalled WR on A and lets the requester go.
  void post(ibv_wr_opcode opcode, size_t local_off, uint32_t length, size_t remote_off, uint64_t compare_add = 0,
            uint64_t swap = 0, uint32_t send_flags = IBV_SEND_SIGNALED) {
    transport::SendWqe& w = side_.sq.at(side_.sq.posted);
    std::memset(static_cast<void*>(&w), 0, sizeof w);
    w.wr_id = side_.sq.posted;
    w.opcode = opcode;
    w.send_flags = send_flags;
    w.num_sge = 1;
    w.sge[0] = {va_a(local_off), length, hand_built::lkey_of(kMrA)};
    w.length = length;
    w.remote_addr = va_b(remote_off);
    w.rkey = hand_built::rkey_of(kMrB);
    w.compare_add = compare_add;
    w.swap = swap;
    ++side_.sq.posted;
    transport::progress(side_);
  }
  void post_recv_b(size_t off, uint32_t length) {
    const shm::Sge sge{va_b(off), length, hand_built::lkey_of(kMrB)};
    ASSERT_TRUE(shm::rq_post(*seg_, seg_->qp(kB).rq, 100, &sge, 1));
  }
  // The send completions of A, in order.
  std::vector<shm::Cqe> completions() {
    std::vector<shm::Cqe> out;
    shm::Cqe cqe;
    while (shm::cq_pop(*seg_, seg_->cq(kCqA), &cqe)) out.push_back(cqe);
    return out;
  }
  void fill_a(size_t off, size_t n) {
    for (size_t i = 0; i < n; ++i) mem_a_[off + i] = static_cast<uint8_t>(i * 7 + 3);
  }
  bool same(const std::vector<uint8_t>& x, size_t xo, const std::vector<uint8_t>& y, size_t yo, size_t n) {
    return std::memcmp(x.data() + xo, y.data() + yo, n) == 0;
  }
  const shm::QpCounters& counters_a() { return seg_->qp(kA).counters; }
  const shm::QpCounters& counters_b() { return seg_->qp(kB).counters; }
  static uint32_t psn(uint32_t k) { return (kPsn + k) & 0xffffff; }

  std::string path_;
  std::unique_ptr<shm::Segment> seg_;
  std::vector<uint8_t> mem_a_, mem_b_;
  hand_built::QuietNotifier notifier_;
  transport::SendSide side_;
  std::unique_ptr<FakeLink> link_;
};

TEST_F(ProtocolTest, CleanLinkWritesInOnePass) {
  fill_a(0, 1000);
  post(IBV_WR_RDMA_WRITE, 0, 1000, 100);  // 4 packets of 256 B
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(mem_b_, 100, mem_a_, 0, 1000));
  // FIRST, MIDDLE, MIDDLE, LAST, one ACK: the opcodes from the table.
  const auto& sent = link_->sent(Direction::kRequest);
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[0][0], static_cast<uint8_t>(Opcode::kRcRdmaWriteFirst));
  EXPECT_EQ(sent[1][0], static_cast<uint8_t>(Opcode::kRcRdmaWriteMiddle));
  EXPECT_EQ(sent[3][0], static_cast<uint8_t>(Opcode::kRcRdmaWriteLast));
  EXPECT_EQ(link_->sent(Direction::kResponse).size(), 1u);
  EXPECT_EQ(counters_a().retries.load(), 0u);
}

// IBA 9.7.5.2.1: a lost packet makes the next one a sequence error; the NAK
// names the PSN expected and the requester goes back to it at once.
TEST_F(ProtocolTest, LostRequestIsResentFromTheSequenceNak) {
  fill_a(0, 1000);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest && p.seq == 1 ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 1000, 100);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(mem_b_, 100, mem_a_, 0, 1000));
  EXPECT_EQ(counters_a().sequence_naks_received.load(), 1u);
  // Go-back-N from the lost packet: 4 sent, then packets 1..3 again.
  const auto& sent = link_->sent(Direction::kRequest);
  ASSERT_EQ(sent.size(), 7u);
  EXPECT_EQ(wire::PacketView::parse(sent[4], 4096).bth().psn.value(), psn(1));
  EXPECT_EQ(counters_b().out_of_sequence.load(), 2u);  // packets 2 and 3 (one NAK: C9-…)
}

// IBA 9.7.5.1.4: an ACK that passes a READ whose response never came is an
// implied NAK: the READ is asked again, without waiting for the timer.
TEST_F(ProtocolTest, AckPastALostReadResponseAsksForItAgain) {
  fill_a(0, 64);
  for (size_t i = 0; i < 200; ++i) mem_b_[2000 + i] = static_cast<uint8_t>(i);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse && p.seq == 0 ? Fate::kHoldBack : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_READ, 1000, 200, 2000);  // PSN 0: its response held behind the next answer
  post(IBV_WR_RDMA_WRITE, 0, 64, 0);        // PSN 1: its ACK arrives first
  link_->pump();
  EXPECT_GE(counters_a().retries.load(), 1u);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(c[1].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(mem_a_, 1000, mem_b_, 2000, 200));
  EXPECT_GE(counters_b().duplicate_requests.load(), 1u);  // the READ answered twice
}

// A READ whose middle response is lost resumes where its data stopped: the
// new request asks for the rest only (IBA 9.7.5.1.4).
TEST_F(ProtocolTest, ReadResumesFromTheFirstMissingResponse) {
  for (size_t i = 0; i < 1000; ++i) mem_b_[3000 + i] = static_cast<uint8_t>(i * 13);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse && p.seq == 2 ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_READ, 500, 1000, 3000);  // 4 responses
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(mem_a_, 500, mem_b_, 3000, 1000));
  const auto& sent = link_->sent(Direction::kRequest);
  ASSERT_EQ(sent.size(), 2u);
  const wire::PacketView again = wire::PacketView::parse(sent[1], 4096);
  EXPECT_EQ(again.bth().psn.value(), psn(2));
  EXPECT_EQ(again.reth().va, va_b(3000 + 2 * kMtu));
  EXPECT_EQ(again.reth().dma_length, 1000u - 2 * kMtu);
  EXPECT_EQ(counters_a().retries.load(), 1u);
}

// A receiver without a receive WQE answers RNR NAK; the requester waits
// min_rnr_timer and tries again (IBA 9.7.5.2.8).
TEST_F(ProtocolTest, RnrNakWaitsAndRetries) {
  fill_a(0, 40);
  post(IBV_WR_SEND, 0, 40, 0);
  link_->pump();
  EXPECT_EQ(counters_a().rnr_naks_received.load(), 1u);
  EXPECT_TRUE(side_.completer.rnr_wait);
  post_recv_b(600, 64);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(mem_b_, 600, mem_a_, 0, 40));
}

TEST_F(ProtocolTest, RnrRetryExhaustionFailsTheWqe) {
  side_.conn.rnr_retry = 2;
  side_.completer.rnr_left = 2;
  post(IBV_WR_SEND, 0, 40, 0);
  post(IBV_WR_SEND, 0, 40, 0);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(c[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(counters_a().rnr_naks_received.load(), 3u);  // the first try and 2 retries
  EXPECT_EQ(seg_->qp(kA).state.load(), IBV_QPS_ERR);
}

// A repeated atomic is answered from the responder's memory of it, never
// executed twice (IBA 9.7.5.1.5 / C9-…).
TEST_F(ProtocolTest, LostAtomicAckIsReplayedNotReexecuted) {
  uint64_t target = 40;
  std::memcpy(mem_b_.data() + 4096, &target, 8);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse && p.seq == 0 ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_ATOMIC_FETCH_AND_ADD, 16, 8, 4096, 2);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  std::memcpy(&target, mem_b_.data() + 4096, 8);
  EXPECT_EQ(target, 42u);  // added once
  uint64_t original = 0;
  std::memcpy(&original, mem_a_.data() + 16, 8);
  EXPECT_EQ(original, 40u);
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 2u);  // sent again after the timeout
  EXPECT_EQ(counters_b().duplicate_requests.load(), 1u);
}

// IBA 1.5 ATOMIC WRITE as the engine puts it on the wire (Linux rxe's
// layout): one request, opcode 0x1D, a RETH of length 8 and the eight bytes;
// answered by a zero-length READ RESPONSE ONLY with an ACK AETH at the
// request's PSN. It completes as IBV_WC_ATOMIC_WRITE.
TEST_F(ProtocolTest, AtomicWriteIsOneRequestAnsweredByAnEmptyReadResponse) {
  const uint8_t value[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  std::memcpy(mem_a_.data() + 40, value, 8);
  post(IBV_WR_ATOMIC_WRITE, 40, 8, 4096 + 16);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(c[0].opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_TRUE(same(mem_b_, 4096 + 16, mem_a_, 40, 8));

  ASSERT_EQ(link_->sent(Direction::kRequest).size(), 1u);
  const std::vector<uint8_t>& req = link_->sent(Direction::kRequest)[0];
  const uint64_t va = va_b(4096 + 16);
  const uint32_t rkey = hand_built::rkey_of(kMrB);
  std::vector<uint8_t> want = {
      0x1d, 0x00, 0xff, 0xff,                                          // opcode; SE/M/pad/TVer; P_Key
      0x00, uint8_t(kQpnB >> 16), uint8_t(kQpnB >> 8), uint8_t(kQpnB),  // destination QP
      0x80, uint8_t(kPsn >> 16), uint8_t(kPsn >> 8), uint8_t(kPsn)};   // AckReq; PSN
  for (int i = 7; i >= 0; --i) want.push_back(uint8_t(va >> (8 * i)));  // RETH: VA
  for (int i = 3; i >= 0; --i) want.push_back(uint8_t(rkey >> (8 * i)));  // R_Key
  for (const uint8_t b : {0, 0, 0, 8}) want.push_back(b);                  // DMA length
  want.insert(want.end(), value, value + 8);                               // the eight bytes, no pad
  for (int i = 0; i < 4; ++i) want.push_back(0);                           // ICRC slot
  EXPECT_EQ(req, want);

  ASSERT_EQ(link_->sent(Direction::kResponse).size(), 1u);
  const std::vector<uint8_t> want_resp = {
      0x10, 0x00, 0xff, 0xff, 0x00, uint8_t(kQpnA >> 16), uint8_t(kQpnA >> 8), uint8_t(kQpnA),
      0x00, uint8_t(kPsn >> 16), uint8_t(kPsn >> 8), uint8_t(kPsn),
      0x1f, 0x00, 0x00, 0x01,  // AETH: ACK, credits not limited, MSN 1
      0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(link_->sent(Direction::kResponse)[0], want_resp);
}

// A lost answer to an ATOMIC WRITE: the request is sent again and answered
// from the responder's resources; the word keeps what was stored after it.
TEST_F(ProtocolTest, LostAtomicWriteResponseIsReplayedNotStoredAgain) {
  const uint64_t value = 0x1111111111111111ull, later = 0x2222222222222222ull;
  std::memcpy(mem_a_.data() + 8, &value, 8);
  link_->set_script([this, later](const PacketInfo& p) {
    if (p.direction == Direction::kResponse && p.seq == 0) {
      std::memcpy(mem_b_.data() + 4096, &later, 8);  // stored after it, by someone else
      return Fate::kLose;
    }
    return Fate::kDeliver;
  });
  post(IBV_WR_ATOMIC_WRITE, 8, 8, 4096);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  uint64_t word = 0;
  std::memcpy(&word, mem_b_.data() + 4096, 8);
  EXPECT_EQ(word, later);
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 2u);  // sent again after the timeout
  EXPECT_EQ(counters_b().duplicate_requests.load(), 1u);
}

// An ATOMIC WRITE takes a responder resource like a READ: max_rd_atomic
// bounds how many are outstanding, and an ACK of a later request does not
// complete one whose answer has not come.
TEST_F(ProtocolTest, AtomicWritesAreBoundedByMaxRdAtomic) {
  side_.conn.max_rd_atomic = 2;
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse ? Fate::kDelay : Fate::kDeliver;
  });
  for (int i = 0; i < 4; ++i) post(IBV_WR_ATOMIC_WRITE, 8 * i, 8, 4096 + 8 * i);
  link_->pump();
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 2u);
  EXPECT_TRUE(completions().empty());
  link_->set_script(nullptr);
  link_->release_delayed();
  link_->run();
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 4u);
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 4u);
  for (const shm::Cqe& e : c) EXPECT_EQ(e.status, IBV_WC_SUCCESS);
}

// IBA 10.8.3.3: a fenced WR waits for an ATOMIC WRITE before it as for a READ.
TEST_F(ProtocolTest, FencedRequestWaitsForAnAtomicWrite) {
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse ? Fate::kDelay : Fate::kDeliver;
  });
  post(IBV_WR_ATOMIC_WRITE, 0, 8, 4096);
  post(IBV_WR_RDMA_WRITE, 64, 16, 4200, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_FENCE);
  link_->pump();
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 1u) << "the fenced WRITE went before the answer";
  link_->set_script(nullptr);
  link_->release_delayed();
  link_->run();
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 2u);
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(c[1].opcode, IBV_WC_RDMA_WRITE);
  for (const shm::Cqe& e : c) EXPECT_EQ(e.status, IBV_WC_SUCCESS);
}

// A duplicated SEND is acknowledged again and delivered once.
TEST_F(ProtocolTest, DuplicatedSendIsDeliveredOnce) {
  fill_a(0, 40);
  post_recv_b(0, 64);
  post_recv_b(100, 64);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest ? Fate::kDuplicate : Fate::kDeliver;
  });
  post(IBV_WR_SEND, 0, 40, 0);
  link_->run();
  ASSERT_EQ(completions().size(), 1u);
  shm::Cqe cqe;
  int received = 0;
  while (shm::cq_pop(*seg_, seg_->cq(kCqB), &cqe)) ++received;
  EXPECT_EQ(received, 1);
  EXPECT_EQ(counters_b().duplicate_requests.load(), 1u);
}

// Reordered packets: the late one is a duplicate, the early one a sequence
// error; the message still arrives whole and in order.
TEST_F(ProtocolTest, ReorderedPacketsStillCompleteInOrder) {
  fill_a(0, 1024);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest && p.seq == 1 ? Fate::kHoldBack : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 1024, 0);
  post(IBV_WR_RDMA_WRITE, 0, 256, 2048);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 0u);
  EXPECT_EQ(c[1].wr_id, 1u);
  EXPECT_TRUE(same(mem_b_, 0, mem_a_, 0, 1024));
  EXPECT_TRUE(same(mem_b_, 2048, mem_a_, 0, 256));
}

// retry_cnt timeouts, then RETRY_EXC_ERR (IBA C9-140); the rest is flushed.
TEST_F(ProtocolTest, RetryExhaustionAfterRetryCntTimeouts) {
  side_.conn.retry_cnt = 2;
  side_.completer.retries_left = 2;
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 64, 0);
  post(IBV_WR_RDMA_WRITE, 0, 64, 0);
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(c[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(counters_a().retry_exceeded.load(), 1u);
  EXPECT_EQ(counters_a().ack_timeouts.load(), 3u);
  EXPECT_EQ(counters_a().tail_probes.load(), 0u);  // never measured a round trip: no probe
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 6u);  // both, three times
}

// Tail-loss probes (completer.cc). A packet link has measured a round trip
// of 1 us, so the probe time is its floor (1 ms), against a local ACK
// timeout of 67 ms (timeout 14): a test that recovers in under 30 ms did so
// by a probe, not by the timer.
class TailProbeTest : public ProtocolTest {
 protected:
  void SetUp() override {
    ProtocolTest::SetUp();
    side_.conn.timeout = 14;
    side_.completer.rtt.srtt_ns = 1000;
  }
  // Runs the link; the milliseconds it took.
  double run_ms() {
    const uint64_t t0 = now_ns();
    link_->run();
    return static_cast<double>(now_ns() - t0) / 1e6;
  }
};

// The last packet of a burst lost: no later packet draws a NAK; the probe
// resends it alone.
TEST_F(TailProbeTest, LostLastPacketIsResentByTheProbe) {
  fill_a(0, 1000);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest && p.seq == 3 ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 1000, 100);
  EXPECT_LT(run_ms(), 60.0);  // the ACK timer is 67 ms
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(mem_b_, 100, mem_a_, 0, 1000));
  EXPECT_EQ(counters_a().tail_probes.load(), 1u);
  EXPECT_EQ(counters_a().ack_timeouts.load(), 0u);
  EXPECT_EQ(counters_a().retries.load(), 0u);
  EXPECT_EQ(side_.completer.retries_left, 7u);  // a probe is not a retry
  const auto& sent = link_->sent(Direction::kRequest);
  ASSERT_EQ(sent.size(), 5u);
  EXPECT_EQ(wire::PacketView::parse(sent[4], 4096).bth().psn.value(), psn(3));
}

// Only the ACK lost: the probe is a duplicate, which the responder re-ACKs
// (IBA 9.7.5.1.5) without writing again.
TEST_F(TailProbeTest, LostAckIsAnsweredAgainForTheProbe) {
  fill_a(0, 1000);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse && p.seq == 0 ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 1000, 100);
  EXPECT_LT(run_ms(), 60.0);  // the ACK timer is 67 ms
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(counters_a().tail_probes.load(), 1u);
  EXPECT_EQ(counters_a().ack_timeouts.load(), 0u);
  EXPECT_EQ(counters_b().duplicate_requests.load(), 1u);
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 5u);
}

// The last two packets lost: the probe (the last) is ahead of the expected
// PSN and draws the sequence NAK that starts go-back-N (IBA 9.7.5.2.1).
TEST_F(TailProbeTest, ProbeAheadOfTheGapDrawsTheSequenceNak) {
  fill_a(0, 1000);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest && (p.seq == 2 || p.seq == 3) ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 1000, 100);
  EXPECT_LT(run_ms(), 60.0);  // the ACK timer is 67 ms
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(mem_b_, 100, mem_a_, 0, 1000));
  EXPECT_EQ(counters_a().tail_probes.load(), 1u);
  EXPECT_EQ(counters_a().sequence_naks_received.load(), 1u);
  EXPECT_EQ(counters_a().ack_timeouts.load(), 0u);
  // 4 sent, the probe (3), then 2 and 3 again from the NAK.
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 7u);
}

// The NAK for the gap lost: the responder sends one per gap, so the first
// probe goes unanswered; the second goes back to the oldest unanswered PSN.
TEST_F(TailProbeTest, SecondProbeGoesBackWhenTheNakIsLost) {
  fill_a(0, 1000);
  link_->set_script([](const PacketInfo& p) {
    if (p.direction == Direction::kRequest) return p.seq == 1 ? Fate::kLose : Fate::kDeliver;
    return p.seq == 0 ? Fate::kLose : Fate::kDeliver;  // the NAK
  });
  post(IBV_WR_RDMA_WRITE, 0, 1000, 100);
  EXPECT_LT(run_ms(), 60.0);  // the ACK timer is 67 ms
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(same(mem_b_, 100, mem_a_, 0, 1000));
  EXPECT_EQ(counters_a().tail_probes.load(), 2u);
  EXPECT_EQ(counters_a().ack_timeouts.load(), 0u);
  EXPECT_EQ(side_.completer.retries_left, 7u);
}

// A dead peer: probes are bounded (two per ACK timeout) and spend no retry,
// so the WQE still fails after exactly retry_cnt timeouts (IBA C9-140).
TEST_F(TailProbeTest, DeadPeerStillEndsInRetryExceededAfterRetryCntTimeouts) {
  // 33.5 ms: the probes, at 1 and 3 ms, come first even when the test's
  // sleeps overshoot by milliseconds (the link waits on the real clock).
  side_.conn.timeout = 13;
  side_.conn.retry_cnt = 2;
  side_.completer.retries_left = 2;
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest ? Fate::kLose : Fate::kDeliver;
  });
  fill_a(0, 1000);
  post(IBV_WR_RDMA_WRITE, 0, 1000, 0);  // 4 packets: a burst worth probing
  link_->run(256);
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(counters_a().ack_timeouts.load(), 3u);
  EXPECT_EQ(counters_a().retry_exceeded.load(), 1u);
  EXPECT_GE(counters_a().tail_probes.load(), 3u);
  EXPECT_LE(counters_a().tail_probes.load(), 6u);
  // Three tries of 4 packets, and the probes (the last packet, or all 4).
  EXPECT_GE(link_->sent(Direction::kRequest).size(), 12u + counters_a().tail_probes.load());
}

// A message of fewer packets than a burst keeps the ACK timer alone: a probe
// armed for each would wake the service thread once per message.
TEST_F(TailProbeTest, SmallMessageIsLeftToTheAckTimer) {
  side_.conn.timeout = 9;  // 2.1 ms
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest && p.seq == 0 ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 64, 0);
  link_->run();
  ASSERT_EQ(completions().size(), 1u);
  EXPECT_EQ(counters_a().tail_probes.load(), 0u);
  EXPECT_EQ(counters_a().ack_timeouts.load(), 1u);
}

// The host link measures no round trip: its QPs never probe, however long
// the timer.
TEST_F(ProtocolTest, NoProbeWithoutAMeasuredRoundTrip) {
  side_.conn.timeout = 9;
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kRequest && p.seq == 0 ? Fate::kLose : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 64, 0);
  link_->run();
  ASSERT_EQ(completions().size(), 1u);
  EXPECT_EQ(counters_a().tail_probes.load(), 0u);
  EXPECT_EQ(counters_a().ack_timeouts.load(), 1u);
}

// IBA 7.6.6: an SL the port maps to VL15 is discarded before it leaves
// (PortXmitDiscards); the requester sees only lost requests and ends in
// RETRY_EXC_ERR. Once an SM maps the SL to a data VL, the QP's next
// connection sends: the table is read again when its generation moves.
TEST_F(ProtocolTest, SlMappedToVl15IsDiscardedUntilTheTableChanges) {
  side_.conn.ah.sl = 15;
  side_.conn.retry_cnt = 2;
  side_.completer.retries_left = 2;
  shm::QosTables t = shm::default_qos();
  t.sl_to_vl[15] = shm::kVl15;
  shm::store_qos(seg_->header(), t);
  post(IBV_WR_RDMA_WRITE, 0, 64, 0);
  link_->run();
  std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 0u);
  EXPECT_EQ(notifier_.port_counters().sl_vl15_discards.load(), 3u);  // the first try and two retries

  // Another SL on the same port is untouched by the mapping.
  EXPECT_EQ(shm::vl_of_sl(seg_->header(), 14), 6);
  t.sl_to_vl[15] = 7;
  shm::store_qos(seg_->header(), t);
  EXPECT_EQ(transport::path_vl(side_), 7);
}

// IBA 9.6.1.1: the requester checks a response's P_Key as a responder
// checks a request's. An SM moves A to another partition while B's ACK is
// on the wire: the ACK, carrying the old key, is dropped and counted, and
// the requests A then resends carry the new key, which B drops in turn.
TEST_F(ProtocolTest, ResponseWithAnotherPartitionsPKeyIsDropped) {
  side_.conn.retry_cnt = 1;
  side_.completer.retries_left = 1;
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse ? Fate::kDelay : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 64, 0);
  link_->pump();
  ASSERT_EQ(link_->sent(Direction::kResponse).size(), 1u);
  {
    shm::ControlLock lock(*seg_);
    shm::set_qp_pkey(seg_->qp(kA), 1, 0x8001);
  }
  link_->set_script(nullptr);
  link_->release_delayed();
  link_->pump();
  EXPECT_EQ(shm::pkey_violations(seg_->header()), 1u) << "the ACK with the old key";
  EXPECT_TRUE(completions().empty());
  link_->run();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(shm::pkey_violations(seg_->header()), 2u) << "the resend, dropped by B";
}

// A delayed ACK that finally arrives after the resend is a stale answer.
TEST_F(ProtocolTest, LateAckAfterTimeoutIsHarmless) {
  fill_a(0, 64);
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse && p.seq == 0 ? Fate::kDelay : Fate::kDeliver;
  });
  post(IBV_WR_RDMA_WRITE, 0, 64, 0);
  link_->run();
  link_->release_delayed();
  link_->pump();
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(side_.sq.done, side_.sq.posted);
}

// At most max_rd_atomic READs and atomics are outstanding (IBA 9.5).
TEST_F(ProtocolTest, ReadsInFlightAreBoundedByMaxRdAtomic) {
  side_.conn.max_rd_atomic = 2;
  link_->set_script([](const PacketInfo& p) {
    return p.direction == Direction::kResponse ? Fate::kDelay : Fate::kDeliver;
  });
  for (int i = 0; i < 4; ++i) post(IBV_WR_RDMA_READ, 64 * i, 64, 0);
  link_->pump();
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 2u);
  link_->set_script(nullptr);
  link_->release_delayed();
  link_->run();
  EXPECT_EQ(link_->sent(Direction::kRequest).size(), 4u);
  const std::vector<shm::Cqe> c = completions();
  ASSERT_EQ(c.size(), 4u);
  for (const shm::Cqe& e : c) EXPECT_EQ(e.status, IBV_WC_SUCCESS);
}

}  // namespace
}  // namespace softverbs

namespace softverbs {
namespace {

// A READ of several path MTUs is one request, answered by FIRST, MIDDLE…,
// LAST responses (IBA 9.7.1, 9.7.5.1.3).
TEST_F(ProtocolTest, MultiPacketReadIsOneRequest) {
  for (size_t i = 0; i < 1000; ++i) mem_b_[100 + i] = static_cast<uint8_t>(i ^ 0x5a);
  post(IBV_WR_RDMA_READ, 0, 1000, 100);
  link_->run();
  ASSERT_EQ(completions().size(), 1u);
  EXPECT_TRUE(same(mem_a_, 0, mem_b_, 100, 1000));
  ASSERT_EQ(link_->sent(Direction::kRequest).size(), 1u);
  const auto& responses = link_->sent(Direction::kResponse);
  ASSERT_EQ(responses.size(), 4u);
  EXPECT_EQ(responses[0][0], static_cast<uint8_t>(Opcode::kRcRdmaReadResponseFirst));
  EXPECT_EQ(responses[2][0], static_cast<uint8_t>(Opcode::kRcRdmaReadResponseMiddle));
  EXPECT_EQ(responses[3][0], static_cast<uint8_t>(Opcode::kRcRdmaReadResponseLast));
}

}  // namespace
}  // namespace softverbs

namespace softverbs {
namespace {

// Regression: a WRITE_WITH_IMM of several packets completes its receive WQE
// with the whole message's length, which only the FIRST packet's RETH names
// (IBA 9.4.3); the LAST packet, which completes it, carries none.
TEST_F(ProtocolTest, MultiPacketWriteWithImmCompletesWithItsLength) {
  fill_a(0, 1000);
  post_recv_b(0, 0);
  post(IBV_WR_RDMA_WRITE_WITH_IMM, 0, 1000, 200);
  link_->run();
  ASSERT_EQ(completions().size(), 1u);
  shm::Cqe cqe;
  ASSERT_TRUE(shm::cq_pop(*seg_, seg_->cq(kCqB), &cqe));
  EXPECT_EQ(cqe.status, IBV_WC_SUCCESS);
  EXPECT_EQ(cqe.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(cqe.byte_len, 1000u);
  EXPECT_TRUE(same(mem_b_, 200, mem_a_, 0, 1000));
}

}  // namespace
}  // namespace softverbs
