#include "wire/aeth.h"

#include <gtest/gtest.h>

#include <array>

namespace softverbs::wire {
namespace {

TEST(Aeth, SyndromeEncodings) {
  // IBA 9.3.5: 000ccccc ACK, 001ttttt RNR NAK, 011nnnnn NAK.
  EXPECT_EQ(Aeth::ack(0x1f, 0).syndrome, 0x1f);
  EXPECT_EQ(Aeth::rnr_nak(14, 0).syndrome, 0x20 | 14);
  EXPECT_EQ(Aeth::nak(NakCode::kPsnSequenceError, 0).syndrome, 0x60);
  EXPECT_EQ(Aeth::nak(NakCode::kInvalidRequest, 0).syndrome, 0x61);
  EXPECT_EQ(Aeth::nak(NakCode::kRemoteAccessError, 0).syndrome, 0x62);
  EXPECT_EQ(Aeth::nak(NakCode::kRemoteOperationalError, 0).syndrome, 0x63);
  EXPECT_EQ(Aeth::nak(NakCode::kInvalidRdRequest, 0).syndrome, 0x64);
}

TEST(Aeth, ParseBack) {
  const Aeth a = Aeth::ack(7, 0x123456);
  EXPECT_EQ(a.type(), AethType::kAck);
  EXPECT_EQ(a.credit_code(), 7);
  const Aeth r = Aeth::rnr_nak(31, 1);
  EXPECT_EQ(r.type(), AethType::kRnrNak);
  EXPECT_EQ(r.rnr_timer(), 31);
  const Aeth n = Aeth::nak(NakCode::kRemoteAccessError, 2);
  EXPECT_EQ(n.type(), AethType::kNak);
  EXPECT_EQ(n.nak_code(), NakCode::kRemoteAccessError);
  EXPECT_EQ((Aeth{0x40, 0}.type()), AethType::kReserved);
  EXPECT_EQ((Aeth{0x80, 0}.type()), AethType::kReserved);  // bit 7 reserved
  EXPECT_EQ((Aeth{0xe0, 0}.type()), AethType::kReserved);
}

TEST(Aeth, WireRoundTrip) {
  const Aeth a = Aeth::nak(NakCode::kInvalidRequest, 0xfedcba);
  std::array<uint8_t, Aeth::kBytes> b{};
  a.encode(b.data());
  EXPECT_EQ(b, (std::array<uint8_t, 4>{0x61, 0xfe, 0xdc, 0xba}));
  EXPECT_EQ(Aeth::decode(b.data()), a);
  EXPECT_EQ(Aeth::ack(0, 0x1000000).msn, 0u);  // MSN is 24 bits
}

TEST(Aeth, CreditTable) {
  const uint32_t want[31] = {0,   1,   2,   3,    4,    6,    8,    12,   16,    24,    32,
                             48,  64,  96,  128,  192,  256,  384,  512,  768,   1024,  1536,
                             2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};
  for (uint8_t c = 0; c < 31; ++c) EXPECT_EQ(credit_count(c), want[c]) << int(c);
  EXPECT_EQ(credit_code_for(0), 0);
  EXPECT_EQ(credit_code_for(5), 4);
  EXPECT_EQ(credit_code_for(6), 5);
  EXPECT_EQ(credit_code_for(100), 13);  // 96
  EXPECT_EQ(credit_code_for(1u << 30), 30);
}

TEST(Aeth, RnrTimer) {
  EXPECT_EQ(rnr_timer_us(0), 655360u);
  EXPECT_EQ(rnr_timer_us(1), 10u);
  EXPECT_EQ(rnr_timer_us(14), 1280u);
  EXPECT_EQ(rnr_timer_us(31), 491520u);
  for (uint8_t c = 2; c < 32; ++c) EXPECT_GT(rnr_timer_us(c), rnr_timer_us(c - 1));
}

}  // namespace
}  // namespace softverbs::wire
