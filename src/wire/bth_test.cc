#include "wire/bth.h"

#include <gtest/gtest.h>

#include <array>

namespace softverbs::wire {
namespace {

TEST(Bth, EncodesTheIbaLayout) {
  Bth b;
  b.opcode = Opcode::kRcRdmaWriteOnlyWithImmediate;
  b.solicited = true;
  b.mig_req = false;
  b.pad_count = 0;
  b.pkey = 0x8001;
  b.dest_qp = 0xabcdef;
  b.ack_req = true;
  b.psn = Psn(0xffffff);
  std::array<uint8_t, Bth::kBytes> out;
  out.fill(0xaa);
  b.encode(out.data());
  // Same bytes as the BTH of the kV4WriteOnlyImm golden vector (icrc_test.cc).
  const std::array<uint8_t, 12> want = {0x0b, 0x80, 0x80, 0x01, 0x00, 0xab,
                                        0xcd, 0xef, 0x80, 0xff, 0xff, 0xff};
  EXPECT_EQ(out, want);
}

TEST(Bth, EveryFieldRoundTrips) {
  Bth b;
  b.opcode = Opcode::kUdSendOnlyWithImmediate;
  b.solicited = true;
  b.mig_req = true;
  b.pad_count = 3;
  b.tver = 0xf;
  b.pkey = 0x7fff;
  b.fecn = true;
  b.becn = true;
  b.dest_qp = 0xffffff;
  b.ack_req = true;
  b.psn = Psn(0x123456);
  std::array<uint8_t, Bth::kBytes> out{};
  b.encode(out.data());
  EXPECT_EQ(out[1], 0xff);  // SE M PadCnt TVer all ones
  EXPECT_EQ(out[4], 0xc0);  // F B, resv6 zero
  EXPECT_EQ(out[8], 0x80);  // A, resv7 zero
  EXPECT_EQ(Bth::decode(out.data()), b);
  EXPECT_EQ(bth_opcode(out.data()), Opcode::kUdSendOnlyWithImmediate);
  EXPECT_EQ(bth_pad_count(out.data()), 3);
  EXPECT_EQ(bth_tver(out.data()), 0xf);
  EXPECT_EQ(bth_dest_qp(out.data()), 0xffffffu);
  EXPECT_EQ(bth_psn(out.data()), Psn(0x123456));
}

TEST(Bth, ReservedBitsAreIgnoredOnDecode) {
  std::array<uint8_t, Bth::kBytes> in{};
  in[4] = 0x3f;  // resv6
  in[8] = 0x7f;  // resv7
  const Bth b = Bth::decode(in.data());
  EXPECT_FALSE(b.fecn);
  EXPECT_FALSE(b.becn);
  EXPECT_FALSE(b.ack_req);
  std::array<uint8_t, Bth::kBytes> again;
  again.fill(0xff);
  b.encode(again.data());
  EXPECT_EQ(again[4], 0);
  EXPECT_EQ(again[8], 0);
}

TEST(Bth, EncodeTruncatesOversizedValues) {
  Bth b;
  b.pad_count = 7;        // 2 bits
  b.dest_qp = 0x1234567;  // 24 bits
  std::array<uint8_t, Bth::kBytes> out{};
  b.encode(out.data());
  const Bth d = Bth::decode(out.data());
  EXPECT_EQ(d.pad_count, 3);
  EXPECT_EQ(d.dest_qp, 0x234567u);
  EXPECT_EQ(d.opcode, Opcode::kRcSendOnly);
}

}  // namespace
}  // namespace softverbs::wire
