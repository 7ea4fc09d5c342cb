#include "mad/sma.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "mad/mad_layout.h"
#include "mad/smp_fields.h"

namespace softverbs::mad {
namespace {

constexpr uint8_t kSmaClassVersion = 1;
constexpr uint8_t kLinkWidth1x4x = 3;
// What the port supports and enables: every speed up to the active one.
uint8_t speed_supported(const PortView& p) { return static_cast<uint8_t>(p.speed_active * 2 - 1); }
uint8_t speed_ext_supported(const PortView& p) {
  return p.speed_ext_active == 0 ? 0 : static_cast<uint8_t>(p.speed_ext_active * 2 - 1);
}
constexpr uint8_t kLinkDownPolling = 2;
constexpr uint8_t kRespTimeValue = 16;
constexpr uint8_t kSmStateMaster = 3;
constexpr uint32_t kIsSm = 1u << 1;
constexpr unsigned kPKeysPerBlock = 32;

// Fills the attribute's data; the status to answer with.
MadStatus fill_node_info(const PortView& p, uint8_t* d) {
  node_info::BaseVersion::set(d, kMadBaseVersion);
  node_info::ClassVersion::set(d, kSmaClassVersion);
  node_info::NodeType::set(d, p.node_type);
  node_info::NumPorts::set(d, p.num_ports);
  node_info::SystemImageGuid::set(d, p.sys_image_guid);
  node_info::NodeGuid::set(d, p.node_guid);
  node_info::PortGuid::set(d, p.port_guid);
  node_info::PartitionCap::set(d, p.partition_cap);
  node_info::DeviceId::set(d, p.device_id);
  node_info::Revision::set(d, p.revision);
  node_info::LocalPortNum::set(d, p.arrival_port);
  node_info::VendorId::set(d, p.vendor_id);
  return MadStatus::kOk;
}

// A CA answers for the port the SMP arrived on (port 0) or names it, a
// switch for any of its ports (port 0 its own); the caller hands in the view
// of the port named. Bit 31 says the SM knows the extended speed fields
// (IBA 14.2.5.6; ibportstate sets it), which this SMA always fills.
constexpr uint32_t kSmSupportsExtendedSpeeds = 1u << 31;
bool port_info_modifier_ok(const PortView& p, uint32_t modifier) {
  return (modifier & ~kSmSupportsExtendedSpeeds) <= p.num_ports;
}

MadStatus fill_port_info(const PortView& p, uint32_t modifier, uint8_t* d) {
  if (!port_info_modifier_ok(p, modifier)) return MadStatus::kInvalidField;
  using namespace port_info;
  MKey::set(d, p.m_key);
  MKeyProtectBits::set(d, p.m_key_protect);
  GidPrefix::set(d, p.gid_prefix);
  Lid::set(d, p.lid);
  MasterSmLid::set(d, p.sm_lid);
  CapabilityMask::set(d, p.cap_mask);
  LocalPortNum::set(d, p.arrival_port);  // IBA 14.2.5.6: the port the SMP came in on
  LinkWidthEnabled::set(d, p.width_active);
  LinkWidthSupported::set(d, kLinkWidth1x4x | p.width_active);
  LinkWidthActive::set(d, p.width_active);
  LinkSpeedSupported::set(d, speed_supported(p));
  PortState::set(d, p.port_state);
  PortPhysicalState::set(d, p.phys_state);
  LinkDownDefaultState::set(d, kLinkDownPolling);
  Lmc::set(d, p.lmc);
  LinkSpeedActive::set(d, p.speed_active);
  LinkSpeedEnabled::set(d, speed_supported(p));
  NeighborMtu::set(d, p.mtu);
  MasterSmSl::set(d, p.sm_sl);
  VlCap::set(d, p.vl_cap);
  VlHighLimit::set(d, p.qos.vl_high_limit);
  VlArbHighCap::set(d, shm::kVlArbCap);
  VlArbLowCap::set(d, shm::kVlArbCap);
  MtuCap::set(d, p.mtu);
  VlStallCount::set(d, 7);
  HoqLife::set(d, 31);
  OperationalVls::set(d, p.qos.oper_vls);
  PKeyViolations::set(d, p.pkey_violations);
  GuidCap::set(d, 1);
  SubnetTimeout::set(d, p.subnet_timeout);
  RespTimeValue::set(d, kRespTimeValue);
  LinkSpeedExtActive::set(d, p.speed_ext_active);
  LinkSpeedExtSupported::set(d, speed_ext_supported(p));
  LinkSpeedExtEnabled::set(d, speed_ext_supported(p));
  return MadStatus::kOk;
}

// IBA 14.2.5.6 PortInfo Set. Under the built-in SM, LIDs, MTU, link state
// and speeds belong to it (the segment header) and the data path, so for
// those the SMA takes a Set that leaves them as they are or uses the
// encoding for "no change" (C14-24.x: 0 for PortState, PortPhysicalState,
// LinkDownDefaultState, the Enabled fields; 255/15/30 for "set to
// supported"), and answers 0x1C, changing nothing, for any other value.
// Under an external SM (PortView::external_sm) the LID, the SM's LID and
// the logical state are its to set: ARMED from INIT, ACTIVE from ARMED,
// DOWN restarts the link (back to INIT); INIT itself is not settable.
// OperationalVLs (1 up to VLCap; 0 keeps it) and VLHighLimit (any value) are
// the QoS fields an SM programs: they go to `qos`. Read-only fields are
// ignored, as the IBA requires.
MadStatus check_port_info_set(const PortView& p, uint32_t modifier, const uint8_t* in, PortView* next) {
  if (!port_info_modifier_ok(p, modifier)) return MadStatus::kInvalidField;
  using namespace port_info;
  auto keeps = [](uint64_t v, uint64_t current, std::initializer_list<uint64_t> no_change) {
    if (v == current) return true;
    for (uint64_t n : no_change)
      if (v == n) return true;
    return false;
  };
  constexpr uint8_t kDown = 1, kInit = 2, kArmed = 3, kActive = 4;
  const uint8_t state = static_cast<uint8_t>(PortState::get(in));
  bool sm_fields_ok;
  if (p.external_sm) {
    const bool transition = state == 0 || state == kDown || (state == kArmed && (p.port_state == kInit || p.port_state == kArmed)) ||
                            (state == kActive && (p.port_state == kArmed || p.port_state == kActive));
    sm_fields_ok = Lid::get(in) < 0xc000 && transition;
    if (sm_fields_ok) {
      next->lid = static_cast<uint16_t>(Lid::get(in));
      next->sm_lid = static_cast<uint16_t>(MasterSmLid::get(in));
      if (state == kDown) next->port_state = kInit;
      else if (state != 0) next->port_state = state;
    }
  } else {
    sm_fields_ok = Lid::get(in) == p.lid && MasterSmLid::get(in) == p.sm_lid && keeps(state, p.port_state, {0});
  }
  const uint8_t oper_vls = static_cast<uint8_t>(OperationalVls::get(in));
  const bool ok = sm_fields_ok && MKey::get(in) == 0 && MKeyLeasePeriod::get(in) == 0 && MKeyProtectBits::get(in) == 0 &&
                  GidPrefix::get(in) == p.gid_prefix && Lmc::get(in) == p.lmc && MasterSmSl::get(in) == p.sm_sl &&
                  keeps(LinkWidthEnabled::get(in), p.width_active, {0, 255}) &&
                  keeps(PortPhysicalState::get(in), p.phys_state, {0}) &&
                  keeps(LinkDownDefaultState::get(in), kLinkDownPolling, {0}) &&
                  keeps(LinkSpeedEnabled::get(in), speed_supported(p), {0, 15}) &&
                  keeps(NeighborMtu::get(in), p.mtu, {}) && oper_vls <= p.vl_cap &&
                  (p.external_sm || keeps(SubnetTimeout::get(in), p.subnet_timeout, {})) &&
                  keeps(LinkSpeedExtEnabled::get(in), speed_ext_supported(p), {0, 30, 31});
  if (!ok) return MadStatus::kInvalidField;
  if (oper_vls != 0) next->qos.oper_vls = oper_vls;
  next->qos.vl_high_limit = static_cast<uint8_t>(VlHighLimit::get(in));
  return MadStatus::kOk;
}

MadStatus fill_guid_info(const PortView& p, uint32_t block, uint8_t* d) {
  if (block != 0) return MadStatus::kInvalidField;  // GUIDCap 1: one block
  BeField<0, 8>::set(d, p.port_guid);
  return MadStatus::kOk;
}

// IBA 14.2.5.7: block N holds entries 32N..32N+31, two bytes each; the
// modifier's lower half is the block (its upper half names a switch port).
// Entries past PartitionCap read as 0 and are ignored on a Set.
bool pkey_block(const PortView& p, uint32_t modifier, unsigned* first, unsigned* end) {
  const uint32_t block = modifier & 0xffff;
  if (block * kPKeysPerBlock >= p.partition_cap) return false;
  *first = block * kPKeysPerBlock;
  *end = std::min<unsigned>({*first + kPKeysPerBlock, p.partition_cap, shm::kPKeyTableCap});
  return true;
}

MadStatus fill_pkey_table(const PortView& p, uint32_t modifier, uint8_t* d) {
  unsigned first, end;
  if (!pkey_block(p, modifier, &first, &end)) return MadStatus::kInvalidField;
  for (unsigned i = first; i < end; ++i) {
    d[2 * (i - first)] = static_cast<uint8_t>(p.pkeys[i] >> 8);
    d[2 * (i - first) + 1] = static_cast<uint8_t>(p.pkeys[i]);
  }
  return MadStatus::kOk;
}

// A CA port enforces its table on every packet (IBA 10.9.3); a switch's
// ports would need partition enforcement, which this SMA does not model
// (SwitchInfo:PartitionEnforcementCap 0), so their tables are not settable.
MadStatus set_pkey_table(const PortView& p, uint32_t modifier, const uint8_t* in, PortView* next) {
  if (p.node_type != 1) return MadStatus::kAttributeUnsupported;
  unsigned first, end;
  if (!pkey_block(p, modifier, &first, &end)) return MadStatus::kInvalidField;
  for (unsigned i = first; i < end; ++i)
    next->pkeys[i] = static_cast<uint16_t>(in[2 * (i - first)] << 8 | in[2 * (i - first) + 1]);
  return MadStatus::kOk;
}

// IBA 14.2.5.8: 16 SLs, 4 bits each, SL0 in the high nibble of byte 0. The
// modifier names input and output ports on a switch; a CA ignores it.
MadStatus fill_sl_to_vl(const PortView& p, uint8_t* d) {
  for (unsigned sl = 0; sl < 16; ++sl) {
    const uint8_t vl = p.qos.sl_to_vl[sl];
    d[sl / 2] |= static_cast<uint8_t>(sl % 2 == 0 ? vl << 4 : vl);
  }
  return MadStatus::kOk;
}

// An SL may name an operational data VL or VL15 (its packets are discarded).
MadStatus set_sl_to_vl(const uint8_t* in, shm::QosTables* qos) {
  uint8_t vls[16];
  for (unsigned sl = 0; sl < 16; ++sl) {
    vls[sl] = sl % 2 == 0 ? in[sl / 2] >> 4 : in[sl / 2] & 0xf;
    if (vls[sl] != shm::kVl15 && vls[sl] >= shm::data_vls(qos->oper_vls)) return MadStatus::kInvalidField;
  }
  std::memcpy(qos->sl_to_vl, vls, sizeof vls);
  return MadStatus::kOk;
}

// IBA 14.2.5.9: blocks 1-2 are the low-priority table (entries 0-31, 32-63),
// 3-4 the high one; the block is the modifier's upper half (its lower half
// names a switch port), or the whole modifier as some tools send it. Each
// entry: 4 reserved bits, the VL, a weight byte. Entries beyond VLArb*Cap
// read as zero and are ignored on a Set.
bool vl_arb_block(uint32_t modifier, uint32_t* block) {
  *block = modifier >> 16 != 0 ? modifier >> 16 : modifier;
  return *block >= 1 && *block <= 4;
}

shm::VlArbEntry* vl_arb_entries(shm::QosTables* qos, uint32_t block) {
  if (block == 2 || block == 4) return nullptr;  // entries 32-63: beyond the cap
  return block == 1 ? qos->low : qos->high;
}

MadStatus fill_vl_arbitration(const PortView& p, uint32_t modifier, uint8_t* d) {
  uint32_t block;
  if (!vl_arb_block(modifier, &block)) return MadStatus::kInvalidField;
  shm::QosTables qos = p.qos;
  if (const shm::VlArbEntry* e = vl_arb_entries(&qos, block)) {
    for (unsigned i = 0; i < shm::kVlArbCap; ++i) {
      d[2 * i] = e[i].vl;
      d[2 * i + 1] = e[i].weight;
    }
  }
  return MadStatus::kOk;
}

// A weighted entry must name an operational data VL (VL15 is never
// arbitrated); an entry of weight 0 is skipped by the arbiter, so any VL goes.
MadStatus set_vl_arbitration(uint32_t modifier, const uint8_t* in, shm::QosTables* qos) {
  uint32_t block;
  if (!vl_arb_block(modifier, &block)) return MadStatus::kInvalidField;
  shm::VlArbEntry* e = vl_arb_entries(qos, block);
  if (e == nullptr) return MadStatus::kOk;
  shm::VlArbEntry next[shm::kVlArbCap];
  for (unsigned i = 0; i < shm::kVlArbCap; ++i) {
    next[i] = {static_cast<uint8_t>(in[2 * i] & 0xf), in[2 * i + 1]};
    if (next[i].weight != 0 && next[i].vl >= shm::data_vls(qos->oper_vls)) return MadStatus::kInvalidField;
  }
  std::copy(next, next + shm::kVlArbCap, e);
  return MadStatus::kOk;
}

MadStatus fill_sm_info(const PortView& p, uint8_t* d) {
  // The built-in subnet manager lives at the port whose IsSM bit is set.
  // Under an external SM the bit is whoever holds the issm file, and its
  // SMInfo is that process's to answer (mad/user_agent.h), not ours.
  if ((p.cap_mask & kIsSm) == 0 || p.external_sm) return MadStatus::kAttributeUnsupported;
  sm_info::Guid::set(d, p.port_guid);
  sm_info::SmKey::set(d, 0);
  sm_info::ActCount::set(d, 0);
  sm_info::Priority::set(d, 0);
  sm_info::SmState::set(d, kSmStateMaster);
  return MadStatus::kOk;
}

MadStatus fill_get(const PortView& p, uint16_t attr, uint32_t modifier, uint8_t* d) {
  switch (static_cast<SmpAttr>(attr)) {
    case SmpAttr::kNodeInfo: return fill_node_info(p, d);
    case SmpAttr::kNodeDescription:
      std::memcpy(d, p.node_desc, sizeof p.node_desc);
      return MadStatus::kOk;
    case SmpAttr::kPortInfo: return fill_port_info(p, modifier, d);
    case SmpAttr::kGuidInfo: return fill_guid_info(p, modifier, d);
    case SmpAttr::kPKeyTable: return fill_pkey_table(p, modifier, d);
    case SmpAttr::kSlToVlMappingTable: return fill_sl_to_vl(p, d);
    case SmpAttr::kVlArbitrationTable: return fill_vl_arbitration(p, modifier, d);
    case SmpAttr::kSmInfo: return fill_sm_info(p, d);
  }
  return MadStatus::kAttributeUnsupported;
}

}  // namespace

// A Set of a writable attribute: the status, and in `next` the port as the
// Set leaves it.
MadStatus apply_set(const PortView& port, uint16_t attr, uint32_t modifier, const uint8_t* d, PortView* next) {
  switch (static_cast<SmpAttr>(attr)) {
    case SmpAttr::kPortInfo: return check_port_info_set(port, modifier, d, next);
    case SmpAttr::kSlToVlMappingTable: return set_sl_to_vl(d, &next->qos);
    case SmpAttr::kVlArbitrationTable: return set_vl_arbitration(modifier, d, &next->qos);
    case SmpAttr::kPKeyTable: return set_pkey_table(port, modifier, d, next);
    default: return MadStatus::kAttributeUnsupported;
  }
}

Disposition answer_smp(const PortView& port, const uint8_t* in, size_t len, uint8_t* out, SmpEffect* effect) {
  if (in == nullptr || len < kMadBytes) return Disposition::kDrop;
  const uint8_t klass = MgmtClass::get(in);
  const bool directed = klass == static_cast<uint8_t>(MgmtClassId::kSubnDirectedRoute);
  if (!directed && klass != static_cast<uint8_t>(MgmtClassId::kSubnLidRouted)) return Disposition::kDrop;
  // A response, or a trap's answer, is for an SM, not for the SMA.
  if (ResponseBit::get(in) != 0) return Disposition::kDrop;
  // An Ethernet port has no QP0 and so no SMA.
  if (port.ethernet) return Disposition::kDrop;
  if (directed) {
    const unsigned hops = DrHopCount::get(in);
    // IBA 14.2.2: beyond 63 hops the SMP is discarded; a path of hops >= 1
    // leaves through the port (C14-9), where the caller decides its fate.
    if (hops > kDrMaxHops || DrDirection::get(in) != 0) return Disposition::kDrop;
    if (hops != 0) return Disposition::kLeavePort;
  }

  std::memcpy(out, in, kMadBytes);
  const uint8_t method = Method::get(in);
  uint16_t status = static_cast<uint16_t>(MadStatus::kOk);
  if (BaseVersion::get(in) != kMadBaseVersion || ClassVersion::get(in) != kSmaClassVersion) {
    status = static_cast<uint16_t>(MadStatus::kBadVersion);
  } else if (method == static_cast<uint8_t>(MethodId::kGet)) {
    std::memset(out + kSmpDataOffset, 0, kSmpDataBytes);
    status = static_cast<uint16_t>(fill_get(port, AttributeId::get(in), AttributeModifier::get(in), out + kSmpDataOffset));
  } else if (method == static_cast<uint8_t>(MethodId::kSet)) {
    const uint16_t attr = AttributeId::get(in);
    const uint32_t modifier = AttributeModifier::get(in);
    PortView next = port;
    const MadStatus s = apply_set(port, attr, modifier, in + kSmpDataOffset, &next);
    status = static_cast<uint16_t>(s);
    if (s == MadStatus::kAttributeUnsupported) {
      // Not writable here: the data goes back as it came.
    } else {
      // Answered, whatever the outcome, with the attribute as it now stands
      // (IBA 14.2.5: a SubnSet's GetResp carries the attribute's value).
      const PortView& now = s == MadStatus::kOk ? next : port;
      std::memset(out + kSmpDataOffset, 0, kSmpDataBytes);
      fill_get(now, attr, modifier, out + kSmpDataOffset);
      if (s == MadStatus::kOk && effect != nullptr && !(next.qos == port.qos)) {
        effect->qos_changed = true;
        effect->qos = next.qos;
      }
      if (s == MadStatus::kOk && effect != nullptr && next.pkeys != port.pkeys) {
        effect->pkeys_changed = true;
        effect->pkeys = next.pkeys;
      }
      if (s == MadStatus::kOk && effect != nullptr &&
          (next.lid != port.lid || next.sm_lid != port.sm_lid || next.port_state != port.port_state)) {
        effect->port_changed = true;
        effect->lid = next.lid;
        effect->sm_lid = next.sm_lid;
        effect->port_state = next.port_state;
      }
      // Only an SM that owns the port may ask its clients to reregister.
      if (s == MadStatus::kOk && effect != nullptr && port.external_sm && attr == static_cast<uint16_t>(SmpAttr::kPortInfo) &&
          port_info::ClientReregister::get(in + kSmpDataOffset) != 0)
        effect->client_reregister = true;
    }
  } else if (method == static_cast<uint8_t>(MethodId::kTrapRepress) ||
             method == static_cast<uint8_t>(MethodId::kTrap)) {
    // A TrapRepress is taken without an answer (the port repeats no trap:
    // mad/notice.h); a Trap is the SM's, which an SMA neither takes nor
    // answers (the HCA passes it to the agent that registered for it).
    return Disposition::kDrop;
  } else {
    status = static_cast<uint16_t>(MadStatus::kMethodUnsupported);
  }
  // IBA 13.4.5: a failed Get carries no attribute data.
  if (status != 0 && method == static_cast<uint8_t>(MethodId::kGet))
    std::memset(out + kSmpDataOffset, 0, kSmpDataBytes);
  Method::set(out, static_cast<uint8_t>(MethodId::kGetResp) & 0x7f);
  ResponseBit::set(out, 1);
  if (directed) {
    DrStatus::set(out, status);
    DrDirection::set(out, 1);  // the response retraces the path (C14-11)
  } else {
    Status::set(out, status);
  }
  return Disposition::kRespond;
}

}  // namespace softverbs::mad
