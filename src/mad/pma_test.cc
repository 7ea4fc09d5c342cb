#include "mad/pma.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "mad/mad_layout.h"
#include "shm/op_select.h"

namespace softverbs::mad {
namespace {

using Bytes = std::vector<uint8_t>;

std::array<uint8_t, kMadBytes> pma(uint8_t method, uint16_t attr, uint8_t port_select = 1, uint16_t select = 0) {
  std::array<uint8_t, kMadBytes> m{};
  m[0] = 1;
  m[1] = 0x04;
  m[2] = 1;
  m[3] = method;
  TransactionId::set(m.data(), 42);
  AttributeId::set(m.data(), attr);
  m[kGsiDataOffset + 1] = port_select;
  m[kGsiDataOffset + 2] = static_cast<uint8_t>(select >> 8);
  m[kGsiDataOffset + 3] = static_cast<uint8_t>(select);
  return m;
}

PmaCounters sample() {
  PmaCounters c;
  c.v[kSymbolErrors] = 3;
  c.v[kRcvErrors] = 0x12345;  // more than 16 bits: PortCounters stops at 0xffff
  c.v[kXmitDiscards] = 7;
  c.v[kXmitData] = 0x1'0000'0001ull;  // more than 32 bits
  c.v[kRcvData] = 0x01020304;
  c.v[kXmitPkts] = 100;
  c.v[kRcvPkts] = 200;
  c.v[kMcastXmitPkts] = 10;
  c.v[kMcastRcvPkts] = 20;
  c.v[kXmitDataSl0 + 0] = 0x0a0b0c0d;
  c.v[kXmitDataSl0 + 2] = 0x1'0000'0000ull;  // more than 32 bits: stops at 0xffffffff
  c.v[kXmitDataSl0 + 15] = 5;
  c.v[kRcvDataSl0 + 1] = 0x01020304;
  c.v[kVl15Dropped] = 0x0203;
  c.v[kXmitWaitVl0 + 0] = 0x0102;
  c.v[kXmitWaitVl0 + 2] = 0x12345;  // more than 16 bits: stops at 0xffff
  c.v[kXmitWaitVl0 + 15] = 9;
  c.v[kLocalPhysicalErrors] = 0x0102;
  c.v[kMalformedPktErrors] = 0x12345;  // more than 16 bits: stops at 0xffff
  c.v[kInactiveDiscards] = 0x0304;
  c.v[kRcvPktsVl0 + 0] = 0x0506;
  c.v[kRcvPktsVl0 + 3] = 0x12345;  // more than 16 bits: stops at 0xffff
  c.v[kRcvPktsVl0 + 15] = 2;
  c.v[kRcvDataVl0 + 1] = 0x0708090a;
  c.v[kRcvDataVl0 + 3] = 0x1'0000'0000ull;  // more than 32 bits: stops at 0xffffffff
  c.v[kOpRcvPkts] = 0x01020304;
  c.v[kOpRcvData] = 0x1'0000'0005ull;  // more than 32 bits
  return c;
}

Bytes data(const std::array<uint8_t, kMadBytes>& out, size_t n) {
  return Bytes(out.begin() + kGsiDataOffset, out.begin() + kGsiDataOffset + static_cast<long>(n));
}

struct Answer {
  Disposition d;
  PmaMask reset;
  std::array<uint8_t, kMadBytes> out{};
};

Answer ask(const std::array<uint8_t, kMadBytes>& in, const PmaCounters& c = sample()) {
  Answer a;
  a.d = answer_pma(c, in.data(), in.size(), a.out.data(), &a.reset);
  return a;
}

TEST(Pma, ClassPortInfoGolden) {
  const Answer a = ask(pma(0x01, 0x0001, 0));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(a.out[3], 0x81);
  EXPECT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(TransactionId::get(a.out.data()), 42u);
  EXPECT_EQ(data(a.out, 12), Bytes({0x01, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x10, 0, 0, 0, 0}));
}

TEST(Pma, PortCountersGolden) {
  const Answer a = ask(pma(0x01, 0x0012));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 44), Bytes({0x00, 0x01, 0x00, 0x00,              // PortSelect, CounterSelect
                                    0x00, 0x03, 0x00, 0x00,              // SymbolErrorCounter, link counters
                                    0xff, 0xff, 0, 0, 0, 0,              // PortRcvErrors (saturated)
                                    0x00, 0x07,                          // PortXmitDiscards
                                    0, 0, 0, 0, 0, 0,                    // constraint errors
                                    0x02, 0x03,                          // VL15Dropped
                                    0xff, 0xff, 0xff, 0xff,              // PortXmitData (saturated)
                                    0x01, 0x02, 0x03, 0x04,              // PortRcvData
                                    0x00, 0x00, 0x00, 0x64,              // PortXmitPkts
                                    0x00, 0x00, 0x00, 0xc8,              // PortRcvPkts
                                    0, 0, 0, 0}));                       // PortXmitWait
}

