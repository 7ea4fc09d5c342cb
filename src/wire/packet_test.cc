#include "wire/packet.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

namespace softverbs::wire {
namespace {

constexpr uint32_t kMtu = 1024;

TransportHeaders sample_headers(Opcode op) {
  TransportHeaders h;
  h.bth.opcode = op;
  h.bth.solicited = true;
  h.bth.pkey = 0x8123;
  h.bth.dest_qp = 0x00abcd;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0xfffff0);
  h.reth = Reth{0x1122334455667788, 0x01020304, 4096};
  h.aeth = Aeth::ack(12, 0x777777);
  h.atomic_eth = AtomicEth{0x1000, 0xa0a0a0a0, 5, 6};
  h.atomic_ack_eth = AtomicAckEth{0x0123456789abcdef};
  h.immdt = ImmDt{0xfeedface};
  h.ieth = Ieth{0x5a5a5a5a};
  h.deth = Deth{0x80010000, 0x000321};
  h.xrceth = Xrceth{0x00f00d};
  h.feth = Feth{Feth::kGlobalVisibility, Feth::kWholeRegion};
  return h;
}

TEST(Packet, BuildThenParseEveryValidOpcode) {
  for (unsigned code = 0; code < 256; ++code) {
    const Opcode op = static_cast<Opcode>(code);
    const OpcodeInfo& info = opcode_info(op);
    if (!info.valid()) continue;
    SCOPED_TRACE(info.name);
    for (uint32_t len : {0u, 1u, 2u, 3u, 4u, 5u, 255u, kMtu}) {
      if (!info.is(OpFlag::kPayload) && len != 0) continue;
      std::vector<uint8_t> payload(len);
      for (uint32_t i = 0; i < len; ++i) payload[i] = uint8_t(i * 7 + 1);
      std::vector<uint8_t> buf(2048, 0xcc);
      PacketBuilder b(buf);
      const TransportHeaders h = sample_headers(op);
      ASSERT_EQ(b.build(h, payload), PacketError::kOk);
      EXPECT_EQ(b.length(), PacketBuilder::packet_length(op, len));
      EXPECT_EQ(b.length() % 4, 0u);
      EXPECT_EQ(b.length(), info.length + len + pad_for(len) + kIcrcBytes);

      const PacketView v = PacketView::parse(b.packet(), kMtu);
      ASSERT_TRUE(v.ok()) << packet_error_name(v.error());
      EXPECT_EQ(v.opcode(), op);
      EXPECT_EQ(&v.info(), &info);
      EXPECT_EQ(v.payload_length(), len);
      EXPECT_EQ(v.pad_count(), pad_for(len));
      EXPECT_TRUE(std::equal(payload.begin(), payload.end(), v.payload().begin()));
      Bth want = h.bth;
      want.pad_count = pad_for(len);
      EXPECT_EQ(v.bth(), want);
      EXPECT_EQ(v.reth(), info.has(Header::kReth) ? h.reth : Reth{});
      EXPECT_EQ(v.aeth(), info.has(Header::kAeth) ? h.aeth : Aeth{});
      EXPECT_EQ(v.atomic_eth(), info.has(Header::kAtomicEth) ? h.atomic_eth : AtomicEth{});
      EXPECT_EQ(v.atomic_ack_eth(),
                info.has(Header::kAtomicAckEth) ? h.atomic_ack_eth : AtomicAckEth{});
      EXPECT_EQ(v.immdt(), info.has(Header::kImmDt) ? h.immdt : ImmDt{});
      EXPECT_EQ(v.ieth(), info.has(Header::kIeth) ? h.ieth : Ieth{});
      EXPECT_EQ(v.deth(), info.has(Header::kDeth) ? h.deth : Deth{});
      EXPECT_EQ(v.xrceth(), info.has(Header::kXrceth) ? h.xrceth : Xrceth{});
      EXPECT_EQ(v.feth(), info.has(Header::kFeth) ? h.feth : Feth{});
      // Pad and ICRC slot are zeroed, nothing past the packet is touched.
      for (size_t i = info.length + len; i < b.length(); ++i) EXPECT_EQ(buf[i], 0) << i;
      EXPECT_EQ(buf[b.length()], 0xcc);
    }
  }
}

// IBA 9.3.8: RC SEND ONLY WITH INVALIDATE is BTH, IETH (the R_Key, big-endian),
// payload, pad, ICRC; LAST WITH INVALIDATE the same with its own opcode.
TEST(Packet, SendWithInvalidateBytes) {
  for (const Opcode op : {Opcode::kRcSendOnlyWithInvalidate, Opcode::kRcSendLastWithInvalidate}) {
    TransportHeaders h;
    h.bth.opcode = op;
    h.bth.pkey = 0xffff;
    h.bth.dest_qp = 0x000123;
    h.bth.ack_req = true;
    h.bth.psn = Psn(0x000456);
    h.ieth = Ieth{0x8a01c2f3};
    const std::vector<uint8_t> payload = {0xde, 0xad, 0xbe};
    std::vector<uint8_t> buf(PacketBuilder::packet_length(op, 3));
    PacketBuilder b(buf);
    ASSERT_EQ(b.build(h, payload), PacketError::kOk);
    const std::vector<uint8_t> want = {
        static_cast<uint8_t>(op), 0x10, 0xff, 0xff,  // opcode; SE 0, M 0, pad 1, TVer 0; P_Key
        0x00, 0x00, 0x01, 0x23,                      // reserved; destination QP
        0x80, 0x00, 0x04, 0x56,                      // AckReq; PSN
        0x8a, 0x01, 0xc2, 0xf3,                      // IETH: the R_Key
        0xde, 0xad, 0xbe, 0x00,                      // payload, one pad byte
        0x00, 0x00, 0x00, 0x00};                     // ICRC slot (sealed by the link)
    EXPECT_EQ(buf, want) << opcode_name(op);
    const PacketView v = PacketView::parse(buf, kMtu);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v.info().is(OpFlag::kInvalidate | OpFlag::kLast | OpFlag::kCompletes));
    EXPECT_EQ(v.ieth().rkey, 0x8a01c2f3u);
    EXPECT_EQ(v.payload_length(), 3u);
  }
  EXPECT_EQ(find_opcode(QpTypes::kRc, OpFlag::kRequest | OpFlag::kSend | OpFlag::kOnly | OpFlag::kInvalidate),
            Opcode::kRcSendOnlyWithInvalidate);
  EXPECT_EQ(find_opcode(QpTypes::kRc, OpFlag::kRequest | OpFlag::kSend | OpFlag::kLast | OpFlag::kInvalidate),
            Opcode::kRcSendLastWithInvalidate);
  EXPECT_EQ(find_opcode(QpTypes::kUc, OpFlag::kRequest | OpFlag::kSend | OpFlag::kOnly | OpFlag::kInvalidate),
            std::nullopt);
}

