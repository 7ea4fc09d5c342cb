// RoCEv2 encapsulation: the IPv4 or IPv6 header and the UDP header in front
// of an IB transport packet — the bytes that follow the Ethernet header.
//
// Contract:
//   1. Addresses are 16-byte GIDs; an IPv4 address is the IPv4-mapped GID
//      ::ffff:a.b.c.d (RoCEv2 annex A17 GID format), of which the last four
//      bytes go on the wire.
//   2. The sender controls every IP header byte, IPv4 identification
//      included, because the ICRC covers them (icrc.h); nothing here picks a
//      value on its own.
//   3. roce_encapsulate() takes a buffer laid out as
//      [encap_length(version) bytes of room][IB packet, BTH .. ICRC slot]
//      and fills in IP and UDP headers, the IPv4 header checksum, the ICRC,
//      then the UDP checksum (it covers the ICRC, the ICRC masks it).
//   4. roce_parse() validates one datagram and never reads outside it. The
//      datagram may be followed by link-layer padding: its end is taken from
//      the IP length fields, not from the buffer size.
//   5. Pure functions, thread-safe, no allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace softverbs::wire {

using Gid = std::array<uint8_t, 16>;

enum class IpVersion : uint8_t { kV4 = 4, kV6 = 6 };

inline constexpr uint16_t kRoceV2Port = 4791;  // IANA, RoCEv2 annex A17
inline constexpr size_t kIpv4HeaderBytes = 20;
inline constexpr size_t kIpv6HeaderBytes = 40;
inline constexpr size_t kUdpHeaderBytes = 8;

[[nodiscard]] constexpr size_t encap_length(IpVersion v) {
  return (v == IpVersion::kV4 ? kIpv4HeaderBytes : kIpv6HeaderBytes) + kUdpHeaderBytes;
}

[[nodiscard]] constexpr Gid gid_from_ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

// kAuto: zero for IPv4 (RFC 768 allows it), computed for IPv6 (RFC 8200
// forbids zero outside tunnels).
enum class UdpChecksum : uint8_t { kAuto, kZero, kCompute };

struct RoceUdpHeader {
  IpVersion version = IpVersion::kV4;
  Gid src{};
  Gid dst{};
  uint8_t traffic_class = 0;  // IPv4 TOS / IPv6 traffic class: DSCP << 2 | ECN
  uint8_t hop_limit = 64;     // IPv4 TTL / IPv6 hop limit
  uint32_t flow_label = 0;    // IPv6 only, 20 bits
  uint16_t ipv4_id = 0;       // IPv4 identification, chosen by the sender
  bool dont_fragment = true;  // IPv4 DF
  uint16_t src_port = 0xc000; // RoCEv2 uses it for flow entropy
  uint16_t dst_port = kRoceV2Port;
  UdpChecksum udp_checksum = UdpChecksum::kAuto;
  uint16_t udp_checksum_value = 0;  // as parsed; ignored by roce_encapsulate()
};

enum class EncapError : uint8_t {
  kOk = 0,
  kTruncated,          // fewer bytes than the headers or the IP length claims
  kBadIpVersion,
  kBadIpHeaderLength,  // IPv4 IHL below 5
  kBadIpChecksum,
  kFragmented,         // IPv4 MF set or fragment offset non-zero
  kNotUdp,             // protocol / next header is not UDP (17)
  kBadUdpLength,       // UDP length disagrees with the IP length
  kWrongPort,
  kBadUdpChecksum,
  kTooLong,            // roce_encapsulate: the datagram exceeds 65535 bytes
  kIcrc,               // roce_encapsulate: the IB packet is too short for an ICRC
};

[[nodiscard]] const char* encap_error_name(EncapError e);

// The IP and UDP headers alone (UDP checksum 0) that carry an IB packet of
// `ib_length` bytes, written to the front of `out`; returns their length, or
// 0 when `out` is too small or the datagram would exceed 65535 bytes. What a
// UDP socket's sender needs for the ICRC, and its receiver to check one.
[[nodiscard]] size_t roce_write_headers(std::span<uint8_t> out, const RoceUdpHeader& h, size_t ib_length);

// See contract 3. `datagram` is exactly the datagram: room plus IB packet.
[[nodiscard]] EncapError roce_encapsulate(std::span<uint8_t> datagram, const RoceUdpHeader& h);

struct RoceDatagram {
  EncapError error = EncapError::kTruncated;
  RoceUdpHeader header;
  std::span<const uint8_t> datagram;  // IP header .. last ICRC byte (for icrc_check)
  std::span<const uint8_t> ib;        // BTH .. last ICRC byte (for PacketView)
};

// Validates IP and UDP framing; a UDP checksum of zero is accepted for both
// IP versions (the ICRC protects the packet), a non-zero one is verified.
[[nodiscard]] RoceDatagram roce_parse(std::span<const uint8_t> bytes,
                                      uint16_t dst_port = kRoceV2Port);

}  // namespace softverbs::wire