TEST(Pma, PortCountersExtendedGolden) {
  const Answer a = ask(pma(0x01, 0x001d, 0xff));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 72), Bytes({0x00, 0xff, 0x00, 0x00, 0, 0, 0, 0,
                                    0, 0, 0, 0x01, 0, 0, 0, 0x01,          // PortXmitData
                                    0, 0, 0, 0, 0x01, 0x02, 0x03, 0x04,    // PortRcvData
                                    0, 0, 0, 0, 0, 0, 0, 100,              // PortXmitPkts
                                    0, 0, 0, 0, 0, 0, 0, 200,              // PortRcvPkts
                                    0, 0, 0, 0, 0, 0, 0, 90,               // unicast
                                    0, 0, 0, 0, 0, 0, 0, 180,
                                    0, 0, 0, 0, 0, 0, 0, 10,               // multicast
                                    0, 0, 0, 0, 0, 0, 0, 20}));
}

TEST(Pma, SetResetsWhatCounterSelectNames) {
  // PortXmitData and PortRcvPkts (bits 12 and 15).
  Answer a = ask(pma(0x02, 0x0012, 1, (1u << 12) | (1u << 15)));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(a.reset, (1u << kXmitData) | (1u << kRcvPkts));
  EXPECT_EQ(data(a.out, 44)[27], 0x00);  // PortXmitData shown cleared
  EXPECT_EQ(data(a.out, 44)[31], 0x04);  // PortRcvData kept
  // VL15Dropped is bit 11 (IBA 16.1.3.5).
  a = ask(pma(0x02, 0x0012, 1, 1u << 11));
  EXPECT_EQ(a.reset, 1ull << kVl15Dropped);
  EXPECT_EQ(data(a.out, 44)[23], 0x00);
  a = ask(pma(0x02, 0x001d, 0xff, 0xff));
  EXPECT_EQ(a.reset, (1u << kXmitData) | (1u << kRcvData) | (1u << kXmitPkts) | (1u << kRcvPkts) |
                         (1u << kMcastXmitPkts) | (1u << kMcastRcvPkts));
  // A Get never resets.
  EXPECT_EQ(ask(pma(0x01, 0x0012, 1, 0xffff)).reset, 0u);
}

TEST(Pma, PortXmitDataSlGolden) {
  const Answer a = ask(pma(0x01, 0x0036));
  ASSERT_EQ(a.d, Disposition::kRespond);
  EXPECT_EQ(Status::get(a.out.data()), 0);
  Bytes want(68, 0);
  want[1] = 1;                                                   // PortSelect
  want[4] = 0x0a, want[5] = 0x0b, want[6] = 0x0c, want[7] = 0x0d;  // SL0
  want[12] = want[13] = want[14] = want[15] = 0xff;              // SL2, saturated
  want[67] = 5;                                                  // SL15
  EXPECT_EQ(data(a.out, 68), want);
}