// IBA Annex A14, byte for byte: an XRC SEND ONLY is the BTH, the XRCETH
// (reserved byte, 24-bit XRCSRQ), the payload, pad, ICRC.
TEST(Packet, XrcSendOnlyBytes) {
  TransportHeaders h;
  h.bth.opcode = Opcode::kXrcSendOnly;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = 0x012345;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0x000102);
  h.xrceth = Xrceth{0x0a0b0c};
  const uint8_t payload[3] = {0xde, 0xad, 0xbe};
  std::vector<uint8_t> buf(64);
  PacketBuilder b(buf);
  ASSERT_EQ(b.build(h, payload), PacketError::kOk);
  const std::vector<uint8_t> want = {0xa4, 0x10, 0xff, 0xff, 0x00, 0x01, 0x23, 0x45, 0x80, 0x00, 0x01, 0x02,
                                     0x00, 0x0a, 0x0b, 0x0c, 0xde, 0xad, 0xbe, 0x00, 0, 0, 0, 0};
  EXPECT_EQ(std::vector<uint8_t>(b.packet().begin(), b.packet().end()), want);
  const PacketView v = PacketView::parse(b.packet(), kMtu);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.xrceth().srqn, 0x0a0b0cu);
  EXPECT_EQ(v.payload_length(), 3u);
}

TEST(Packet, BuilderRejections) {
  std::vector<uint8_t> buf(64);
  PacketBuilder b(buf);
  EXPECT_EQ(b.build(sample_headers(Opcode::kRcAcknowledge), 4), PacketError::kUnexpectedPayload);
  EXPECT_EQ(b.build(sample_headers(Opcode::kRcSendOnly), 64 - 12 - 4 + 1),
            PacketError::kBufferTooSmall);
  EXPECT_EQ(b.build(sample_headers(Opcode::kRcSendOnly), 64 - 12 - 4), PacketError::kOk);
  EXPECT_EQ(b.build(sample_headers(static_cast<Opcode>(0x44)), 0), PacketError::kUnknownOpcode);
  EXPECT_EQ(PacketBuilder::packet_length(static_cast<Opcode>(0x44), 0), 0u);
}

std::vector<uint8_t> built(Opcode op, uint32_t len) {
  std::vector<uint8_t> buf(PacketBuilder::packet_length(op, len));
  PacketBuilder b(buf);
  EXPECT_EQ(b.build(sample_headers(op), len), PacketError::kOk);
  return buf;
}

PacketError parse_error(const std::vector<uint8_t>& p, uint32_t mtu = kMtu) {
  return PacketView::parse(p, mtu).error();
}

