#include "wire/icrc.h"

#include <libdeflate.h>

#include <array>
#include <cstring>

#include "wire/opcode.h"

namespace softverbs::wire {
namespace {

constexpr size_t kUdpBytes = 8;
constexpr size_t kIpv4MinBytes = 20;
constexpr size_t kIpv4MaxBytes = 60;
constexpr size_t kIpv6Bytes = 40;
constexpr size_t kMaxMasked = kIpv4MaxBytes + kUdpBytes + kBthBytes;

// Sets the variant fields of a copied IP + UDP + BTH header to all ones.
void mask_variant_fields(uint8_t* h, size_t ip_len) {
  if ((h[0] >> 4) == 4) {
    h[1] = 0xff;   // TOS: DSCP and ECN change in flight
    h[8] = 0xff;   // TTL
    h[10] = 0xff;  // header checksum follows the TTL
    h[11] = 0xff;
  } else {
    h[0] |= 0x0f;  // traffic class, high nibble
    h[1] = 0xff;   // traffic class low nibble, flow label high nibble
    h[2] = 0xff;   // flow label
    h[3] = 0xff;
    h[7] = 0xff;   // hop limit
  }
  h[ip_len + 6] = 0xff;  // UDP checksum
  h[ip_len + 7] = 0xff;
  // RoCEv2 annex A17: BTH byte 4 (FECN, BECN, resv6) is variant; resv7 and
  // everything else in the BTH are covered.
  h[ip_len + kUdpBytes + 4] = 0xff;
}

uint32_t crc_of(std::span<const uint8_t> ip_udp, std::span<const uint8_t> ib) {
  static constexpr std::array<uint8_t, 8> kLrhStandIn = {0xff, 0xff, 0xff, 0xff,
                                                         0xff, 0xff, 0xff, 0xff};
  std::array<uint8_t, kMaxMasked> masked;
  const size_t head = ip_udp.size() + kBthBytes;
  std::memcpy(masked.data(), ip_udp.data(), ip_udp.size());
  std::memcpy(masked.data() + ip_udp.size(), ib.data(), kBthBytes);
  mask_variant_fields(masked.data(), ip_udp.size() - kUdpBytes);

  // libdeflate_crc32 applies the initial and final complements itself, so
  // chaining calls equals one CRC over the concatenation.
  uint32_t crc = libdeflate_crc32(0, kLrhStandIn.data(), kLrhStandIn.size());
  crc = libdeflate_crc32(crc, masked.data(), head);
  return libdeflate_crc32(crc, ib.data() + kBthBytes, ib.size() - kBthBytes);
}

void store_le(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t load_le(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}

// The one helper under generate and check: the ICRC of a whole datagram.
std::optional<uint32_t> datagram_icrc(std::span<const uint8_t> datagram) {
  const size_t head = ip_udp_header_length(datagram);
  if (head == 0 || datagram.size() < head + kBthBytes + kIcrcBytes) return std::nullopt;
  return icrc_compute(datagram.first(head),
                      datagram.subspan(head, datagram.size() - head - kIcrcBytes));
}

// Arithmetic modulo the CRC-32 polynomial, bit-reflected as the CRC runs
// (bit 31 is x^0), as in zlib's crc32_combine.
constexpr uint32_t kPoly = 0xedb88320u;

uint32_t mult_mod_p(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if ((a & m) != 0) product ^= b;
    b = (b & 1) != 0 ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// x^(8 * bytes) mod P: what `bytes` zero bytes after a value do to the CRC
// register, as a factor.
uint32_t shift_bytes(size_t bytes) {
  uint32_t square = 1u << 30;  // x^1
  // x^8 first: square three times.
  for (int i = 0; i < 3; ++i) square = mult_mod_p(square, square);
  uint32_t p = 1u << 31;  // x^0
  for (; bytes != 0; bytes >>= 1) {
    if ((bytes & 1) != 0) p = mult_mod_p(p, square);
    square = mult_mod_p(square, square);
  }
  return p;
}

// The CRC register after the two bytes of `id` (big-endian) from a zero
// register, without complements: the difference they make where they stand.
uint32_t register_of(uint16_t id) {
  uint32_t crc = 0;
  for (const uint8_t byte : {static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id)}) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) != 0 ? (crc >> 1) ^ kPoly : crc >> 1;
  }
  return crc;
}

// Covered bytes after the identification: the rest of a 20-byte IPv4
// header (offset 6 on), the UDP header, the IB packet but its ICRC.
size_t bytes_after_ipv4_id(size_t ib_length) { return (kIpv4MinBytes - 6) + kUdpBytes + ib_length - kIcrcBytes; }

}  // namespace

uint32_t icrc_ipv4_id_delta(size_t ib_length, uint16_t id) {
  return mult_mod_p(register_of(id), shift_bytes(bytes_after_ipv4_id(ib_length)));
}

void IcrcIdDeltas::build(size_t ib_length) {
  const uint32_t shift = shift_bytes(bytes_after_ipv4_id(ib_length));
  for (uint16_t k = 0; k < kIds; ++k) delta_[k] = mult_mod_p(register_of(k), shift);
  length_ = ib_length;
}

uint32_t IcrcIdDeltas::delta(size_t ib_length, uint16_t id) {
  if (ib_length != length_) build(ib_length);
  return delta_[id % kIds];
}

bool IcrcIdDeltas::is_delta(size_t ib_length, uint32_t diff) {
  if (ib_length < kIcrcBytes) return false;
  if (ib_length != length_) build(ib_length);
  for (uint16_t k = 1; k < kIds; ++k)
    if (delta_[k] == diff) return true;
  return false;
}

size_t ip_udp_header_length(std::span<const uint8_t> datagram) {
  if (datagram.empty()) return 0;
  size_t ip_len = 0;
  switch (datagram[0] >> 4) {
    case 4:
      ip_len = size_t{datagram[0] & 0x0fu} * 4;
      if (ip_len < kIpv4MinBytes) return 0;
      break;
    case 6:
      ip_len = kIpv6Bytes;
      break;
    default:
      return 0;
  }
  return datagram.size() >= ip_len + kUdpBytes ? ip_len + kUdpBytes : 0;
}

std::optional<uint32_t> icrc_compute(std::span<const uint8_t> ip_udp, std::span<const uint8_t> ib) {
  if (ib.size() < kBthBytes || ip_udp_header_length(ip_udp) != ip_udp.size()) return std::nullopt;
  return crc_of(ip_udp, ib);
}

IcrcStatus icrc_generate(std::span<uint8_t> datagram) {
  const std::optional<uint32_t> crc = datagram_icrc(datagram);
  if (!crc) return IcrcStatus::kMalformed;
  store_le(datagram.data() + datagram.size() - kIcrcBytes, *crc);
  return IcrcStatus::kOk;
}

IcrcStatus icrc_check(std::span<const uint8_t> datagram) {
  const std::optional<uint32_t> crc = datagram_icrc(datagram);
  if (!crc) return IcrcStatus::kMalformed;
  return load_le(datagram.data() + datagram.size() - kIcrcBytes) == *crc ? IcrcStatus::kOk
                                                                         : IcrcStatus::kMismatch;
}

}  // namespace softverbs::wire