TEST(Pma, PortRcvDataSlGoldenAndReset) {
  Answer a = ask(pma(0x01, 0x0037, 0xff));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  Bytes want(68, 0);
  want[1] = 0xff;
  want[8] = 1, want[9] = 2, want[10] = 3, want[11] = 4;  // SL1
  EXPECT_EQ(data(a.out, 68), want);
  // CounterSelect names SLs: SL1 and SL3 cleared.
  a = ask(pma(0x02, 0x0037, 1, (1u << 1) | (1u << 3)));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(a.reset, (1ull << (kRcvDataSl0 + 1)) | (1ull << (kRcvDataSl0 + 3)));
  EXPECT_EQ(data(a.out, 68)[11], 0);
  a = ask(pma(0x02, 0x0036, 1, 1u << 15));
  EXPECT_EQ(a.reset, 1ull << (kXmitDataSl0 + 15));
  EXPECT_EQ(ask(pma(0x01, 0x0036, 1, 0xffff)).reset, 0u);  // a Get never resets
  EXPECT_EQ(Status::get(ask(pma(0x01, 0x0036, 3)).out.data()), 0x001c);  // no port 3
}

TEST(Pma, PortVlXmitWaitCountersGoldenAndReset) {
  Answer a = ask(pma(0x01, 0x001c));
  ASSERT_EQ(a.d, Disposition::kRespond);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  Bytes want(36, 0);
  want[1] = 1;                  // PortSelect
  want[4] = 0x01, want[5] = 0x02;  // VL0
  want[8] = want[9] = 0xff;     // VL2, saturated
  want[35] = 9;                 // VL15
  EXPECT_EQ(data(a.out, 36), want);
  EXPECT_EQ(a.reset, 0u);
  // CounterSelect bit n: VL n.
  a = ask(pma(0x02, 0x001c, 0xff, (1u << 0) | (1u << 15)));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(a.reset, (1ull << kXmitWaitVl0) | (1ull << (kXmitWaitVl0 + 15)));
  EXPECT_EQ(data(a.out, 36)[5], 0);
  EXPECT_EQ(data(a.out, 36)[9], 0xff);  // VL2 kept
  EXPECT_EQ(Status::get(ask(pma(0x01, 0x001c, 2)).out.data()), 0x001c);  // no port 2
}

TEST(Pma, PortRcvErrorDetailsGoldenAndReset) {
  Answer a = ask(pma(0x01, 0x0015));
  ASSERT_EQ(a.d, Disposition::kRespond);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 16), Bytes({0x00, 0x01, 0x00, 0x00,  // PortSelect, CounterSelect
                                    0x01, 0x02,              // PortLocalPhysicalErrors
                                    0xff, 0xff,              // PortMalformedPacketErrors (saturated)
                                    0, 0, 0, 0, 0, 0, 0, 0}));  // overrun, DLID/VL mapping, looping
  EXPECT_EQ(a.reset, 0u);
  // CounterSelect bit 0: LocalPhysicalErrors; bits of fields kept at 0 clear nothing.
  a = ask(pma(0x02, 0x0015, 1, 0x003d));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(a.reset, 1ull << kLocalPhysicalErrors);
  EXPECT_EQ(data(a.out, 8), Bytes({0x00, 0x01, 0x00, 0x3d, 0, 0, 0xff, 0xff}));
  a = ask(pma(0x02, 0x0015, 0xff, 0xffff));
  EXPECT_EQ(a.reset, (1ull << kLocalPhysicalErrors) | (1ull << kMalformedPktErrors));
  EXPECT_EQ(ask(pma(0x01, 0x0015, 1, 0xffff)).reset, 0u);  // a Get never resets
  EXPECT_EQ(Status::get(ask(pma(0x01, 0x0015, 2)).out.data()), 0x001c);  // no port 2
}

TEST(Pma, PortXmitDiscardDetailsGoldenAndReset) {
  Answer a = ask(pma(0x01, 0x0016, 0xff));
  ASSERT_EQ(a.d, Disposition::kRespond);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 12), Bytes({0x00, 0xff, 0x00, 0x00,  // PortSelect, CounterSelect
                                    0x03, 0x04,              // PortInactiveDiscards
                                    0, 0, 0, 0, 0, 0}));     // NeighborMTU, SwLifetime, SwHOQLifetime
  a = ask(pma(0x02, 0x0016, 1, 0x0001));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(a.reset, 1ull << kInactiveDiscards);
  EXPECT_EQ(data(a.out, 6), Bytes({0x00, 0x01, 0x00, 0x01, 0, 0}));
  EXPECT_EQ(ask(pma(0x02, 0x0016, 1, 0x000e)).reset, 0u);  // only fields kept at 0
  // PortCounters' Set of PortRcvErrors/PortXmitDiscards leaves the details.
  EXPECT_EQ(ask(pma(0x02, 0x0012, 1, 0xffff)).reset &
                PmaMask((1ull << kLocalPhysicalErrors) | (1ull << kMalformedPktErrors) | (1ull << kInactiveDiscards)),
            0u);
}

