// The header the RDMA CM puts first in a REQ's (and SIDR_REQ's) private
// data when it connects by IP address (the "IP CM" private data of IBA
// annex A11, as Linux's rdma_cm writes it): version 0, the IP version in the
// high nibble of byte 1, the source port, then the source and destination
// addresses, each 16 bytes, an IPv4 address in the last 4.
//
// Contract: 36 bytes, big-endian (addresses and port stay in network order
// as the sockaddr holds them); decode() reads any bytes, the CM judges
// version and IP version. Value type.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softverbs::wire::cm {

struct CmaHeader {
  static constexpr size_t kBytes = 36;
  static constexpr uint8_t kVersion = 0;

  uint8_t cma_version = kVersion;
  uint8_t ip_version = 4;           // 4 or 6
  uint16_t src_port = 0;            // host order
  std::array<uint8_t, 16> src{};    // IPv4: bytes 12..15
  std::array<uint8_t, 16> dst{};

  void encode(uint8_t* out) const {
    out[0] = cma_version;
    out[1] = static_cast<uint8_t>(ip_version << 4);
    out[2] = static_cast<uint8_t>(src_port >> 8);
    out[3] = static_cast<uint8_t>(src_port);
    std::memcpy(out + 4, src.data(), 16);
    std::memcpy(out + 20, dst.data(), 16);
  }
  [[nodiscard]] static CmaHeader decode(const uint8_t* in) {
    CmaHeader h;
    h.cma_version = in[0];
    h.ip_version = in[1] >> 4;
    h.src_port = static_cast<uint16_t>(in[2] << 8 | in[3]);
    std::memcpy(h.src.data(), in + 4, 16);
    std::memcpy(h.dst.data(), in + 20, 16);
    return h;
  }
  friend bool operator==(const CmaHeader&, const CmaHeader&) = default;
};

}  // namespace softverbs::wire::cm
