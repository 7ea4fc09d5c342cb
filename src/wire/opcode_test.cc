#include "wire/opcode.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>

namespace softverbs::wire {
namespace {

// IBA 9.2 / 9.3 header sizes, written out here independently of the table.
constexpr size_t kBth = 12, kFeth = 4, kReth = 16, kAeth = 4, kAtomicEth = 28, kAtomicAckEth = 8,
                 kImmDt = 4, kIeth = 4, kDeth = 8, kXrceth = 4;

struct Expect {
  uint8_t code;
  const char* name;
  std::initializer_list<std::pair<Header, size_t>> headers;  // in wire order
};

const Expect kExpected[] = {
    {0x00, "RC_SEND_FIRST", {}},
    {0x01, "RC_SEND_MIDDLE", {}},
    {0x02, "RC_SEND_LAST", {}},
    {0x03, "RC_SEND_LAST_WITH_IMMEDIATE", {{Header::kImmDt, kImmDt}}},
    {0x04, "RC_SEND_ONLY", {}},
    {0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", {{Header::kImmDt, kImmDt}}},
    {0x06, "RC_RDMA_WRITE_FIRST", {{Header::kReth, kReth}}},
    {0x07, "RC_RDMA_WRITE_MIDDLE", {}},
    {0x08, "RC_RDMA_WRITE_LAST", {}},
    {0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", {{Header::kImmDt, kImmDt}}},
    {0x0a, "RC_RDMA_WRITE_ONLY", {{Header::kReth, kReth}}},
    {0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", {{Header::kReth, kReth}, {Header::kImmDt, kImmDt}}},
    {0x0c, "RC_RDMA_READ_REQUEST", {{Header::kReth, kReth}}},
    {0x0d, "RC_RDMA_READ_RESPONSE_FIRST", {{Header::kAeth, kAeth}}},
    {0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", {}},
    {0x0f, "RC_RDMA_READ_RESPONSE_LAST", {{Header::kAeth, kAeth}}},
    {0x10, "RC_RDMA_READ_RESPONSE_ONLY", {{Header::kAeth, kAeth}}},
    {0x11, "RC_ACKNOWLEDGE", {{Header::kAeth, kAeth}}},
    {0x12, "RC_ATOMIC_ACKNOWLEDGE", {{Header::kAeth, kAeth}, {Header::kAtomicAckEth, kAtomicAckEth}}},
    {0x13, "RC_COMPARE_SWAP", {{Header::kAtomicEth, kAtomicEth}}},
    {0x14, "RC_FETCH_ADD", {{Header::kAtomicEth, kAtomicEth}}},
    {0x16, "RC_SEND_LAST_WITH_INVALIDATE", {{Header::kIeth, kIeth}}},
    {0x17, "RC_SEND_ONLY_WITH_INVALIDATE", {{Header::kIeth, kIeth}}},
    {0x1c, "RC_FLUSH", {{Header::kFeth, kFeth}, {Header::kReth, kReth}}},  // IBA 1.5, RC only
    {0x1d, "RC_ATOMIC_WRITE", {{Header::kReth, kReth}}},                   // IBA 1.5, RC only
    {0x20, "UC_SEND_FIRST", {}},
    {0x21, "UC_SEND_MIDDLE", {}},
    {0x22, "UC_SEND_LAST", {}},
    {0x23, "UC_SEND_LAST_WITH_IMMEDIATE", {{Header::kImmDt, kImmDt}}},
    {0x24, "UC_SEND_ONLY", {}},
    {0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", {{Header::kImmDt, kImmDt}}},
    {0x26, "UC_RDMA_WRITE_FIRST", {{Header::kReth, kReth}}},
    {0x27, "UC_RDMA_WRITE_MIDDLE", {}},
    {0x28, "UC_RDMA_WRITE_LAST", {}},
    {0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", {{Header::kImmDt, kImmDt}}},
    {0x2a, "UC_RDMA_WRITE_ONLY", {{Header::kReth, kReth}}},
    {0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", {{Header::kReth, kReth}, {Header::kImmDt, kImmDt}}},
    {0x64, "UD_SEND_ONLY", {{Header::kDeth, kDeth}}},
    {0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", {{Header::kDeth, kDeth}, {Header::kImmDt, kImmDt}}},
};

// XRC (Annex A14) has RC's operations up to IBA 1.4; the IBA 1.5 ones are RC's alone.
bool has_xrc_twin(uint8_t code) { return code < 0x18; }

TEST(OpcodeTable, EveryValidOpcodeHasTheIbaLayout) {
  size_t valid = 0, rc = 0;
  for (const OpcodeInfo& e : kOpcodeTable) valid += e.valid() ? 1 : 0;
  for (const Expect& x : kExpected) rc += has_xrc_twin(x.code) ? 1 : 0;
  EXPECT_EQ(valid, std::size(kExpected) + rc);  // XRC has every RC code

  for (const Expect& x : kExpected) {
    const OpcodeInfo& e = opcode_info(static_cast<Opcode>(x.code));
    SCOPED_TRACE(x.name);
    ASSERT_TRUE(e.valid());
    EXPECT_STREQ(e.name, x.name);
    size_t at = kBth;
    uint16_t mask = 0;
    for (auto [h, bytes] : x.headers) {
      EXPECT_TRUE(e.has(h));
      EXPECT_EQ(e.offset_of(h), at);
      EXPECT_EQ(kHeaderBytes[static_cast<size_t>(h)], bytes);
      mask |= header_bit(h);
      at += bytes;
    }
    EXPECT_EQ(e.headers, mask);
    EXPECT_EQ(e.length, at);
  }
}

// IBA Annex A14: XRC has RC's operations at 0xA0 + the RC code, with the
// XRCETH between the BTH and RC's headers in requests, and none in responses.
TEST(OpcodeTable, XrcIsRcWithAnXrcethInRequests) {
  for (const Expect& x : kExpected) {
    if (!has_xrc_twin(x.code)) continue;
    const OpcodeInfo& rc = opcode_info(static_cast<Opcode>(x.code));
    const OpcodeInfo& e = opcode_info(static_cast<Opcode>(0xa0 | x.code));
    SCOPED_TRACE(x.name);
    ASSERT_TRUE(e.valid());
    EXPECT_EQ(std::string(e.name), "XRC_" + std::string(x.name).substr(3));
    EXPECT_EQ(e.qp_types, QpTypes::kXrc);
    EXPECT_EQ(e.flags, rc.flags);
    const bool request = rc.is(OpFlag::kRequest);
    const size_t shift = request ? kXrceth : 0;
    EXPECT_EQ(e.has(Header::kXrceth), request);
    EXPECT_EQ(e.offset_of(Header::kXrceth), request ? kBth : 0);
    EXPECT_EQ(e.length, rc.length + shift);
    for (auto [h, bytes] : x.headers) EXPECT_EQ(e.offset_of(h), rc.offset_of(h) + shift);
  }
}

TEST(OpcodeTable, EnumValuesAreTheIbtaCodes) {
  EXPECT_EQ(static_cast<uint8_t>(Opcode::kRcSendFirst), 0x00);
  EXPECT_EQ(static_cast<uint8_t>(Opcode::kRcAcknowledge), 0x11);
  EXPECT_EQ(static_cast<uint8_t>(Opcode::kRcSendOnlyWithInvalidate), 0x17);
  EXPECT_EQ(static_cast<uint8_t>(Opcode::kRcAtomicWrite), 0x1d);
  EXPECT_EQ(static_cast<uint8_t>(Opcode::kUcRdmaWriteOnlyWithImmediate), 0x2b);
  EXPECT_EQ(static_cast<uint8_t>(Opcode::kUdSendOnly), 0x64);
  EXPECT_EQ(static_cast<uint8_t>(Opcode::kXrcSendFirst), 0xa0);
  EXPECT_EQ(static_cast<uint8_t>(Opcode::kXrcSendOnlyWithInvalidate), 0xb7);
  for (const Expect& x : kExpected) EXPECT_STREQ(opcode_name(static_cast<Opcode>(x.code)), x.name);
}

TEST(OpcodeTable, ReservedAndUndefinedCodesAreNotValid) {
  for (unsigned c = 0; c < 256; ++c) {
    const OpcodeInfo& e = opcode_info(static_cast<Opcode>(c));
    const unsigned prefix = c & 0xe0;
    if (prefix == 0x40 || prefix == 0x80 || prefix == 0xc0 || prefix == 0xe0) {
      EXPECT_FALSE(e.valid()) << c;
      EXPECT_EQ(e.name, nullptr) << c;
      EXPECT_STREQ(opcode_name(static_cast<Opcode>(c)), "UNKNOWN");
    }
    if (prefix == 0xa0 && e.name != nullptr) {
      EXPECT_EQ(std::string(e.name).rfind("XRC_", 0), 0u);
      EXPECT_EQ(e.qp_types, QpTypes::kXrc);
    }
  }
  EXPECT_FALSE(opcode_info(static_cast<Opcode>(0x15)).valid());
  EXPECT_FALSE(opcode_info(static_cast<Opcode>(0x2c)).valid());  // no UC reads
  EXPECT_FALSE(opcode_info(static_cast<Opcode>(0x60)).valid());  // UD has no SEND_FIRST
}

TEST(OpcodeTable, Flags) {
  using F = OpFlag;
  auto info = [](Opcode op) { return opcode_info(op); };
  EXPECT_TRUE(info(Opcode::kRcSendFirst).is(F::kRequest | F::kSend | F::kFirst | F::kPayload));
  EXPECT_FALSE(info(Opcode::kRcSendFirst).any(F::kLast | F::kCompletes));
  EXPECT_TRUE(info(Opcode::kRcSendOnly).only());
  EXPECT_TRUE(info(Opcode::kRcSendMiddle).is(F::kMiddle));
  EXPECT_TRUE(info(Opcode::kRcRdmaWriteLast).is(F::kWrite | F::kLast));
  EXPECT_FALSE(info(Opcode::kRcRdmaWriteLast).any(F::kCompletes));
  EXPECT_TRUE(info(Opcode::kRcRdmaWriteLastWithImmediate).is(F::kImmediate | F::kCompletes));
  EXPECT_TRUE(info(Opcode::kRcRdmaReadRequest).is(F::kRequest | F::kRead));
  EXPECT_FALSE(info(Opcode::kRcRdmaReadRequest).any(F::kPayload));
  EXPECT_TRUE(info(Opcode::kRcRdmaReadResponseMiddle).is(F::kResponse | F::kRead | F::kPayload));
  EXPECT_TRUE(info(Opcode::kRcAcknowledge).is(F::kResponse | F::kAck));
  EXPECT_FALSE(info(Opcode::kRcAcknowledge).any(F::kPayload));
  EXPECT_TRUE(info(Opcode::kRcAtomicAcknowledge).is(F::kResponse | F::kAck | F::kAtomic));
  EXPECT_TRUE(info(Opcode::kRcCompareSwap).is(F::kRequest | F::kAtomic));
  EXPECT_TRUE(info(Opcode::kRcFetchAdd).is(F::kRequest | F::kAtomic));
  EXPECT_TRUE(info(Opcode::kRcSendOnlyWithInvalidate).is(F::kInvalidate | F::kSend | F::kCompletes));
  // ATOMIC WRITE carries its eight bytes but is neither a WRITE nor an atomic
  // to the code that handles those.
  EXPECT_TRUE(info(Opcode::kRcAtomicWrite).is(F::kRequest | F::kAtomicWrite | F::kPayload | F::kOnly));
  EXPECT_FALSE(info(Opcode::kRcAtomicWrite).any(F::kWrite | F::kAtomic | F::kRead | F::kCompletes));
  EXPECT_FALSE(opcode_info(static_cast<Opcode>(0xbd)).valid());
  // Every RC and XRC request must be acknowledged; no UC, UD or response opcode is.
  for (const OpcodeInfo& e : kOpcodeTable) {
    if (!e.valid()) continue;
    const bool reliable = e.qp_types == QpTypes::kRc || e.qp_types == QpTypes::kXrc;
    EXPECT_EQ(e.is(F::kAckRequired), reliable && e.is(F::kRequest)) << e.name;
  }
  EXPECT_EQ(info(Opcode::kRcSendOnly).qp_types, QpTypes::kRc);
  EXPECT_EQ(info(Opcode::kUcSendOnly).qp_types, QpTypes::kUc);
  EXPECT_EQ(info(Opcode::kUdSendOnly).qp_types, QpTypes::kUd);
}

}  // namespace
}  // namespace softverbs::wire