TEST(Packet, RejectsMalformed) {
  EXPECT_EQ(parse_error({}), PacketError::kTruncatedBth);
  EXPECT_EQ(parse_error(std::vector<uint8_t>(11)), PacketError::kTruncatedBth);

  auto p = built(Opcode::kRcSendOnly, 8);
  p[0] = 0x44;  // RD
  EXPECT_EQ(parse_error(p), PacketError::kUnknownOpcode);
  p[0] = 0xb5;  // XRC has no code 0x15, as RC has none
  EXPECT_EQ(parse_error(p), PacketError::kUnknownOpcode);
  p[0] = 0x04;
  p[1] |= 0x01;  // TVer 1
  EXPECT_EQ(parse_error(p), PacketError::kBadTver);

  // Headers plus ICRC must fit.
  auto w = built(Opcode::kRcRdmaWriteFirst, 0);
  ASSERT_EQ(w.size(), 12u + 16 + 4);
  w.pop_back();
  EXPECT_EQ(parse_error(w), PacketError::kTruncatedHeaders);

  // Pad larger than the payload area.
  auto s = built(Opcode::kRcSendOnly, 0);
  s[1] |= 0x30;
  EXPECT_EQ(parse_error(s), PacketError::kBadPadCount);
  // Payload area not a whole number of words.
  auto t = built(Opcode::kRcSendOnly, 4);
  t.insert(t.begin() + 12, 0);
  EXPECT_EQ(parse_error(t), PacketError::kBadPadCount);

  // Payload on an ACK.
  auto a = built(Opcode::kRcAcknowledge, 0);
  a.insert(a.begin() + 16, {0, 0, 0, 0});
  EXPECT_EQ(parse_error(a), PacketError::kUnexpectedPayload);

  // MTU: exactly the MTU passes, one more byte fails; pad does not count.
  EXPECT_EQ(parse_error(built(Opcode::kRcSendOnly, 256), 256), PacketError::kOk);
  EXPECT_EQ(parse_error(built(Opcode::kRcSendOnly, 257), 256), PacketError::kPayloadExceedsMtu);
  EXPECT_EQ(parse_error(built(Opcode::kRcSendOnly, 255), 255), PacketError::kOk);
}

TEST(Packet, FailedViewAnswersNothing) {
  auto p = built(Opcode::kRcRdmaWriteOnlyWithImmediate, 8);
  p.pop_back();
  const PacketView v = PacketView::parse(p, kMtu);
  ASSERT_FALSE(v.ok());
  EXPECT_FALSE(v.has(Header::kReth));
  EXPECT_EQ(v.reth(), Reth{});
  EXPECT_EQ(v.immdt(), ImmDt{});
  EXPECT_TRUE(v.payload().empty());
  EXPECT_TRUE(v.bytes().empty());
  EXPECT_EQ(v.bth(), Bth{});
}

// Fuzz-like: every truncation and random corruption of real packets, each
// copied into an exactly-sized heap buffer so ASan sees any overread.
TEST(Packet, TruncationsAndCorruptionNeverReadOutOfBounds) {
  std::mt19937 rng(4791);
  std::vector<std::vector<uint8_t>> seeds;
  for (unsigned code = 0; code < 256; ++code) {
    const Opcode op = static_cast<Opcode>(code);
    if (!opcode_info(op).valid()) continue;
    seeds.push_back(built(op, 0));
    if (opcode_info(op).is(OpFlag::kPayload)) seeds.push_back(built(op, 1 + rng() % 64));
  }
  size_t ok = 0;
  for (const auto& seed : seeds) {
    for (size_t n = 0; n <= seed.size(); ++n) {
      auto exact = std::make_unique<uint8_t[]>(n == 0 ? 1 : n);
      std::copy(seed.begin(), seed.begin() + n, exact.get());
      const PacketView v = PacketView::parse({exact.get(), n}, kMtu);
      if (n < seed.size()) {
        // Shorter by less than a word keeps failing; by whole words it may
        // reparse as a smaller valid packet, which must stay in bounds.
        if (n % 4 != 0) {
          EXPECT_FALSE(v.ok());
        }
      } else {
        EXPECT_TRUE(v.ok());
      }
      if (v.ok()) {
        ++ok;
        EXPECT_LE(v.info().length + v.payload_length() + v.pad_count() + kIcrcBytes, n);
        (void)v.reth(), (void)v.aeth(), (void)v.atomic_eth(), (void)v.atomic_ack_eth();
        (void)v.immdt(), (void)v.ieth(), (void)v.deth(), (void)v.bth();
        volatile uint8_t sink = 0;
        for (uint8_t x : v.payload()) sink = sink ^ x;
      }
    }
  }
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> p = seeds[rng() % seeds.size()];
    const int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; ++f) p[rng() % p.size()] = uint8_t(rng());
    const size_t n = rng() % (p.size() + 1);
    auto exact = std::make_unique<uint8_t[]>(n == 0 ? 1 : n);
    std::copy(p.begin(), p.begin() + n, exact.get());
    const PacketView v = PacketView::parse({exact.get(), n}, 1 + rng() % 4096);
    if (v.ok()) {
      ++ok;
      EXPECT_LE(v.info().length + v.payload_length() + v.pad_count() + kIcrcBytes, n);
      (void)v.reth(), (void)v.atomic_eth(), (void)v.deth();
      volatile uint8_t sink = 0;
      for (uint8_t x : v.payload()) sink = sink ^ x;
    }
  }
  EXPECT_GT(ok, seeds.size());
}

}  // namespace
}  // namespace softverbs::wire