// PortVLOpPackets (0x19): OpCode, PortSelect, CounterSelect, sixteen 16-bit counts.
TEST(Pma, PortVlOpPacketsGoldenAndReset) {
  auto in = pma(0x01, 0x0019);
  in[kGsiDataOffset] = 0x04;  // OpCode: echoed
  Answer a = ask(in);
  ASSERT_EQ(a.d, Disposition::kRespond);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  Bytes want(36, 0);
  want[0] = 0x04;                  // OpCode
  want[1] = 1;                     // PortSelect
  want[4] = 0x05, want[5] = 0x06;  // VL0
  want[10] = want[11] = 0xff;      // VL3, saturated
  want[35] = 2;                    // VL15
  EXPECT_EQ(data(a.out, 36), want);
  EXPECT_EQ(a.reset, 0u);
  a = ask(pma(0x02, 0x0019, 1, (1u << 3) | (1u << 15)));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(a.reset, PmaMask().set(kRcvPktsVl0 + 3).set(kRcvPktsVl0 + 15));
  EXPECT_EQ(data(a.out, 36)[11], 0);
  EXPECT_EQ(data(a.out, 36)[5], 0x06);  // VL0 kept
}

// PortVLOpData (0x1A): sixteen 32-bit counts of 4-octet words.
TEST(Pma, PortVlOpDataGoldenAndReset) {
  Answer a = ask(pma(0x01, 0x001a, 0xff));
  ASSERT_EQ(Status::get(a.out.data()), 0);
  Bytes want(68, 0);
  want[1] = 0xff;
  want[8] = 0x07, want[9] = 0x08, want[10] = 0x09, want[11] = 0x0a;  // VL1
  want[16] = want[17] = want[18] = want[19] = 0xff;                  // VL3, saturated
  EXPECT_EQ(data(a.out, 68), want);
  a = ask(pma(0x02, 0x001a, 1, 1u << 1));
  EXPECT_EQ(a.reset, PmaMask().set(kRcvDataVl0 + 1));
  EXPECT_EQ(data(a.out, 68)[11], 0);
  // A reset of the per-VL packets leaves the data, and the reverse.
  EXPECT_EQ(ask(pma(0x02, 0x0019, 1, 0xffff)).reset & PmaMask().set(kRcvDataVl0 + 1), 0u);
}

// PortOpRcvCounters (0x17): OpCode, PortSelect, CounterSelect, PortOpRcvPkts,
// PortOpRcvData (32 bits each).
TEST(Pma, PortOpRcvCountersGoldenAndReset) {
  auto in = pma(0x01, 0x0017);
  in[kGsiDataOffset] = 0x0a;  // RC RDMA WRITE Only: echoed, every opcode counted
  Answer a = ask(in);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(data(a.out, 16), Bytes({0x0a, 0x01, 0x00, 0x00,   // OpCode, PortSelect, CounterSelect
                                    0x01, 0x02, 0x03, 0x04,   // PortOpRcvPkts
                                    0xff, 0xff, 0xff, 0xff,   // PortOpRcvData, saturated
                                    0, 0, 0, 0}));
  EXPECT_EQ(a.reset, 0u);
  a = ask(pma(0x02, 0x0017, 1, 0x0002));
  EXPECT_EQ(a.reset, PmaMask().set(kOpRcvData));
  EXPECT_EQ(data(a.out, 12), Bytes({0, 0x01, 0x00, 0x02, 0x01, 0x02, 0x03, 0x04, 0, 0, 0, 0}));
  // Its own counters: PortCounters' PortRcvPkts/PortRcvData are not touched.
  a = ask(pma(0x02, 0x0017, 1, 0xffff));
  EXPECT_EQ(a.reset, PmaMask().set(kOpRcvPkts).set(kOpRcvData));
  EXPECT_EQ(ask(pma(0x02, 0x0012, 1, 0xffff)).reset & a.reset, 0u);
}

