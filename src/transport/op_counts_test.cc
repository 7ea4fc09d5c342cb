#include "transport/op_counts.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include "shm/op_select.h"

namespace softverbs::transport {
namespace {

MessageShape message(ReqKind kind, uint64_t bytes, uint32_t mtu = 1024, uint8_t qp_type = IBV_QPT_RC) {
  MessageShape m;
  m.qp_type = qp_type;
  m.kind = kind;
  m.bytes = bytes;
  m.mtu = mtu;
  m.packets = kind == ReqKind::kSend || kind == ReqKind::kWrite ? static_cast<uint32_t>((bytes + mtu - 1) / mtu) : 1;
  if (m.packets == 0) m.packets = 1;
  return m;
}

bool operator==(OpShare a, OpShare b) { return a.packets == b.packets && a.bytes == b.bytes; }

// A WRITE of 3.5 packets is FIRST, two MIDDLEs and a LAST on the wire.
TEST(OpCounts, MultiPacketWrite) {
  const MessageShape m = message(ReqKind::kWrite, 3584);
  EXPECT_EQ(m.packets, 4u);
  EXPECT_TRUE(op_share(m, 0x06) == (OpShare{1, 1024}));  // RC RDMA WRITE FIRST
  EXPECT_TRUE(op_share(m, 0x07) == (OpShare{2, 2048}));  // MIDDLE
  EXPECT_TRUE(op_share(m, 0x08) == (OpShare{1, 512}));   // LAST
  EXPECT_TRUE(op_share(m, 0x09) == OpShare{});           // LAST with immediate: it has none
  EXPECT_TRUE(op_share(m, 0x0a) == OpShare{});           // ONLY
  EXPECT_TRUE(op_share(m, 0x26) == OpShare{});           // UC's FIRST: another transport
  EXPECT_TRUE(op_share(m, 0x00) == OpShare{});           // SEND FIRST
}

TEST(OpCounts, OnlyPacketsAndImmediates) {
  EXPECT_TRUE(op_share(message(ReqKind::kWrite, 64), 0x0a) == (OpShare{1, 64}));
  EXPECT_TRUE(op_share(message(ReqKind::kWrite, 0), 0x0a) == (OpShare{1, 0}));  // zero bytes: one packet
  MessageShape imm = message(ReqKind::kSend, 2048);
  imm.imm = true;
  EXPECT_TRUE(op_share(imm, 0x00) == (OpShare{1, 1024}));  // SEND FIRST
  EXPECT_TRUE(op_share(imm, 0x02) == OpShare{});           // SEND LAST: this one has an immediate
  EXPECT_TRUE(op_share(imm, 0x03) == (OpShare{1, 1024}));  // SEND LAST with immediate
  MessageShape inv = message(ReqKind::kSend, 100);
  inv.inv = true;
  EXPECT_TRUE(op_share(inv, 0x17) == (OpShare{1, 100}));  // SEND ONLY with invalidate
  EXPECT_TRUE(op_share(inv, 0x04) == OpShare{});
  EXPECT_TRUE(op_share(message(ReqKind::kSend, 256, 4096, IBV_QPT_UD), 0x64) == (OpShare{1, 256}));
  EXPECT_TRUE(op_share(message(ReqKind::kSend, 256, 4096, IBV_QPT_UD), 0x04) == OpShare{});
  EXPECT_TRUE(op_share(message(ReqKind::kWrite, 64, 4096, IBV_QPT_XRC_SEND), 0xaa) == (OpShare{1, 64}));
}

// A READ request is one packet without payload, whatever it reads; the
// atomics are one packet each.
TEST(OpCounts, SinglePacketRequests) {
  EXPECT_TRUE(op_share(message(ReqKind::kRead, 65536), 0x0c) == (OpShare{1, 0}));
  EXPECT_TRUE(op_share(message(ReqKind::kRead, 65536), 0x10) == OpShare{});  // a response: not a request
  EXPECT_TRUE(op_share(message(ReqKind::kCmpSwap, 0), 0x13) == (OpShare{1, 0}));
  EXPECT_TRUE(op_share(message(ReqKind::kCmpSwap, 0), 0x14) == OpShare{});
  EXPECT_TRUE(op_share(message(ReqKind::kFetchAdd, 0), 0x14) == (OpShare{1, 0}));
  EXPECT_TRUE(op_share(message(ReqKind::kAtomicWrite, 8), 0x1d) == (OpShare{1, 8}));
  EXPECT_TRUE(op_share(message(ReqKind::kAtomicWrite, 8), 0x0a) == OpShare{});
  EXPECT_TRUE(op_share(message(ReqKind::kWrite, 8), 0x1d) == OpShare{});
  EXPECT_TRUE(op_share(message(ReqKind::kWrite, 8), 0xff) == OpShare{});  // undefined
}

// Each applied selector counts under its own counters.
TEST(OpCounts, CountsPerSelector) {
  shm::PortCounters c{};
  uint32_t select = shm::with_op(0, shm::OpSelector::kOpRcv, 0x07);
  select = shm::with_op(select, shm::OpSelector::kVlOpPackets, 0x06);
  select = shm::with_op(select, shm::OpSelector::kVlOpData, 0x07);
  count_selected_message(c, select, message(ReqKind::kWrite, 4096), 3, kIbPacketOverhead);
  EXPECT_EQ(c.op_rcv_packets.load(), 2u);                 // the two MIDDLEs
  EXPECT_EQ(c.op_rcv_words.load(), (2048u + 2 * 24) / 4);
  EXPECT_EQ(c.vl_op_packets_sl[3].load(), 1u);            // the FIRST
  EXPECT_EQ(c.vl_op_words_sl[3].load(), (2048u + 2 * 24) / 4);
  EXPECT_EQ(c.vl_op_packets_sl[0].load(), 0u);
  count_selected_packet(c, select, 0x06, 5, 100);
  EXPECT_EQ(c.vl_op_packets_sl[5].load(), 1u);
  EXPECT_EQ(c.op_rcv_packets.load(), 2u);
  EXPECT_EQ(c.vl_op_words_sl[5].load(), 0u);
}

}  // namespace
}  // namespace softverbs::transport
