#include "mad/rmpp.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

namespace softverbs::mad {
namespace {

// An SA GetTableResp of `records` NodeRecords (108 bytes, 112 with padding)
// as opensm hands it to umad_send: the SA header, then the records.
std::vector<uint8_t> node_records(size_t records, bool active) {
  std::vector<uint8_t> m(std::max<size_t>(56 + records * 112, kMadBytes));
  m[0] = 1;
  m[1] = 0x03;
  m[2] = 2;
  m[3] = 0x92;
  m[24] = 0x55;  // whatever the program left in the RMPP header
  m[26] = active ? kRmppFlagActive : 0;
  return m;
}

TEST(Rmpp, AMultiSegmentMessageArrivesWholeWithTheFirstSegmentsHeader) {
  auto m = node_records(6, true);  // 56 + 672 bytes: 4 segments of 200
  const RmppSend s = prepare_send(m.data(), 56 + 6 * 112, 1);
  ASSERT_EQ(s.error, 0);
  EXPECT_TRUE(s.active);
  EXPECT_EQ(s.length, 56u + 672);
  // Golden bytes: version 1, Data, Active|First, status 0, segment 1,
  // PayloadLength 4 x 220 - 128 of padding in the last segment.
  const uint8_t want[12] = {1, 1, 0x03, 0, 0, 0, 0, 1, 0, 0, 0x02, 0xf0};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(m[24 + i], want[i]) << i;
  EXPECT_EQ(received_length(s, true), 56u + 672);   // one umad_recv, all of it
  EXPECT_EQ(received_length(s, false), 0u);         // no RMPP: cannot take it
}

TEST(Rmpp, ASingleSegmentIsFirstAndLast) {
  auto m = node_records(1, true);
  const RmppSend s = prepare_send(m.data(), kMadBytes, 1);
  ASSERT_EQ(s.error, 0);
  EXPECT_EQ(RmppFlags::get(m.data()), kRmppFlagActive | kRmppFlagFirst | kRmppFlagLast);
  EXPECT_EQ(RmppPayloadLength::get(m.data()), 220u);
  EXPECT_EQ(received_length(s, true), kMadBytes);
  EXPECT_EQ(received_length(s, false), kMadBytes);
}

TEST(Rmpp, WithoutTheActiveFlagAMessageIsOneMad) {
  auto m = node_records(6, false);
  EXPECT_EQ(prepare_send(m.data(), 56 + 672, 1).error, EINVAL);
  const RmppSend s = prepare_send(m.data(), kMadBytes, 1);
  ASSERT_EQ(s.error, 0);
  EXPECT_FALSE(s.active);
  EXPECT_EQ(m[24], 0);  // the kernel does not copy an RMPP agent's RMPP header
  EXPECT_EQ(s.length, kMadBytes);
}

TEST(Rmpp, AnAgentWithoutRmppSendsOneMadAtMost) {
  auto m = node_records(6, true);
  EXPECT_EQ(prepare_send(m.data(), 56 + 672, 0).error, EINVAL);
  const RmppSend s = prepare_send(m.data(), 100, 0);  // shorter: padded to one MAD
  ASSERT_EQ(s.error, 0);
  EXPECT_FALSE(s.active);
  EXPECT_EQ(m[24], 0x55);  // untouched
  EXPECT_EQ(s.length, kMadBytes);
  EXPECT_EQ(prepare_send(m.data(), 20, 0).error, EINVAL);  // not even a MAD header
}

TEST(Rmpp, ClassHeaders) {
  EXPECT_TRUE(rmpp_class(0x03));
  EXPECT_TRUE(rmpp_class(0x30));
  EXPECT_FALSE(rmpp_class(0x04));
  EXPECT_FALSE(rmpp_class(0x09));
  EXPECT_EQ(class_header_bytes(0x03), 56u);
  EXPECT_EQ(class_header_bytes(0x4f), 40u);
  EXPECT_EQ(class_header_bytes(0x06), 64u);
  EXPECT_EQ(class_header_bytes(0x04), 24u);
}

}  // namespace
}  // namespace softverbs::mad
