#include "shm/port_link.h"

#include <cctype>
#include <cstring>
#include <string>

namespace softverbs::shm {
namespace {

constexpr uint32_t kClaimed = 1u << 24;
constexpr uint32_t kPaced = 1u << 16;

uint32_t pack(const LinkConfig& c) { return kClaimed | (c.paced ? kPaced : 0) | c.speed << 8 | c.width; }
LinkConfig unpack(uint32_t v) {
  return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), (v & kPaced) != 0};
}

struct Named {
  const char* name;
  uint8_t code;
};
constexpr Named kSpeeds[] = {{"sdr", 1}, {"ddr", 2}, {"qdr", 4}, {"fdr10", 8}, {"fdr", 16}, {"edr", 32}, {"hdr", 64},
                             {"ndr", 128}};
constexpr Named kWidths[] = {{"1x", 1}, {"2x", 16}, {"4x", 2}, {"8x", 4}, {"12x", 8}};

}  // namespace

unsigned link_lanes(uint8_t width) {
  switch (width) {
    case 1: return 1;
    case 16: return 2;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    default: return 0;
  }
}

uint64_t lane_data_mbps(uint8_t speed) {
  switch (speed) {
    case 1: return 2000;     // 2.5 Gb/s, 8b/10b
    case 2: return 4000;     // 5 Gb/s
    case 4: return 8000;     // 10 Gb/s
    case 8: return 10000;    // FDR10: 10.3125 Gb/s, 64b/66b
    case 16: return 13636;   // FDR: 14.0625 Gb/s
    case 32: return 25000;   // EDR: 25.78125 Gb/s
    case 64: return 50000;   // HDR: 53.125 Gb/s PAM4
    case 128: return 100000; // NDR
    default: return 0;
  }
}

bool parse_link_rate(const char* text, LinkConfig* out) {
  std::string s;
  for (const char* p = text; *p != '\0'; ++p)
    if (*p != '-' && *p != ' ') s += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
  for (const Named& w : kWidths) {
    const size_t n = std::strlen(w.name);
    if (s.compare(0, n, w.name) != 0) continue;
    for (const Named& sp : kSpeeds) {
      if (s.compare(n, std::string::npos, sp.name) != 0) continue;
      out->width = w.code;
      out->speed = sp.code;
      return true;
    }
  }
  return false;
}

LinkConfig claim_link(SegmentHeader& h, const LinkConfig& want) {
  uint32_t expected = 0;
  if (h.link.config.compare_exchange_strong(expected, pack(want), std::memory_order_acq_rel)) {
    // A QP's cached path state (transport/vl.h) includes whether it is paced.
    h.qos.generation.fetch_add(1, std::memory_order_release);
    return want;
  }
  return unpack(expected);
}

LinkConfig load_link(const SegmentHeader& h, const LinkConfig& fallback) {
  const uint32_t v = h.link.config.load(std::memory_order_acquire);
  return v == 0 ? fallback : unpack(v);
}

}  // namespace softverbs::shm
