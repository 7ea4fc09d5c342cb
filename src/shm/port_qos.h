// The port's quality-of-service tables (IBA 7.6.6 SL to VL mapping, 7.6.9
// VL arbitration), kept in the segment header (shm::PortQos) so that every
// process and the SMA see one copy (issue 20).
//
// Writers (an SMA Set) hold SegmentHeader::control and bump `generation`
// after the new values are stored; a reader that cached something derived
// from the tables (a QP's VL) re-reads only when `generation` moved, so the
// data path pays one load per message, never a lock.
#pragma once

#include <cstdint>

#include "shm/objects.h"

namespace softverbs::shm {

// PortInfo:VLCap and OperationalVLs encoding (IBA 14.2.5.6): 1 = VL0,
// 2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14.
inline constexpr uint8_t kVlCap = 4;
inline constexpr uint8_t kVl15 = 15;  // the management lane: an SL mapped here is discarded

constexpr unsigned data_vls(uint8_t encoding) { return encoding == 0 ? 1 : encoding >= 5 ? 15 : 1u << (encoding - 1); }

// One entry of a VL arbitration table (IBA 14.2.5.9).
struct VlArbEntry {
  uint8_t vl = 0;
  uint8_t weight = 0;  // in 64-byte units; 0 skips the entry
  bool operator==(const VlArbEntry&) const = default;
};

// A plain copy of PortQos, for the SMA and tests.
struct QosTables {
  uint8_t oper_vls = kVlCap;
  uint8_t vl_high_limit = 0;
  uint8_t sl_to_vl[16] = {};
  VlArbEntry low[kVlArbCap];
  VlArbEntry high[kVlArbCap];
  bool operator==(const QosTables&) const = default;
};

// What a port boots with: every data VL operational, SL n on VL n mod 8,
// and every data VL once in the low-priority table with one MTU's weight
// (the high-priority table empty, VLHighLimit 0).
QosTables default_qos();

QosTables load_qos(const SegmentHeader& h);
// REQUIRES: the caller holds SegmentHeader::control.
void store_qos(SegmentHeader& h, const QosTables& t);

// The VL of `sl` as the table stands now (kVl15: discard).
inline uint8_t vl_of_sl(const SegmentHeader& h, uint8_t sl) {
  return h.qos.sl_to_vl[sl & 15].load(std::memory_order_relaxed);
}

}  // namespace softverbs::shm
