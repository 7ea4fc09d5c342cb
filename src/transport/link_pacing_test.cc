#include "transport/link_pacing.h"

#include <gtest/gtest.h>

#include <memory>

#include "shm/port_link.h"
#include "shm/port_qos.h"
#include "transport/send_side.h"
#include "util/time.h"

namespace softverbs::transport {
namespace {

// A paced 4X SDR port: 8000 Mb/s of data, so 1 MB takes 1 ms.
std::unique_ptr<shm::SegmentHeader> paced_port(const shm::QosTables& t = shm::default_qos()) {
  auto h = std::make_unique<shm::SegmentHeader>();
  shm::store_qos(*h, t);
  shm::claim_link(*h, shm::LinkConfig{2, 1, true});
  return h;
}

constexpr uint64_t kMs = 1'000'000;

TEST(LinkPacing, BytesTakeTheLinksTime) {
  auto h = paced_port();
  const uint64_t t0 = now_ns();
  ASSERT_TRUE(take_turn(*h, 0, 1'000'000, 245, 4096));
  ASSERT_TRUE(take_turn(*h, 0, 1'000'000, 245, 4096));
  const uint64_t took = now_ns() - t0;
  EXPECT_GE(took, 2 * kMs - 50'000);  // back to back: the second waits for the first
  EXPECT_LT(took, 1000 * kMs);
  EXPECT_EQ(h->link.lane[0].xmit_words.load(), 500'000u);
  EXPECT_EQ(h->link.lane[0].xmit_packets.load(), 490u);
}

TEST(LinkPacing, BusyVlsShareByWeight) {
  shm::QosTables t = shm::default_qos();
  for (auto& e : t.low) e = {};
  t.low[0] = {0, 1};
  t.low[1] = {2, 3};
  auto h = paced_port(t);
  // VL2 is sending: its lane is reserved ahead.
  h->link.lane[2].free_at_ns.store(now_ns() + 100 * kMs);
  const uint64_t t0 = now_ns();
  ASSERT_TRUE(take_turn(*h, 0, 250'000, 62, 4096));  // 0.25 ms alone; VL0 has a quarter of the link
  const uint64_t reserved = h->link.lane[0].free_at_ns.load() - t0;
  EXPECT_GE(reserved, kMs - 50'000);
  EXPECT_LT(reserved, 2 * kMs);
  // VL0 sent for 1 ms what takes 0.25 ms alone: it waited 0.75 ms for VL2.
  const uint64_t waited = h->link.lane[0].xmit_wait_ns.load();
  EXPECT_GE(waited, 750'000u);
  EXPECT_LT(waited, 750'000u + 50 * kMs);
  EXPECT_EQ(h->link.lane[2].xmit_wait_ns.load(), 0u);
}

TEST(LinkPacing, AVlAloneNeverWaits) {
  auto h = paced_port();
  ASSERT_TRUE(take_turn(*h, 3, 100'000, 25, 4096));
  EXPECT_LT(h->link.lane[3].xmit_wait_ns.load(), 5 * kMs);  // no more than a preemption between two clock reads
}

TEST(LinkPacing, ALaneLeftByADeadProcessFreesItself) {
  auto h = paced_port();
  // A process reserved VL0 for the next 20 ms, then died: its turn is only a
  // time, so the next sender goes once it has passed.
  const uint64_t t0 = now_ns();
  h->link.lane[0].free_at_ns.store(t0 + 20 * kMs);
  ASSERT_TRUE(take_turn(*h, 0, 64, 1, 4096));
  const uint64_t took = now_ns() - t0;
  EXPECT_GE(took, 20 * kMs);
  EXPECT_LT(took, 1000 * kMs);
}

// PortVLXmitWait counts the time other VLs had the link, not the time a
// request waited for its own VL's previous stretch (qos_vl15.sh `rtt`).
TEST(LinkPacing, WaitingBehindTheVlsOwnDataIsNoXmitWait) {
  auto h = paced_port();
  h->link.lane[0].free_at_ns.store(now_ns() + 20 * kMs);
  ASSERT_TRUE(take_turn(*h, 0, 64, 1, 4096));
  EXPECT_LT(h->link.lane[0].xmit_wait_ns.load(), 5 * kMs);
}

TEST(LinkPacing, AVlWithoutWeightIsDiscarded) {
  auto h = paced_port();  // VL0-7 in the low list
  const uint64_t t0 = now_ns();
  EXPECT_FALSE(take_turn(*h, 9, 64, 1, 4096));
  EXPECT_FALSE(take_turn(*h, shm::kVl15, 64, 1, 4096));
  EXPECT_LT(now_ns() - t0, 100 * kMs);  // at once, not after a lifetime
}

TEST(LinkPacing, StarvedLowPriorityIsDiscardedAfterItsLifetime) {
  shm::QosTables t = shm::default_qos();
  for (auto& e : t.low) e = {};
  t.low[0] = {0, 1};
  t.high[0] = {1, 1};
  t.vl_high_limit = 255;  // high priority unlimited
  auto h = paced_port(t);
  h->link.lane[1].free_at_ns.store(now_ns() + 10'000 * kMs);  // VL1 busy for long
  const uint64_t t0 = now_ns();
  EXPECT_FALSE(take_turn(*h, 0, 64, 1, 4096));
  const uint64_t took = now_ns() - t0;
  EXPECT_GE(took, kHeadOfQueueLifeNs);
  EXPECT_LT(took, kHeadOfQueueLifeNs + 2000 * kMs);
  EXPECT_GE(h->link.lane[0].xmit_wait_ns.load(), kHeadOfQueueLifeNs);  // all of it waiting
}

// The answers a request's turn reserves with it: a READ's data comes back
// over the link in READ RESPONSE packets, an RC WRITE is acknowledged once,
// UC answers nothing.
TEST(LinkPacing, ResponsesTakeTheLinksTimeToo) {
  auto s = std::make_unique<SendSide>();
  s->qp.qp_type = IBV_QPT_RC;
  s->conn.mtu = 4096;
  SendWqe w{};
  w.opcode = IBV_WR_RDMA_READ;
  w.length = 10000;  // 4096 + 4096 + 1808
  w.packets = 3;
  w.psn = 100;
  const WrOpcodeInfo& read = *wr_opcode(IBV_WR_RDMA_READ);
  uint32_t packets = 0;
  // Data, and per packet LRH, BTH, ICRC, VCRC; an AETH on the FIRST and the LAST.
  EXPECT_EQ(response_wire_bytes(*s, w, read, 100, &packets), 10000u + 3 * 26 + 8);
  EXPECT_EQ(packets, 3u);
  // Resumed after the first response: the rest only.
  EXPECT_EQ(response_wire_bytes(*s, w, read, 101, &packets), 10000u - 4096 + 2 * 26 + 8);
  EXPECT_EQ(packets, 2u);
  // The READ request itself is small: a RETH and no data.
  EXPECT_EQ(request_wire_bytes(*s, w, read, 100, &packets), 26u + 16);
  w.opcode = IBV_WR_RDMA_WRITE;
  w.packets = 3;
  const WrOpcodeInfo& write = *wr_opcode(IBV_WR_RDMA_WRITE);
  EXPECT_EQ(response_wire_bytes(*s, w, write, 100, &packets), 26u + 4);  // one ACKNOWLEDGE
  EXPECT_EQ(packets, 1u);
  s->qp.qp_type = IBV_QPT_UC;
  EXPECT_EQ(response_wire_bytes(*s, w, write, 100, &packets), 0u);
  EXPECT_EQ(packets, 0u);
}

}  // namespace
}  // namespace softverbs::transport
