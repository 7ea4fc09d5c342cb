// The port's link rate (issue 20): width x speed as ibv_port_attr and
// PortInfo report them, and whether the data path paces to it. Written once
// into the segment by the first process that attaches (claim_link), from its
// environment (verbs/port_config.h); every later process reads it there, so
// all processes of a device agree.
#pragma once

#include <cstdint>

#include "shm/objects.h"

namespace softverbs::shm {

struct LinkConfig {
  uint8_t width = 2;   // ibv_port_attr.active_width: 1 = 1X, 2 = 4X, 4 = 8X, 8 = 12X, 16 = 2X
  uint8_t speed = 32;  // ibv_port_attr.active_speed: 1 SDR ... 32 EDR, 64 HDR, 128 NDR
  bool paced = false;
  bool operator==(const LinkConfig&) const = default;
};

// Lanes of a width encoding; 0 for one that is not.
unsigned link_lanes(uint8_t width);
// Data rate of one lane in Mb/s, after the line code (8b/10b up to QDR,
// 64b/66b from FDR10); 0 for a speed encoding that is not.
uint64_t lane_data_mbps(uint8_t speed);
// The link's data rate in Mb/s: what paced transmit honours.
inline uint64_t link_data_mbps(const LinkConfig& c) { return link_lanes(c.width) * lane_data_mbps(c.speed); }

// "4xSDR", "1XEDR", "12x-hdr" (width, then speed; case and a '-' or ' '
// between them do not matter). False for anything else.
bool parse_link_rate(const char* text, LinkConfig* out);

// Stores `want` unless an earlier process did; returns what the port has.
LinkConfig claim_link(SegmentHeader& h, const LinkConfig& want);
// What the port has; `fallback` before any process claimed it.
LinkConfig load_link(const SegmentHeader& h, const LinkConfig& fallback);

}  // namespace softverbs::shm
