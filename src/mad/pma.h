// The performance management agent of the device's port (IBA 16.1, class
// 0x04): ClassPortInfo, PortCounters, PortCountersExtended, PortXmitDataSL,
// PortRcvDataSL, PortVLXmitWaitCounters, PortRcvErrorDetails,
// PortXmitDiscardDetails, PortOpRcvCounters, PortFlowCtlCounters,
// PortVLOpPackets, PortVLOpData and PortVLXmitFlowCtlUpdateErrors, Get and
// Set
// (Set clears the counters its CounterSelect names). Pure: the caller hands
// in the counters as they stand since the last reset and applies the reset
// the answer asks for (mad/pma_counters.h keeps them).
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>

#include "mad/sma.h"

namespace softverbs::mad {

// The port's counters, since their last reset, in the units of the wire:
// data in 4-octet words from the LRH to the ICRC, packets, error events.
enum PmaCounter : unsigned {
  kSymbolErrors,
  kRcvErrors,
  kXmitDiscards,
  kXmitData,
  kRcvData,
  kXmitPkts,
  kRcvPkts,
  kMcastXmitPkts,
  kMcastRcvPkts,
  kXmitDataSl0,                  // PortXmitDataSL, SL 0..15
  kRcvDataSl0 = kXmitDataSl0 + 16,  // PortRcvDataSL
  kVl15Dropped = kRcvDataSl0 + 16,  // SMPs VL15's buffer had no room for
  kXmitWaitVl0,                     // PortVLXmitWaitCounters, VL 0..15, in ticks
  // PortRcvErrorDetails and PortXmitDiscardDetails (IBA 16.1.4.2, 16.1.4.3):
  // the fields something here counts (docs/DESIGN.md says which feeds which).
  kLocalPhysicalErrors = kXmitWaitVl0 + 16,
  kMalformedPktErrors,
  kInactiveDiscards,
  // PortVLOpPackets and PortVLOpData (0x19, 0x1A): what the port
  // received per VL, the per-SL counts mapped through the port's SL2VL
  // table when read; every opcode, or those of the opcode a Set selected.
  kRcvPktsVl0,
  kRcvDataVl0 = kRcvPktsVl0 + 16,
  // PortOpRcvCounters (0x17): every packet received, the same
  // figures as PortRcvPkts/PortRcvData but reset on their own, or those
  // with the opcode a Set selected.
  kOpRcvPkts = kRcvDataVl0 + 16,
  kOpRcvData,
  // What the port sent per VL, the same way from the per-SL transmit counts:
  // no attribute of the port's own; the facing switch port of a topology
  // received it (mirror_pma_counters: its PortVLOpPackets/PortVLOpData).
  kXmitPktsVl0,
  kXmitDataVl0 = kXmitPktsVl0 + 16,
  kPmaCounterCount = kXmitDataVl0 + 16,
};
// One bit per PmaCounter: the counters a Set clears.
using PmaMask = std::bitset<kPmaCounterCount>;
// PortVLXmitWait's tick (the spec leaves its length to the port): long
// enough that the 16-bit counters last seconds of a VL sharing the link.
inline constexpr uint64_t kXmitWaitTickNs = 64'000;
struct PmaCounters {
  uint64_t v[kPmaCounterCount] = {};
};

enum class PmaAttr : uint16_t {
  kClassPortInfo = 0x0001,
  kPortCounters = 0x0012,
  kPortCountersExtended = 0x001d,
  kPortXmitDataSl = 0x0036,
  kPortRcvDataSl = 0x0037,
  kPortVlXmitWaitCounters = 0x001c,
  kPortRcvErrorDetails = 0x0015,
  kPortXmitDiscardDetails = 0x0016,
  kPortOpRcvCounters = 0x0017,
  kPortFlowCtlCounters = 0x0018,
  kPortVlOpPackets = 0x0019,
  kPortVlOpData = 0x001a,
  kPortVlXmitFlowCtlUpdateErrors = 0x001b,
};

// REQUIRES: `out` holds kMadBytes. On a Set, `*reset` gets one bit per
// PmaCounter to clear (the answer already shows them cleared); else 0.
// A one-port node: PortSelect 1 or 0xFF (all ports).
// `op_select`, when given, holds the port's OpCode selectors
// (shm/op_select.h): a Set of PortOpRcvCounters, PortVLOpPackets or
// PortVLOpData stores its OpCode there (a new opcode restarts that
// attribute's counters: `*reset` names them), and the answers name the
// opcode counted. The caller makes `now` count accordingly. Without it the
// OpCode is echoed and every opcode is counted.
Disposition answer_pma(const PmaCounters& now, const uint8_t* in, size_t len, uint8_t* out, PmaMask* reset,
                       uint32_t* op_select = nullptr);

// The same for a node of `num_ports` ports (a switch, a CA of several):
// `ports[p - 1]` holds port p's counters, and PortSelect names one of them
// or 0xFF, all of them summed (IBA 16.1.3.5, ClassPortInfo AllPortSelect).
// A port the node lacks is answered with status 0x1C (invalid field).
// REQUIRES: `ports` and `reset` hold `num_ports` entries; on a Set
// `reset[p - 1]` gets port p's counters to clear.
Disposition answer_pma_ports(const PmaCounters* ports, unsigned num_ports, const uint8_t* in, size_t len,
                             uint8_t* out, PmaMask* reset, uint32_t* op_select = nullptr);

}  // namespace softverbs::mad
