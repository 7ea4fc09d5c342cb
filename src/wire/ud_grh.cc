#include "wire/ud_grh.h"

#include <cstring>

namespace softverbs::wire {
namespace {

bool is_ipv4_mapped(const Gid& g) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.data(), kPrefix, sizeof kPrefix) == 0;
}

}  // namespace

void write_ib_grh(std::span<uint8_t, kUdGrhBytes> out, const UdGrhFields& f) {
  uint8_t* p = out.data();
  const uint32_t word0 = (6u << 28) | (uint32_t{f.traffic_class} << 20) | (f.flow_label & 0xfffff);
  p[0] = static_cast<uint8_t>(word0 >> 24);
  p[1] = static_cast<uint8_t>(word0 >> 16);
  p[2] = static_cast<uint8_t>(word0 >> 8);
  p[3] = static_cast<uint8_t>(word0);
  p[4] = static_cast<uint8_t>(f.ib_length >> 8);
  p[5] = static_cast<uint8_t>(f.ib_length);
  p[6] = 0x1b;  // next header: the IBA transport
  p[7] = f.hop_limit;
  std::memcpy(p + 8, f.sgid.data(), 16);
  std::memcpy(p + 24, f.dgid.data(), 16);
}

void write_roce_grh(std::span<uint8_t, kUdGrhBytes> out, const UdGrhFields& f) {
  std::memset(out.data(), 0, kUdGrhBytes);
  RoceUdpHeader h;
  h.version = is_ipv4_mapped(f.sgid) ? IpVersion::kV4 : IpVersion::kV6;
  h.src = f.sgid;
  h.dst = f.dgid;
  h.traffic_class = f.traffic_class;
  h.hop_limit = f.hop_limit;
  h.flow_label = f.flow_label;
  uint8_t headers[kIpv6HeaderBytes + kUdpHeaderBytes];
  if (roce_write_headers(headers, h, f.ib_length) == 0) return;
  if (h.version == IpVersion::kV4)
    std::memcpy(out.data() + 20, headers, kIpv4HeaderBytes);
  else
    std::memcpy(out.data(), headers, kIpv6HeaderBytes);
}

}  // namespace softverbs::wire
