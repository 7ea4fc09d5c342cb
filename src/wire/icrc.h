// Invariant CRC of a RoCEv2 packet (IBA 7.8.1; RoCEv2 annex A17).
//
// Contract:
//   1. The ICRC is the Ethernet CRC-32 (reflected 0x04C11DB7, initial value
//      all ones, final complement — zlib's crc32) over, in order:
//        8 bytes of 0xFF                      (stands in for the LRH)
//        the IP header, variant fields set to all ones:
//          IPv4: TOS (DSCP+ECN), TTL, header checksum
//          IPv6: traffic class, flow label, hop limit
//        the UDP header, checksum set to all ones
//        the BTH, byte 4 (F, B, resv6 — "Resv8a" in rxe) set to all ones
//        the rest of the IB packet up to the ICRC (headers, payload, pad).
//      Nothing else is masked: IPv4 identification, flags and fragment
//      offset, total length and IPv6 payload length are invariant.
//   2. The four ICRC bytes go on the wire least significant byte first, so a
//      returned value v is stored as v & 0xff, v >> 8 & 0xff, ... This is
//      rxe's ~crc32_le() stored in little-endian memory.
//   3. A datagram here is the IP header through the last ICRC byte, exactly
//      (no Ethernet header, no Ethernet padding after it). Its IP header
//      length comes from its first byte: IPv4 IHL * 4, IPv6 40 (REQUIRES: no
//      IPv6 extension headers; the next header is UDP).
//   4. Pure functions, thread-safe, no allocation; they never read outside
//      the spans given. Malformed input yields IcrcStatus::kMalformed.
//   5. The CRC is linear: for two IPv4 packets that differ only in their
//      identification, ICRC(id) == ICRC(0) ^ icrc_ipv4_id_delta(length, id),
//      where the delta depends only on the IB packet's length (how far the
//      identification lies from the end of the covered bytes) and on id.
//      IcrcIdTolerance is the receiver's use of it (not thread-safe: one per
//      thread or under a lock).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace softverbs::wire {

enum class IcrcStatus : uint8_t { kOk = 0, kMismatch, kMalformed };

// The ICRC over headers given apart from the IB packet: `ip_udp` is the IP
// header followed by the 8-byte UDP header; `ib` the IB packet from the BTH
// to just before the ICRC. nullopt if `ip_udp` is not one IP header plus UDP
// or `ib` is shorter than a BTH.
[[nodiscard]] std::optional<uint32_t> icrc_compute(std::span<const uint8_t> ip_udp,
                                                   std::span<const uint8_t> ib);

// Writes the ICRC into the last four bytes of `datagram`.
[[nodiscard]] IcrcStatus icrc_generate(std::span<uint8_t> datagram);

// Compares the last four bytes of `datagram` with its ICRC.
[[nodiscard]] IcrcStatus icrc_check(std::span<const uint8_t> datagram);

// What an IPv4 identification `id` in place of 0 changes in the ICRC of an
// IB packet of `ib_length` bytes (BTH .. last ICRC byte) under a 20-byte
// IPv4 header (contract 5).
[[nodiscard]] uint32_t icrc_ipv4_id_delta(size_t ib_length, uint16_t id);

// The deltas of identifications 0 .. kIds-1 for one IB packet length at a
// time: a stream of full-MTU packets pays one table per length change (about
// a microsecond), then a load per packet.
class IcrcIdDeltas {
 public:
  // The most segments one GSO send may carry (UDP_MAX_SEGMENTS is 64 on
  // older kernels), so the most identifications a receiver accepts.
  static constexpr uint16_t kIds = 64;
  // icrc_ipv4_id_delta(ib_length, id). REQUIRES: id < kIds.
  [[nodiscard]] uint32_t delta(size_t ib_length, uint16_t id);
  // Whether `diff` is the delta of some identification 1 .. kIds-1.
  [[nodiscard]] bool is_delta(size_t ib_length, uint32_t diff);

 private:
  void build(size_t ib_length);
  size_t length_ = 0;  // 0: no table yet
  std::array<uint32_t, kIds> delta_{};
};

// A UDP receiver cannot see the IPv4 identification its datagram came with,
// and the ICRC covers it: Linux gives the segments of one UDP GSO send with
// DF set identifications 0, 1, 2, ... (one sent alone gets 0). This accepts
// an ICRC computed for identification 0 or for any k < kIds.
class IcrcIdTolerance {
 public:
  static constexpr uint16_t kIds = IcrcIdDeltas::kIds;
  // True when `got` (the ICRC the packet carries) is its ICRC for some
  // identification k < kIds, `id0` being its ICRC for identification 0.
  [[nodiscard]] bool accepts(uint32_t id0, uint32_t got, size_t ib_length) {
    return id0 == got || deltas_.is_delta(ib_length, id0 ^ got);
  }

 private:
  IcrcIdDeltas deltas_;
};

// Bytes of IP plus UDP header at the front of `datagram`, or 0 if its first
// bytes are not a plausible IPv4/IPv6 header.
[[nodiscard]] size_t ip_udp_header_length(std::span<const uint8_t> datagram);

}  // namespace softverbs::wire