Answer ask_selected(const std::array<uint8_t, kMadBytes>& in, uint32_t* select, const PmaCounters& c = sample()) {
  Answer a;
  a.d = answer_pma(c, in.data(), in.size(), a.out.data(), &a.reset, select);
  return a;
}

// IBA 16.1.4: a Set's OpCode is the opcode PortOpRcvCounters counts from
// then on; a new one restarts both counters whatever CounterSelect says.
TEST(Pma, PortOpRcvCountersSetSelectsOpCode) {
  uint32_t select = 0;
  auto in = pma(0x02, 0x0017, 1, 0x0000);
  in[kGsiDataOffset] = 0x0a;  // RC RDMA WRITE ONLY
  Answer a = ask_selected(in, &select);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(select, 0x0100'000au);
  EXPECT_TRUE(shm::op_matches(select, shm::OpSelector::kOpRcv, 0x0a));
  EXPECT_FALSE(shm::op_applied(select, shm::OpSelector::kVlOpPackets));
  EXPECT_EQ(a.reset, PmaMask().set(kOpRcvPkts).set(kOpRcvData));
  EXPECT_EQ(data(a.out, 12), Bytes({0x0a, 0x01, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}));
  // A Get names the opcode counted, whatever it asks for.
  in = pma(0x01, 0x0017);
  in[kGsiDataOffset] = 0x04;
  a = ask_selected(in, &select);
  EXPECT_EQ(data(a.out, 12), Bytes({0x0a, 0x01, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(a.reset, 0u);
  EXPECT_EQ(select, 0x0100'000au);
  // The same opcode again restarts only what CounterSelect names.
  in = pma(0x02, 0x0017, 1, 0x0001);
  in[kGsiDataOffset] = 0x0a;
  a = ask_selected(in, &select);
  EXPECT_EQ(a.reset, PmaMask().set(kOpRcvPkts));
  EXPECT_EQ(data(a.out, 12), Bytes({0x0a, 0x01, 0x00, 0x01, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}));
  // perfquery -R sends OpCode 0: RC SEND FIRST from then on.
  a = ask_selected(pma(0x02, 0x0017, 1, 0xffff), &select);
  EXPECT_EQ(select, 0x0100'0000u);
  EXPECT_EQ(data(a.out, 1)[0], 0x00);
}

TEST(Pma, VlOpSelectorsAreTheirOwn) {
  uint32_t select = 0x0100'000au;  // PortOpRcvCounters: RC RDMA WRITE ONLY
  auto in = pma(0x02, 0x0019, 1, 0x0000);
  in[kGsiDataOffset] = 0x04;  // RC SEND ONLY
  Answer a = ask_selected(in, &select);
  ASSERT_EQ(Status::get(a.out.data()), 0);
  EXPECT_EQ(select, 0x0300'040au);
  PmaMask all_vls;
  for (unsigned vl = 0; vl < 16; ++vl) all_vls.set(kRcvPktsVl0 + vl);
  EXPECT_EQ(a.reset, all_vls);  // a new opcode: every VL restarts
  Bytes want(36, 0);
  want[0] = 0x04, want[1] = 1;
  EXPECT_EQ(data(a.out, 36), want);
  in = pma(0x02, 0x001a, 1, 0x0000);
  in[kGsiDataOffset] = 0x64;  // UD SEND ONLY
  a = ask_selected(in, &select);
  EXPECT_EQ(select, 0x0764'040au);
  EXPECT_EQ(shm::op_code(select, shm::OpSelector::kVlOpData), 0x64);
  // A Get of PortVLOpData names its own opcode; the counts are the caller's.
  a = ask_selected(pma(0x01, 0x001a, 1), &select);
  EXPECT_EQ(data(a.out, 12), Bytes({0x64, 0x01, 0x00, 0x00, 0, 0, 0, 0, 0x07, 0x08, 0x09, 0x0a}));
}

// A Set that fails (a port the node lacks) selects nothing.
TEST(Pma, FailedSetSelectsNothing) {
  uint32_t select = 0;
  auto in = pma(0x02, 0x0017, 2, 0xffff);
  in[kGsiDataOffset] = 0x0a;
  const Answer a = ask_selected(in, &select);
  EXPECT_EQ(Status::get(a.out.data()), 0x1c);
  EXPECT_EQ(select, 0u);
}

// PortFlowCtlCounters (0x18) and PortVLXmitFlowCtlUpdateErrors (0x1B):
// no link-level flow control here, so they answer 0 and a Set clears nothing.
TEST(Pma, FlowControlCountersAnswerZero) {
  PmaCounters busy = sample();
  for (auto& v : busy.v) v = 0xffff'ffff'ffffull;
  for (uint16_t attr : {0x0018, 0x001b}) {
    Answer a = ask(pma(0x01, attr, 1, 0x0003), busy);
    ASSERT_EQ(a.d, Disposition::kRespond);
    ASSERT_EQ(Status::get(a.out.data()), 0) << attr;
    EXPECT_EQ(data(a.out, 16), Bytes({0x00, 0x01, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})) << attr;
    a = ask(pma(0x02, attr, 0xff, 0xffff), busy);
    EXPECT_EQ(Status::get(a.out.data()), 0) << attr;
    EXPECT_EQ(a.reset, 0u) << attr;
  }
}

TEST(Pma, BadInput) {
  Answer a = ask(pma(0x01, 0x0012, 2));  // a port the CA has not
  EXPECT_EQ(Status::get(a.out.data()), 0x001c);
  a = ask(pma(0x02, 0x0012, 2, 0xffff));
  EXPECT_EQ(Status::get(a.out.data()), 0x001c);
  EXPECT_EQ(a.reset, 0u);
  a = ask(pma(0x01, 0x0030));  // SwPortVLCongestion: a switch's, not there
  EXPECT_EQ(Status::get(a.out.data()), 0x000c);
  EXPECT_EQ(data(a.out, 4), Bytes({0, 0, 0, 0}));
  // PortSamplesControl/Result, PortSamplesResultExtended: no sampling here.
  for (uint16_t attr : {0x0010, 0x0011, 0x001e})
    EXPECT_EQ(Status::get(ask(pma(0x01, attr)).out.data()), 0x000c) << attr;
  // The new per-VL and Op attributes refuse a port the CA has not, as the others.
  for (uint16_t attr : {0x0017, 0x0018, 0x0019, 0x001a, 0x001b}) {
    a = ask(pma(0x02, attr, 2, 0xffff));
    EXPECT_EQ(Status::get(a.out.data()), 0x001c) << attr;
    EXPECT_EQ(a.reset, 0u) << attr;
  }
  a = ask(pma(0x02, 0x0001));
  EXPECT_EQ(Status::get(a.out.data()), 0x000c);
  a = ask(pma(0x06, 0x0012));
  EXPECT_EQ(Status::get(a.out.data()), 0x0008);
  auto in = pma(0x01, 0x0012);
  in[2] = 2;
  EXPECT_EQ(Status::get(ask(in).out.data()), 0x0004);
  EXPECT_EQ(ask(pma(0x81, 0x0012)).d, Disposition::kDrop);
  std::array<uint8_t, kMadBytes> out{};
  PmaMask reset(1);
  EXPECT_EQ(answer_pma(sample(), in.data(), 64, out.data(), &reset), Disposition::kDrop);
  EXPECT_EQ(reset, 0u);
}

TEST(Pma, RandomBytesNeverCrash) {
  std::mt19937 rng(4);
  std::array<uint8_t, kMadBytes> in{};
  std::array<uint8_t, kMadBytes> out{};
  for (int i = 0; i < 20000; ++i) {
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    in[1] = 0x04;
    if (i % 2 == 0) {
      in[0] = 1;
      in[2] = 1;
      in[3] &= 0x03;
    }
    PmaMask reset;
    answer_pma(sample(), in.data(), in.size(), out.data(), &reset);
    if (in[3] != 0x02) {
      EXPECT_TRUE(reset.none());  // only a Set resets
    }
  }
}

}  // namespace
}  // namespace softverbs::mad
