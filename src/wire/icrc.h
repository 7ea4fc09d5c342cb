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
#pragma once

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

// Bytes of IP plus UDP header at the front of `datagram`, or 0 if its first
// bytes are not a plausible IPv4/IPv6 header.
[[nodiscard]] size_t ip_udp_header_length(std::span<const uint8_t> datagram);

}  // namespace softverbs::wire
