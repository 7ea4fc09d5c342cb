#include "mad/pma.h"

#include <algorithm>
#include <cstring>

#include "mad/mad_layout.h"
#include "shm/op_select.h"

namespace softverbs::mad {
namespace {

constexpr uint8_t kPmaClassVersion = 1;
constexpr uint8_t kAllPorts = 0xff;

namespace class_port_info {  // IBA 13.4.8.1
using BaseVersion = BeField<0, 1>;
using ClassVersion = BeField<1, 1>;
using CapabilityMask = BeField<2, 2>;
using RespTimeValue = Field<7, 3, 5>;
}  // namespace class_port_info
// IBA 16.1.3.1 PerfMgt ClassPortInfo:CapabilityMask.
constexpr uint16_t kAllPortSelect = 1u << 8;
constexpr uint16_t kExtendedWidth = 1u << 9;

namespace port_counters {  // IBA 16.1.3.5
using PortSelect = BeField<1, 1>;
using CounterSelect = BeField<2, 2>;
using SymbolErrorCounter = BeField<4, 2>;
using PortRcvErrors = BeField<8, 2>;
using PortXmitDiscards = BeField<14, 2>;
using Vl15Dropped = BeField<22, 2>;
using PortXmitData = BeField<24, 4>;
using PortRcvData = BeField<28, 4>;
using PortXmitPkts = BeField<32, 4>;
using PortRcvPkts = BeField<36, 4>;
}  // namespace port_counters

namespace port_counters_ext {  // IBA 16.1.4.11
using PortSelect = BeField<1, 1>;
using CounterSelect = BeField<2, 2>;
using PortXmitData = BeField<8, 8>;
using PortRcvData = BeField<16, 8>;
using PortXmitPkts = BeField<24, 8>;
using PortRcvPkts = BeField<32, 8>;
using PortUnicastXmitPkts = BeField<40, 8>;
using PortUnicastRcvPkts = BeField<48, 8>;
using PortMulticastXmitPkts = BeField<56, 8>;
using PortMulticastRcvPkts = BeField<64, 8>;
}  // namespace port_counters_ext

// IBA 16.1.4.7 PortXmitDataSL, 16.1.4.8 PortRcvDataSL: sixteen 32-bit
// counters, one per SL; PortVLXmitWaitCounters: sixteen 16-bit ones, one per
// VL. CounterSelect bit n names the n-th.
namespace per_lane {
using PortSelect = BeField<1, 1>;
using CounterSelect = BeField<2, 2>;
constexpr size_t kFirst = 4;  // counter n at kFirst + n x its width
}  // namespace per_lane

// IBA 16.1.4.2 PortRcvErrorDetails, 16.1.4.3 PortXmitDiscardDetails: after
// PortSelect and CounterSelect, 16-bit counters; CounterSelect bit n names
// the n-th. Fields nothing here counts stay 0 (-1 below).
namespace details {
constexpr size_t kFirst = 4;
constexpr size_t kWidth = 2;
constexpr int kRcvError[6] = {kLocalPhysicalErrors, kMalformedPktErrors,
                              -1,   // PortBufferOverrunErrors: no link-level flow control to overrun
                              -1,   // PortDLIDMappingErrors: a switch relay's
                              -1,   // PortVLMappingErrors: a switch relay's
                              -1};  // PortLoopingErrors: a switch relay's
constexpr int kXmitDiscard[4] = {kInactiveDiscards,
                                 -1,   // PortNeighborMTUDiscards: an oversized request fails when posted
                                 -1,   // PortSwLifetimeLimitDiscards: switches only
                                 -1};  // PortSwHOQLifetimeLimitDiscards: switches only
}  // namespace details

// IBA 16.1.4, attributes 0x17-0x1B (the layouts libibmad decodes):
// PortOpRcvCounters, PortFlowCtlCounters and the per-VL ones put an OpCode
// (the Op ones: the BTH opcode counted, select_opcode below) before
// PortSelect, and their counters after CounterSelect.
namespace op_counters {
using OpCode = BeField<0, 1>;
constexpr size_t kWidth = 4;
constexpr int kOpRcv[2] = {kOpRcvPkts, kOpRcvData};
// PortXmitFlowPkts, PortRcvFlowPkts: a software link has no link-level flow
// control, so no flow control packet is ever sent or received.
constexpr int kFlowCtl[2] = {-1, -1};
// PortVLXmitFlowCtlUpdateErrors: sixteen 2-bit fields, all 0 for the same
// reason (no flow control update is ever due, so none is ever late).
constexpr int kNone[1] = {-1};
}  // namespace op_counters

// The PortCounters fields stop at their largest value rather than wrap.
template <class F>
void set_saturated(uint8_t* d, uint64_t v) {
  F::set(d, std::min<uint64_t>(v, F::kMask));
}

// CounterSelect bit -> the counter it clears (-1: one we keep at zero anyway).
constexpr int kPortCountersSelect[16] = {
    kSymbolErrors, -1, -1, kRcvErrors, -1, -1, kXmitDiscards, -1, -1, -1, -1, kVl15Dropped,
    kXmitData,     kRcvData, kXmitPkts, kRcvPkts};
constexpr int kExtendedSelect[8] = {kXmitData, kRcvData, kXmitPkts, kRcvPkts,
                                    kXmitPkts, kRcvPkts, kMcastXmitPkts, kMcastRcvPkts};

PmaMask select_mask(const int* table, unsigned n, uint16_t select) {
  PmaMask mask;
  for (unsigned bit = 0; bit < n; ++bit)
    if ((select & (1u << bit)) != 0 && table[bit] >= 0) mask.set(static_cast<size_t>(table[bit]));
  return mask;
}

// Sixteen counters of `Width` bytes from PmaCounter `first` on; they stop
// at their largest value rather than wrap.
template <size_t Width>
MadStatus answer_per_lane(const PmaCounters& now, bool set, unsigned first, const uint8_t* in_data, uint8_t* d,
                          PmaMask* reset) {
  using namespace per_lane;
  using Counter = BeField<0, Width>;
  const uint8_t port = PortSelect::get(in_data);
  const uint16_t select = CounterSelect::get(in_data);
  PortSelect::set(d, port);
  CounterSelect::set(d, select);
  for (unsigned n = 0; n < 16; ++n) {
    if (set && (select & (1u << n)) != 0) reset->set(first + n);
    // Cleared by CounterSelect, or restarted by a new OpCode.
    const bool cleared = reset->test(first + n);
    Counter::set(d + kFirst + Width * n, cleared ? 0 : std::min<uint64_t>(now.v[first + n], Counter::kMask));
  }
  return MadStatus::kOk;
}

// A details attribute: `n` fields of `Width` bytes fed by `fields`
// (PmaCounter, or -1 for none); they stop at their largest value rather
// than wrap.
template <size_t Width = details::kWidth>
MadStatus answer_details(const PmaCounters& now, bool set, const int* fields, unsigned n, const uint8_t* in_data,
                         uint8_t* d, PmaMask* reset) {
  using Counter = BeField<0, Width>;
  const uint16_t select = per_lane::CounterSelect::get(in_data);
  per_lane::PortSelect::set(d, per_lane::PortSelect::get(in_data));
  per_lane::CounterSelect::set(d, select);
  for (unsigned i = 0; i < n; ++i) {
    if (fields[i] < 0) continue;
    if (set && (select & (1u << i)) != 0) reset->set(static_cast<size_t>(fields[i]));
    const bool cleared = reset->test(static_cast<size_t>(fields[i]));
    Counter::set(d + details::kFirst + Width * i,
                 cleared ? 0 : std::min<uint64_t>(now.v[fields[i]], Counter::kMask));
  }
  return MadStatus::kOk;
}

// The OpCode of PortOpRcvCounters, PortVLOpPackets or PortVLOpData (IBA
// 16.1.4): a Set's becomes the port's selector `s` in `*select` (the
// counters from `first` to `last` then count only packets with that BTH
// opcode, and a new opcode restarts them all: what they held counted
// another); the answer names the opcode counted. Without `select` (a
// port whose data path keeps no per-opcode counts) and while none is
// applied, every opcode is counted and the OpCode is echoed.
void select_opcode(bool set, shm::OpSelector s, unsigned first, unsigned last, const uint8_t* in_data, uint8_t* d,
                   uint32_t* select, PmaMask* reset) {
  const uint8_t asked = op_counters::OpCode::get(in_data);
  if (select == nullptr) {
    op_counters::OpCode::set(d, asked);
    return;
  }
  if (set) {
    const uint32_t was = *select;
    *select = shm::with_op(was, s, asked);
    if (*select != was)
      for (unsigned i = first; i <= last; ++i) reset->set(i);
  }
  op_counters::OpCode::set(d, shm::op_applied(*select, s) ? shm::op_code(*select, s) : asked);
}

void fill_port_counters(const PmaCounters& c, uint8_t* d) {
  using namespace port_counters;
  set_saturated<SymbolErrorCounter>(d, c.v[kSymbolErrors]);
  set_saturated<PortRcvErrors>(d, c.v[kRcvErrors]);
  set_saturated<PortXmitDiscards>(d, c.v[kXmitDiscards]);
  set_saturated<Vl15Dropped>(d, c.v[kVl15Dropped]);
  set_saturated<PortXmitData>(d, c.v[kXmitData]);
  set_saturated<PortRcvData>(d, c.v[kRcvData]);
  set_saturated<PortXmitPkts>(d, c.v[kXmitPkts]);
  set_saturated<PortRcvPkts>(d, c.v[kRcvPkts]);
}

void fill_port_counters_ext(const PmaCounters& c, uint8_t* d) {
  using namespace port_counters_ext;
  PortXmitData::set(d, c.v[kXmitData]);
  PortRcvData::set(d, c.v[kRcvData]);
  PortXmitPkts::set(d, c.v[kXmitPkts]);
  PortRcvPkts::set(d, c.v[kRcvPkts]);
  // Every packet the port carries is unicast but those counted as multicast.
  PortUnicastXmitPkts::set(d, c.v[kXmitPkts] - std::min(c.v[kXmitPkts], c.v[kMcastXmitPkts]));
  PortUnicastRcvPkts::set(d, c.v[kRcvPkts] - std::min(c.v[kRcvPkts], c.v[kMcastRcvPkts]));
  PortMulticastXmitPkts::set(d, c.v[kMcastXmitPkts]);
  PortMulticastRcvPkts::set(d, c.v[kMcastRcvPkts]);
}

// The attributes answered here that start with PortSelect (IBA 16.1.3.5,
// 16.1.4): one port of the node, or all of them.
bool has_port_select(uint16_t attr) {
  switch (static_cast<PmaAttr>(attr)) {
    case PmaAttr::kClassPortInfo: return false;
    case PmaAttr::kPortCounters:
    case PmaAttr::kPortCountersExtended:
    case PmaAttr::kPortXmitDataSl:
    case PmaAttr::kPortRcvDataSl:
    case PmaAttr::kPortVlXmitWaitCounters:
    case PmaAttr::kPortRcvErrorDetails:
    case PmaAttr::kPortXmitDiscardDetails:
    case PmaAttr::kPortOpRcvCounters:
    case PmaAttr::kPortFlowCtlCounters:
    case PmaAttr::kPortVlOpPackets:
    case PmaAttr::kPortVlOpData:
    case PmaAttr::kPortVlXmitFlowCtlUpdateErrors: return true;
  }
  return false;  // answered 0x0C whatever it selects
}

bool port_selectable(uint8_t port, unsigned num_ports) {
  return port == kAllPorts || (port >= 1 && port <= num_ports);
}

// The counters PortSelect names: one port's, or the sum of all.
PmaCounters selected(const PmaCounters* ports, unsigned num_ports, uint8_t port) {
  if (port != kAllPorts) return ports[port - 1];
  PmaCounters sum;
  for (unsigned p = 0; p < num_ports; ++p)
    for (unsigned i = 0; i < kPmaCounterCount; ++i) sum.v[i] += ports[p].v[i];
  return sum;
}

MadStatus answer(const PmaCounters& now, uint8_t method, uint16_t attr, const uint8_t* in_data, uint8_t* d,
                 PmaMask* reset, uint32_t* op_select) {
  const bool set = method == static_cast<uint8_t>(MethodId::kSet);
  if (!set && method != static_cast<uint8_t>(MethodId::kGet)) return MadStatus::kMethodUnsupported;
  switch (static_cast<PmaAttr>(attr)) {
    case PmaAttr::kClassPortInfo:
      if (set) return MadStatus::kAttributeUnsupported;
      class_port_info::BaseVersion::set(d, kMadBaseVersion);
      class_port_info::ClassVersion::set(d, kPmaClassVersion);
      // Not bit 12 (PortCounters:PortXmitWait): the link as a whole never
      // idles with data waiting here, so that field stays 0 and is not
      // offered; the per-VL waits (PortVLXmitWaitCounters) need no bit,
      // nor do PortRcvErrorDetails, PortXmitDiscardDetails, PortOpRcvCounters,
      // PortFlowCtlCounters, PortVLOpPackets, PortVLOpData and
      // PortVLXmitFlowCtlUpdateErrors (optional attributes without a
      // capability bit: a PMA without them answers 0x0C).
      class_port_info::CapabilityMask::set(d, kAllPortSelect | kExtendedWidth);
      class_port_info::RespTimeValue::set(d, 16);
      return MadStatus::kOk;
    case PmaAttr::kPortCounters:
    case PmaAttr::kPortCountersExtended: {
      const bool ext = static_cast<PmaAttr>(attr) == PmaAttr::kPortCountersExtended;
      // Both layouts put PortSelect and CounterSelect in the same place.
      const uint8_t port = port_counters::PortSelect::get(in_data);
      PmaCounters shown = now;
      if (set) {
        const uint16_t select = port_counters::CounterSelect::get(in_data);
        *reset = ext ? select_mask(kExtendedSelect, 8, select) : select_mask(kPortCountersSelect, 16, select);
        for (unsigned i = 0; i < kPmaCounterCount; ++i)
          if (reset->test(i)) shown.v[i] = 0;
      }
      port_counters::PortSelect::set(d, port);
      port_counters::CounterSelect::set(d, port_counters::CounterSelect::get(in_data));
      if (ext) fill_port_counters_ext(shown, d);
      else fill_port_counters(shown, d);
      return MadStatus::kOk;
    }
    case PmaAttr::kPortXmitDataSl:
      return answer_per_lane<4>(now, set, kXmitDataSl0, in_data, d, reset);
    case PmaAttr::kPortRcvDataSl:
      return answer_per_lane<4>(now, set, kRcvDataSl0, in_data, d, reset);
    case PmaAttr::kPortVlXmitWaitCounters:  // IBA 16.1.4: ticks a VL had data and sent none
      return answer_per_lane<2>(now, set, kXmitWaitVl0, in_data, d, reset);
    case PmaAttr::kPortRcvErrorDetails:
      return answer_details(now, set, details::kRcvError, 6, in_data, d, reset);
    case PmaAttr::kPortXmitDiscardDetails:
      return answer_details(now, set, details::kXmitDiscard, 4, in_data, d, reset);
    case PmaAttr::kPortOpRcvCounters:
      select_opcode(set, shm::OpSelector::kOpRcv, kOpRcvPkts, kOpRcvData, in_data, d, op_select, reset);
      return answer_details<op_counters::kWidth>(now, set, op_counters::kOpRcv, 2, in_data, d, reset);
    case PmaAttr::kPortFlowCtlCounters:
      return answer_details<op_counters::kWidth>(now, set, op_counters::kFlowCtl, 2, in_data, d, reset);
    case PmaAttr::kPortVlOpPackets:  // packets received per VL
      select_opcode(set, shm::OpSelector::kVlOpPackets, kRcvPktsVl0, kRcvPktsVl0 + 15, in_data, d, op_select, reset);
      return answer_per_lane<2>(now, set, kRcvPktsVl0, in_data, d, reset);
    case PmaAttr::kPortVlOpData:  // 4-octet words received per VL, as PortRcvData counts them
      select_opcode(set, shm::OpSelector::kVlOpData, kRcvDataVl0, kRcvDataVl0 + 15, in_data, d, op_select, reset);
      return answer_per_lane<4>(now, set, kRcvDataVl0, in_data, d, reset);
    case PmaAttr::kPortVlXmitFlowCtlUpdateErrors:
      return answer_details(now, set, op_counters::kNone, 1, in_data, d, reset);
  }
  return MadStatus::kAttributeUnsupported;
}

}  // namespace

Disposition answer_pma(const PmaCounters& now, const uint8_t* in, size_t len, uint8_t* out, PmaMask* reset,
                       uint32_t* op_select) {
  return answer_pma_ports(&now, 1, in, len, out, reset, op_select);
}

Disposition answer_pma_ports(const PmaCounters* ports, unsigned num_ports, const uint8_t* in, size_t len,
                             uint8_t* out, PmaMask* reset, uint32_t* op_select) {
  for (unsigned p = 0; p < num_ports; ++p) reset[p].reset();
  if (in == nullptr || len < kMadBytes) return Disposition::kDrop;
  if (MgmtClass::get(in) != static_cast<uint8_t>(MgmtClassId::kPerfMgmt)) return Disposition::kDrop;
  if (ResponseBit::get(in) != 0) return Disposition::kDrop;
  std::memcpy(out, in, kMadBytes);
  const uint8_t method = Method::get(in);
  const uint16_t attr = AttributeId::get(in);
  const uint8_t port = port_counters::PortSelect::get(in + kGsiDataOffset);
  MadStatus status;
  PmaMask mask;
  if (BaseVersion::get(in) != kMadBaseVersion || ClassVersion::get(in) != kPmaClassVersion) {
    status = MadStatus::kBadVersion;
  } else if (has_port_select(attr) && !port_selectable(port, num_ports) &&
             (method == static_cast<uint8_t>(MethodId::kGet) || method == static_cast<uint8_t>(MethodId::kSet))) {
    // A port the node does not have (IBA 13.4.7: an invalid attribute field).
    std::memset(out + kGsiDataOffset, 0, kGsiDataBytes);
    status = MadStatus::kInvalidField;
  } else {
    std::memset(out + kGsiDataOffset, 0, kGsiDataBytes);
    const PmaCounters now = port_selectable(port, num_ports) ? selected(ports, num_ports, port) : PmaCounters{};
    // A Set that fails changes no selector.
    uint32_t select = op_select != nullptr ? *op_select : 0;
    status = answer(now, method, attr, in + kGsiDataOffset, out + kGsiDataOffset, &mask,
                    op_select != nullptr ? &select : nullptr);
    if (status == MadStatus::kOk && op_select != nullptr) *op_select = select;
  }
  if (status == MadStatus::kOk) {
    // A Set of all ports clears each of them.
    for (unsigned p = 0; p < num_ports; ++p)
      if (port == kAllPorts || port == p + 1) reset[p] = mask;
  } else if (method == static_cast<uint8_t>(MethodId::kSet)) {
    // A failed Set echoes what it was given; a failed Get carries nothing.
    std::memcpy(out + kGsiDataOffset, in + kGsiDataOffset, kGsiDataBytes);
  }
  Method::set(out, static_cast<uint8_t>(MethodId::kGet));
  ResponseBit::set(out, 1);
  Status::set(out, static_cast<uint16_t>(status));
  return Disposition::kRespond;
}

}  // namespace softverbs::mad
