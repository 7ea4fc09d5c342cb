// The 40 bytes a UD receive buffer starts with (IBA 11.4.1.2): the GRH of the
// datagram when it had one. On RoCEv2 the "GRH" is the IP header (RoCEv2
// annex A17.4.5.1): an IPv6 header fills all 40 bytes; an IPv4 header fills
// the last 20 and the first 20 are zero — what rdma-core's
// ibv_init_ah_from_wc() and applications look for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/roce_udp.h"

namespace softverbs::wire {

inline constexpr size_t kUdGrhBytes = 40;

struct UdGrhFields {
  Gid sgid{};
  Gid dgid{};
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
  uint8_t hop_limit = 64;
  size_t ib_length = 0;  // BTH .. ICRC: the bytes the GRH's payload length counts
};

// InfiniBand: an IB GRH (next header 0x1B, IBA 8.3).
void write_ib_grh(std::span<uint8_t, kUdGrhBytes> out, const UdGrhFields& f);
// RoCEv2: the IP header the datagram carried (IPv4 when sgid is IPv4-mapped).
void write_roce_grh(std::span<uint8_t, kUdGrhBytes> out, const UdGrhFields& f);

// The network header type of a RoCEv2 UD receive, in the encoding mlx5
// devices report in ibv_wc.sl (Mellanox PRM, CQE "sl" for UD over RoCE:
// bits 2:0 the L3 header type). UCX's ud_verbs reads it there to know how
// many bytes of the DGID to compare; RoCE has no SL on the wire to report.
enum class RoceL3Type : uint8_t { kIpv6 = 0x1, kIpv4 = 0x2 };
inline RoceL3Type roce_l3_type(std::span<const uint8_t, kUdGrhBytes> grh) {
  // An IPv6 header starts the 40 bytes; an IPv4 one starts at byte 20.
  return (grh[0] >> 4) == 6 ? RoceL3Type::kIpv6 : RoceL3Type::kIpv4;
}

}  // namespace softverbs::wire
