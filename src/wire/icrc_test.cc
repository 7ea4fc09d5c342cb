#include "wire/icrc.h"

#include <gtest/gtest.h>

#include <set>
#include <span>
#include <vector>

#include "wire/testdata/icrc_vectors.h"

namespace softverbs::wire {
namespace {

using testdata::kV4SendOnly;
using testdata::kV4SendOnlyUdpChecksum;
using testdata::kV4WriteOnlyImm;
using testdata::kV4WriteOnlyImmMarked;
using testdata::kV6UdSendOnlyImm;

std::vector<uint8_t> bytes(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

TEST(Icrc, GoldenVectorsCheck) {
  EXPECT_EQ(icrc_check(kV4SendOnly), IcrcStatus::kOk);
  EXPECT_EQ(icrc_check(kV4SendOnlyUdpChecksum), IcrcStatus::kOk);
  EXPECT_EQ(icrc_check(kV4WriteOnlyImm), IcrcStatus::kOk);
  EXPECT_EQ(icrc_check(kV4WriteOnlyImmMarked), IcrcStatus::kOk);
  EXPECT_EQ(icrc_check(kV6UdSendOnlyImm), IcrcStatus::kOk);
}

TEST(Icrc, GenerateReproducesGoldenBytes) {
  for (std::span<const uint8_t> golden :
       {std::span<const uint8_t>(kV4SendOnly), std::span<const uint8_t>(kV4WriteOnlyImm),
        std::span<const uint8_t>(kV6UdSendOnlyImm)}) {
    std::vector<uint8_t> d = bytes(golden);
    d[d.size() - 4] = d[d.size() - 3] = d[d.size() - 2] = d[d.size() - 1] = 0;
    ASSERT_EQ(icrc_generate(d), IcrcStatus::kOk);
    EXPECT_EQ(d, bytes(golden));
  }
}

TEST(Icrc, StoredLeastSignificantByteFirst) {
  // kV4SendOnly ends 86 76 0e 39: the CRC value is 0x390e7686.
  const std::span<const uint8_t> d(kV4SendOnly);
  const auto crc = icrc_compute(d.first(28), d.subspan(28, d.size() - 32));
  ASSERT_TRUE(crc.has_value());
  EXPECT_EQ(*crc, 0x390e7686u);
}

// Flipping any bit outside the variant fields must change the ICRC; flipping
// a variant bit must not (IBA 7.8.1, RoCEv2 annex A17 masking).
void expect_exact_masking(std::span<const uint8_t> golden, const std::set<size_t>& variant) {
  std::vector<uint8_t> d = bytes(golden);
  for (size_t i = 0; i + 4 < d.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      d[i] ^= uint8_t(1u << bit);
      const IcrcStatus want = variant.count(i) ? IcrcStatus::kOk : IcrcStatus::kMismatch;
      // Byte 0 holds the IP version and header length: flips there reframe
      // the datagram and may be reported as malformed instead.
      const IcrcStatus got = icrc_check(d);
      if (i == 0 && got == IcrcStatus::kMalformed) {
      } else {
        EXPECT_EQ(got, want) << "byte " << i << " bit " << bit;
      }
      d[i] ^= uint8_t(1u << bit);
    }
  }
}

TEST(Icrc, MasksExactlyTheIpv4VariantFields) {
  // TOS 1, TTL 8, checksum 10-11, UDP checksum 26-27, BTH byte 4 at 32.
  expect_exact_masking(kV4WriteOnlyImm, {1, 8, 10, 11, 26, 27, 32});
}

TEST(Icrc, MasksExactlyTheIpv6VariantFields) {
  // Traffic class and flow label are the low nibble of byte 0 and bytes 1-3;
  // the version nibble is not masked, so byte 0 is checked bit by bit below.
  std::vector<uint8_t> d = bytes(kV6UdSendOnlyImm);
  for (int bit = 0; bit < 4; ++bit) {
    d[0] ^= uint8_t(1u << bit);
    EXPECT_EQ(icrc_check(d), IcrcStatus::kOk) << bit;
    d[0] ^= uint8_t(1u << bit);
  }
  // Hop limit 7, UDP checksum 46-47, BTH byte 4 at 52.
  expect_exact_masking(kV6UdSendOnlyImm, {0, 1, 2, 3, 7, 46, 47, 52});
}

TEST(Icrc, Ipv4IdentificationAndFragmentFieldsAreCovered) {
  std::vector<uint8_t> d = bytes(kV4SendOnly);
  d[5] ^= 1;  // identification
  EXPECT_EQ(icrc_check(d), IcrcStatus::kMismatch);
  d[5] ^= 1;
  d[6] ^= 0x40;  // DF
  EXPECT_EQ(icrc_check(d), IcrcStatus::kMismatch);
}

// The golden IPv4 packet with identification `id` and, optionally, `len`
// bytes of IB packet (BTH .. ICRC) of which the golden one is a prefix.
std::vector<uint8_t> with_id(uint16_t id, size_t extra = 0) {
  std::vector<uint8_t> d = bytes(kV4SendOnly);
  d.insert(d.end() - 4, extra, uint8_t{0x5a});
  const size_t total = d.size();
  d[2] = uint8_t(total >> 8);
  d[3] = uint8_t(total);
  d[24] = uint8_t((total - 20) >> 8);  // UDP length
  d[25] = uint8_t(total - 20);
  d[4] = uint8_t(id >> 8);
  d[5] = uint8_t(id);
  EXPECT_EQ(icrc_generate(d), IcrcStatus::kOk);
  return d;
}

uint32_t stored_icrc(std::span<const uint8_t> d) {
  return uint32_t(d[d.size() - 4]) | uint32_t(d[d.size() - 3]) << 8 | uint32_t(d[d.size() - 2]) << 16 |
         uint32_t(d[d.size() - 1]) << 24;
}

TEST(Icrc, IdentificationDeltaIsLinear) {
  for (size_t extra : {size_t{0}, size_t{1}, size_t{1000}, size_t{4096}}) {
    const uint32_t id0 = stored_icrc(with_id(0, extra));
    const size_t ib_length = sizeof kV4SendOnly - 28 + extra;
    for (uint16_t id : {uint16_t{1}, uint16_t{2}, uint16_t{63}, uint16_t{0x1234}, uint16_t{0xffff}})
      EXPECT_EQ(stored_icrc(with_id(id, extra)), id0 ^ icrc_ipv4_id_delta(ib_length, id))
          << "extra " << extra << " id " << id;
  }
}

TEST(Icrc, DeltaTableMatchesTheDirectDelta) {
  IcrcIdDeltas d;
  for (size_t length : {size_t{16}, size_t{4124}, size_t{16}, size_t{1052}})
    for (uint16_t id = 0; id < IcrcIdDeltas::kIds; ++id)
      EXPECT_EQ(d.delta(length, id), icrc_ipv4_id_delta(length, id)) << length << " " << id;
}

TEST(Icrc, ToleranceAcceptsSmallIdentificationsOnly) {
  IcrcIdTolerance t;
  for (size_t extra : {size_t{0}, size_t{4096}, size_t{0}}) {  // a length change rebuilds the table
    const uint32_t id0 = stored_icrc(with_id(0, extra));
    const size_t ib_length = sizeof kV4SendOnly - 28 + extra;
    for (uint16_t id = 0; id < IcrcIdTolerance::kIds; ++id)
      EXPECT_TRUE(t.accepts(id0, stored_icrc(with_id(id, extra)), ib_length)) << id;
    EXPECT_FALSE(t.accepts(id0, stored_icrc(with_id(IcrcIdTolerance::kIds, extra)), ib_length));
    EXPECT_FALSE(t.accepts(id0, stored_icrc(with_id(0xffff, extra)), ib_length));
    // Any single-bit corruption of a packet sent with identification 5 is
    // still refused: the tolerance is for the identification only.
    std::vector<uint8_t> d = with_id(5, extra);
    for (size_t i = 28; i + 4 < d.size(); i += 7) {
      d[i] ^= 0x10;
      std::vector<uint8_t> as0 = d;
      as0[4] = as0[5] = 0;
      ASSERT_EQ(icrc_generate(as0), IcrcStatus::kOk);
      if (i != 32) {  // BTH byte 4 is masked
        EXPECT_FALSE(t.accepts(stored_icrc(as0), stored_icrc(with_id(5, extra)), ib_length)) << i;
      }
      d[i] ^= 0x10;
    }
  }
}

TEST(Icrc, SplitHeadersEqualContiguous) {
  const std::span<const uint8_t> d(kV6UdSendOnlyImm);
  std::vector<uint8_t> head(d.begin(), d.begin() + 48);
  std::vector<uint8_t> ib(d.begin() + 48, d.end() - 4);
  const auto crc = icrc_compute(head, ib);
  ASSERT_TRUE(crc.has_value());
  const uint32_t stored = uint32_t(d[d.size() - 4]) | uint32_t(d[d.size() - 3]) << 8 |
                          uint32_t(d[d.size() - 2]) << 16 | uint32_t(d[d.size() - 1]) << 24;
  EXPECT_EQ(*crc, stored);
}

TEST(Icrc, MalformedInput) {
  EXPECT_EQ(icrc_check({}), IcrcStatus::kMalformed);
  std::vector<uint8_t> d = bytes(kV4SendOnly);
  d[0] = 0x44;  // IHL 4
  EXPECT_EQ(icrc_check(d), IcrcStatus::kMalformed);
  d[0] = 0x55;  // version 5
  EXPECT_EQ(icrc_check(d), IcrcStatus::kMalformed);
  d[0] = 0x4f;  // IHL 15: 60 bytes of IP header do not leave room
  EXPECT_EQ(icrc_check(d), IcrcStatus::kMalformed);
  const std::span<const uint8_t> g(kV4SendOnly);
  EXPECT_EQ(icrc_check(g.first(28 + 12 + 3)), IcrcStatus::kMalformed);
  EXPECT_FALSE(icrc_compute(g.first(27), g.subspan(28, 12)).has_value());
  EXPECT_FALSE(icrc_compute(g.first(28), g.subspan(28, 11)).has_value());
  // Every truncation is either malformed or a mismatch, never a read past it.
  for (size_t n = 0; n < g.size(); ++n) EXPECT_NE(icrc_check(g.first(n)), IcrcStatus::kOk);
}

}  // namespace
}  // namespace softverbs::wire
