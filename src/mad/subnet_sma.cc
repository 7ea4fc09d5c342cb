#include "mad/subnet_sma.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "mad/mad_layout.h"
#include "mad/notice.h"
#include "mad/smp_fields.h"

namespace softverbs::mad {
namespace {

static_assert(kTopoMaxNodes <= shm::kSubnetMaxNodes && kTopoMaxPorts <= shm::kSubnetMaxPorts,
              "every node and port of a topology has its state");

// Attributes only a switch has (IBA 14.2.5.4, 14.2.5.10, 14.2.5.12).
constexpr uint16_t kSwitchInfo = 0x0012;
constexpr uint16_t kLinearForwardingTable = 0x0019;
constexpr uint16_t kMulticastForwardingTable = 0x001b;

constexpr unsigned kLftBlock = 64;   // LIDs per LinearForwardingTable block
constexpr unsigned kMftBlock = 32;   // MLIDs per MulticastForwardingTable block
constexpr uint16_t kMulticastLidBase = 0xc000;
constexpr uint32_t kIsSm = 1u << 1;
constexpr uint32_t kIsSlMappingSupported = 1u << 6;
constexpr uint32_t kIsExtendedSpeedsSupported = 1u << 14;
constexpr uint8_t kPortDown = 1, kPortInit = 2, kPortArmed = 3, kPortActive = 4;
constexpr uint8_t kPhysPolling = 2, kPhysDisabled = 3, kPhysLinkUp = 5;
constexpr uint32_t kSmSupportsExtendedSpeeds = 1u << 31;

struct Hop {
  int node = -1;
  uint8_t port = 0;  // the port the SMP arrived through
};

// Whether the link at `port` of `node` is up: the topology links it and
// neither end is disabled (a switch's port 0 is always up).
bool link_up(const Subnet& s, unsigned node, unsigned port) {
  const TopoNode& n = s.topology->nodes[node];
  if (port == 0) return n.is_switch();
  const TopoLink& l = n.ports[port];
  if (l.node < 0) return false;
  return s.state->node(node).ports[port].phys_disabled == 0 &&
         s.state->node(static_cast<unsigned>(l.node)).ports[l.port].phys_disabled == 0;
}

uint8_t port_state(const Subnet& s, unsigned node, unsigned port) {
  if (!link_up(s, node, port)) return kPortDown;
  const uint8_t st = s.state->node(node).ports[port].port_state;
  return st == 0 ? kPortInit : st;
}

// The state that holds a port's addresses: a switch's are its port 0's.
const shm::SubnetPort& address_port(const TopoNode& n, const shm::SubnetNode& s, unsigned port) {
  return s.ports[n.is_switch() ? 0 : port];
}

bool lid_matches(uint16_t base, uint8_t lmc, uint16_t dlid) {
  return base != 0 && dlid >= base && dlid < base + (1u << lmc);
}

// A LID-routed packet leaving `node` through `out`: across links, then from
// switch to switch by their LFTs, until a port whose LID range holds `dlid`.
bool walk_lid_from(const Subnet& s, int node, uint8_t out, uint16_t dlid, Hop* at) {
  const Topology& t = *s.topology;
  const int origin = t.local_ca();
  for (unsigned hop = 0; hop <= kDrMaxHops; ++hop) {
    const TopoNode& from = t.nodes[static_cast<size_t>(node)];
    if (out == 0 || out > from.num_ports) return false;
    const TopoLink& l = from.ports[out];
    if (!link_up(s, static_cast<unsigned>(node), out)) return false;
    node = l.node;
    const TopoNode& n = t.nodes[static_cast<size_t>(node)];
    const shm::SubnetNode& st = s.state->node(static_cast<unsigned>(node));
    if (node == origin && l.port == 1) {
      if (!lid_matches(s.local.lid, s.local.lmc, dlid)) return false;
    } else if (!n.is_switch()) {
      if (!lid_matches(st.ports[l.port].lid, st.ports[l.port].lmc, dlid)) return false;
    } else if (!lid_matches(st.ports[0].lid, 0, dlid)) {
      out = dlid < shm::kLftCap ? st.sw.lft[dlid] : shm::kLftUnset;
      continue;
    }
    *at = {node, l.port};
    return true;
  }
  return false;  // a loop in the forwarding tables
}

// A LID-routed SMP from the device's port.
bool walk_lid(const Subnet& s, int origin, uint16_t dlid, Hop* at) { return walk_lid_from(s, origin, 1, dlid, at); }

// IBA 14.2.2 (C14-9, C14-12): the outbound walk of a directed-route SMP
// sent by the device's port, hop by hop along the initial path, recording
// at each node the port it came in on in the return path. With DrSLID not
// permissive the directed part is preceded by a LID-routed one: the SMP
// goes by LID (`dlid`, its LRH's) to the node where the directed part
// starts, which sends the response back by LID to DrSLID (this port, or
// the device never hears it). With DrDLID not permissive it is followed by
// one: the switch that ends the directed part routes it on to DrDLID.
bool walk_directed(const Subnet& s, int origin, uint16_t dlid, uint8_t* m, Hop* at) {
  const Topology& t = *s.topology;
  const unsigned hops = DrHopCount::get(m);
  if (DrHopPointer::get(m) != 0) return false;
  const uint16_t dr_slid = static_cast<uint16_t>(DrSlid::get(m));
  const uint16_t dr_dlid = static_cast<uint16_t>(DrDlid::get(m));
  uint8_t* initial = m + kDrInitialPathOffset;
  uint8_t* ret = m + kDrReturnPathOffset;
  int node = origin;
  uint8_t arrival = 0;
  const bool lid_first = dr_slid != kPermissiveLid;
  if (lid_first) {
    if (!lid_matches(s.local.lid, s.local.lmc, dr_slid)) return false;
    Hop start;
    if (!walk_lid(s, origin, dlid, &start)) return false;
    node = start.node;
    arrival = start.port;
  }
  const bool from_origin = node == origin && (!lid_first || arrival == 1);
  for (unsigned i = 1; i <= hops; ++i) {
    const TopoNode& n = t.nodes[static_cast<size_t>(node)];
    const uint8_t out = initial[i];
    if (i == 1 && from_origin) {
      // The originating CA sends through its port, which InitialPath[1] names.
      if (out != 1) return false;
    } else if (!n.is_switch() || (out == arrival && !(i == 1 && lid_first))) {
      // Only a switch forwards, never back out of the port a directed SMP
      // came in on; the first hop after a LID-routed part may (to reach
      // the neighbour behind the port it arrived through).
      return false;
    }
    if (out == 0 || out > n.num_ports) return false;
    const TopoLink& l = n.ports[out];
    if (!link_up(s, static_cast<unsigned>(node), out)) return false;  // off the fabric: nothing carries it
    ret[i] = l.port;
    node = l.node;
    arrival = l.port;
  }
  if (dr_dlid != kPermissiveLid) {
    const TopoNode& n = t.nodes[static_cast<size_t>(node)];
    const shm::SubnetNode& st = s.state->node(static_cast<unsigned>(node));
    if (!n.is_switch()) return false;  // a CA routes nothing on
    if (!lid_matches(st.ports[0].lid, 0, dr_dlid)) {
      const uint8_t out = dr_dlid < shm::kLftCap ? st.sw.lft[dr_dlid] : shm::kLftUnset;
      Hop end;
      if (!walk_lid_from(s, node, out, dr_dlid, &end)) return false;
      node = end.node;
      arrival = end.port;
    }
  }
  *at = {node, arrival};
  return true;
}

// IBA 14.2.5.4 PortStateChange and 14.2.5.1 trap 128: a switch whose port
// the link state machine took down or up (not an SM's PortState Set) sets
// the bit and tells its SM, by LID through its forwarding table. Only a
// trap that reaches the device's port finds an SM's agent (the processes
// all sit behind it); one to a LID nobody has, or that no route carries,
// is lost, as on a fabric.
void raise_link_state_change(const Subnet& s, unsigned node, RaisedTraps* traps) {
  static std::atomic<uint32_t> next_tid{1};
  if (!s.topology->nodes[node].is_switch()) return;  // a CA raises no trap 128
  shm::SubnetNode& st = s.state->node(node);
  st.sw.port_state_change = 1;
  const shm::SubnetPort& p0 = st.ports[0];
  if (traps == nullptr || p0.lid == 0 || p0.sm_lid == 0 || p0.sm_lid == p0.lid) return;
  const uint8_t out = p0.sm_lid < shm::kLftCap ? st.sw.lft[p0.sm_lid] : shm::kLftUnset;
  Hop at;
  if (!walk_lid_from(s, static_cast<int>(node), out, p0.sm_lid, &at)) return;
  if (at.node != s.topology->local_ca() || at.port != 1) return;
  // A TID of its own per trap and process (the SM may track them); its
  // upper half 0 names no agent of the port.
  const uint32_t tid = static_cast<uint32_t>(getpid()) << 16 | (next_tid.fetch_add(1, std::memory_order_relaxed) & 0xffff);
  if (Trap* t = traps->add()) *t = link_state_change_trap(p0.lid, p0.sm_lid, p0.sm_sl, p0.m_key, tid);
}

// IBA 14.2.5.6 PortInfo Set on a node of the subnet: the SM owns LIDs, the
// SM's address, timeouts and the port's logical state (C14-24.x: DOWN
// restarts the link, which comes back INIT; ARMED from INIT, ACTIVE from
// ARMED; INIT is not settable). PortPhysicalState Disabled takes the link
// down at both ends, Polling brings it back (ibportstate's disable and
// enable); either end that is a switch then raises trap 128. Read-only
// fields are ignored.
MadStatus set_port_info(const Subnet& s, unsigned node, unsigned port, const uint8_t* d, RaisedTraps* traps) {
  using namespace port_info;
  const TopoNode& n = s.topology->nodes[node];
  shm::SubnetNode& st = s.state->node(node);
  shm::SubnetPort next = st.ports[port];
  const bool addresses = !n.is_switch() || port == 0;
  if (addresses) {
    const uint16_t lid = static_cast<uint16_t>(Lid::get(d));
    if (lid >= kMulticastLidBase) return MadStatus::kInvalidField;
    next.lid = lid;
    next.sm_lid = static_cast<uint16_t>(MasterSmLid::get(d));
    next.sm_sl = static_cast<uint8_t>(MasterSmSl::get(d));
    next.lmc = n.is_switch() ? 0 : static_cast<uint8_t>(Lmc::get(d));
    next.subnet_timeout = static_cast<uint8_t>(SubnetTimeout::get(d));
    next.m_key = MKey::get(d);
    next.m_key_protect = static_cast<uint8_t>(MKeyProtectBits::get(d));
  }
  const uint8_t now = port_state(s, node, port);
  switch (static_cast<uint8_t>(PortState::get(d))) {
    case 0: break;  // no change
    case kPortDown: next.port_state = 0; break;
    case kPortArmed:
      if (now != kPortInit && now != kPortArmed) return MadStatus::kInvalidField;
      next.port_state = kPortArmed;
      break;
    case kPortActive:
      if (now != kPortArmed && now != kPortActive) return MadStatus::kInvalidField;
      next.port_state = kPortActive;
      break;
    default: return MadStatus::kInvalidField;
  }
  const uint8_t oper_vls = static_cast<uint8_t>(OperationalVls::get(d));
  if (oper_vls > shm::kVlCap) return MadStatus::kInvalidField;
  if (oper_vls != 0) next.qos.oper_vls = oper_vls;
  next.qos.vl_high_limit = static_cast<uint8_t>(VlHighLimit::get(d));
  const uint8_t mtu = static_cast<uint8_t>(NeighborMtu::get(d));
  if (mtu != 0 && mtu <= 5) next.neighbor_mtu = mtu;
  switch (static_cast<uint8_t>(PortPhysicalState::get(d))) {
    case 0: break;  // no change
    case kPhysPolling: next.phys_disabled = 0; break;
    case kPhysDisabled:
      if (port == 0) return MadStatus::kInvalidField;  // port 0 has no physical link
      next.phys_disabled = 1;
      break;
    default: return MadStatus::kInvalidField;
  }
  const bool was_up = link_up(s, node, port);
  st.ports[port] = next;
  if (link_up(s, node, port) == was_up) return MadStatus::kOk;
  // The link went down or came back: both ends start again from INIT.
  st.ports[port].port_state = 0;
  raise_link_state_change(s, node, traps);
  if (port != 0 && n.ports[port].node >= 0) {
    const TopoLink& l = n.ports[port];
    s.state->node(static_cast<unsigned>(l.node)).ports[l.port].port_state = 0;
    raise_link_state_change(s, static_cast<unsigned>(l.node), traps);
  }
  return MadStatus::kOk;
}

MadStatus switch_info(shm::SubnetSwitch& sw, bool set, const uint8_t* in, uint8_t* d) {
  using namespace switch_info;
  if (set) {
    const uint16_t lft_top = static_cast<uint16_t>(LinearFdbTop::get(in));
    if (lft_top >= shm::kLftCap) return MadStatus::kInvalidField;
    sw.lft_top = lft_top;
    sw.default_port = static_cast<uint8_t>(DefaultPort::get(in));
    sw.default_mcast_primary = static_cast<uint8_t>(DefaultMcastPrimaryPort::get(in));
    sw.default_mcast_not_primary = static_cast<uint8_t>(DefaultMcastNotPrimaryPort::get(in));
    sw.life_time = static_cast<uint8_t>(LifeTimeValue::get(in));
    if (PortStateChange::get(in) != 0) sw.port_state_change = 0;  // write 1 to clear
    sw.mft_top = static_cast<uint16_t>(MulticastFdbTop::get(in));
  }
  LinearFdbCap::set(d, shm::kLftCap);
  RandomFdbCap::set(d, 0);
  MulticastFdbCap::set(d, shm::kMftCap);
  LinearFdbTop::set(d, sw.lft_top);
  DefaultPort::set(d, sw.default_port);
  DefaultMcastPrimaryPort::set(d, sw.default_mcast_primary);
  DefaultMcastNotPrimaryPort::set(d, sw.default_mcast_not_primary);
  LifeTimeValue::set(d, sw.life_time);
  PortStateChange::set(d, sw.port_state_change);
  LidsPerPort::set(d, 0);
  PartitionEnforcementCap::set(d, 0);
  EnhancedPort0::set(d, 0);
  MulticastFdbTop::set(d, sw.mft_top);
  return MadStatus::kOk;
}

// IBA 14.2.5.10: the modifier is the block of 64 LIDs.
MadStatus linear_table(shm::SubnetSwitch& sw, uint32_t block, bool set, const uint8_t* in, uint8_t* d) {
  if (block >= shm::kLftCap / kLftBlock) return MadStatus::kInvalidField;
  uint8_t* entries = sw.lft + block * kLftBlock;
  if (set) std::memcpy(entries, in, kLftBlock);
  std::memcpy(d, entries, kLftBlock);
  return MadStatus::kOk;
}

// IBA 14.2.5.12: modifier bits 31-28 the position (which 16 ports), 8-0
// the block of 32 MLIDs; each entry a 16-bit port mask.
MadStatus multicast_table(const TopoNode& n, shm::SubnetSwitch& sw, uint32_t modifier, bool set, const uint8_t* in,
                          uint8_t* d) {
  const uint32_t position = modifier >> 28;
  const uint32_t block = modifier & 0x1ff;
  if ((modifier & 0x0ffffe00u) != 0 || block >= shm::kMftCap / kMftBlock || position * 16 > n.num_ports)
    return MadStatus::kInvalidField;
  for (unsigned i = 0; i < kMftBlock; ++i) {
    uint16_t& e = sw.mft[block * kMftBlock + i][position];
    if (set) e = static_cast<uint16_t>(in[2 * i] << 8 | in[2 * i + 1]);
    d[2 * i] = static_cast<uint8_t>(e >> 8);
    d[2 * i + 1] = static_cast<uint8_t>(e);
  }
  return MadStatus::kOk;
}

// The port an attribute of a node names: for a CA the port the SMP came in
// on (or, for PortInfo, the one its modifier names); for a switch the
// modifier's port field, port 0 where it names none.
unsigned attribute_port(const TopoNode& n, uint16_t attr, uint32_t modifier, unsigned arrival) {
  switch (static_cast<SmpAttr>(attr)) {
    case SmpAttr::kPortInfo: {
      const uint32_t m = modifier & ~kSmSupportsExtendedSpeeds;
      if (m == 0) return n.is_switch() ? 0 : arrival;
      return m;
    }
    case SmpAttr::kPKeyTable: return n.is_switch() ? modifier >> 16 : arrival;
    case SmpAttr::kSlToVlMappingTable: return n.is_switch() ? modifier & 0xff : arrival;  // the output port
    case SmpAttr::kVlArbitrationTable: return n.is_switch() ? modifier & 0xffff : arrival;
    default: return n.is_switch() ? 0 : arrival;
  }
}

// Finishes a response in the form of the request: a directed-route one
// goes back along the return path (C14-11), reaching the device's port
// with the hop pointer back at 0.
void finish(const uint8_t* in, bool directed, uint8_t* out) {
  MgmtClass::set(out, MgmtClass::get(in));
  if (!directed) return;
  DrDirection::set(out, 1);
  DrHopPointer::set(out, 0);
}

Disposition answer_at(const Subnet& s, Hop at, const uint8_t* in, bool directed, uint8_t* out,
                      SmpEffect* local_effect, RaisedTraps* traps) {
  const Topology& t = *s.topology;
  // The PortView codec answers in LID-routed form; finish() restores the route.
  uint8_t req[kMadBytes];
  std::memcpy(req, in, kMadBytes);
  MgmtClass::set(req, static_cast<uint8_t>(MgmtClassId::kSubnLidRouted));
  const uint16_t attr = AttributeId::get(in);
  const uint32_t modifier = AttributeModifier::get(in);
  const uint8_t method = Method::get(in);
  const bool set = method == static_cast<uint8_t>(MethodId::kSet);

  const TopoNode& n = t.nodes[static_cast<size_t>(at.node)];
  shm::SubnetNode& st = s.state->node(static_cast<unsigned>(at.node));
  // IBA 14.2.4 (C14-16..18): with an M_Key set, an SMP carrying another key
  // may not Set, nor Get at protection level 2 or 3; it is discarded (the
  // SM sees a timeout). A Get at level 1 is answered with the key hidden.
  bool hide_m_key = false;
  if (!(at.node == t.local_ca() && at.port == 1)) {
    const shm::SubnetPort& k = st.ports[n.is_switch() ? 0 : at.port];
    if (k.m_key != 0 && SmpMKey::get(in) != k.m_key) {
      if (set || k.m_key_protect >= 2) return Disposition::kDrop;
      hide_m_key = k.m_key_protect == 1;
    }
  }
  const bool versions_ok = BaseVersion::get(in) == kMadBaseVersion && ClassVersion::get(in) == 1;
  const bool get_or_set = set || method == static_cast<uint8_t>(MethodId::kGet);

  if (n.is_switch() && versions_ok && get_or_set &&
      (attr == kSwitchInfo || attr == kLinearForwardingTable || attr == kMulticastForwardingTable)) {
    std::memcpy(out, in, kMadBytes);
    uint8_t* d = out + kSmpDataOffset;
    const uint8_t* data = in + kSmpDataOffset;
    uint8_t fresh[kSmpDataBytes] = {};
    MadStatus status = attr == kSwitchInfo              ? switch_info(st.sw, set, data, fresh)
                       : attr == kLinearForwardingTable ? linear_table(st.sw, modifier, set, data, fresh)
                                                        : multicast_table(n, st.sw, modifier, set, data, fresh);
    // IBA 13.4.5: a failed Get carries no attribute data.
    if (status == MadStatus::kOk || set) std::memcpy(d, fresh, kSmpDataBytes);
    if (status != MadStatus::kOk && !set) std::memset(d, 0, kSmpDataBytes);
    Method::set(out, static_cast<uint8_t>(MethodId::kGetResp) & 0x7f);
    ResponseBit::set(out, 1);
    Status::set(out, static_cast<uint16_t>(status));
    finish(in, directed, out);
    return Disposition::kRespond;
  }

  const unsigned port = attribute_port(n, attr, modifier, at.port);
  // A switch's SL2VL names an input port too (modifier bits 15-8).
  const bool switch_sl2vl = n.is_switch() && attr == static_cast<uint16_t>(SmpAttr::kSlToVlMappingTable);
  const unsigned in_port = switch_sl2vl ? (modifier >> 8) & 0xff : 0;
  if (port > n.num_ports || (!n.is_switch() && port == 0) || in_port > n.num_ports) {
    // Let the codec answer the bad modifier (status 0x1C) for a port that exists.
    PortView v = subnet_port_view(s, static_cast<unsigned>(at.node), at.port, at.port);
    const Disposition d = answer_smp(v, req, kMadBytes, out, nullptr);
    if (d == Disposition::kRespond && Status::get(out) == 0) Status::set(out, static_cast<uint16_t>(MadStatus::kInvalidField));
    finish(in, directed, out);
    return d;
  }
  if (at.node == t.local_ca() && port == 1) {
    // The device's own port: its Sets are the device SMA's, stored by the caller.
    const PortView v = subnet_port_view(s, static_cast<unsigned>(at.node), port, at.port);
    const Disposition d = answer_smp(v, req, kMadBytes, out, local_effect);
    finish(in, directed, out);
    return d;
  }
  MadStatus set_status = MadStatus::kOk;
  if (set && attr == static_cast<uint16_t>(SmpAttr::kPortInfo) && versions_ok) {
    set_status = set_port_info(s, static_cast<unsigned>(at.node), port, in + kSmpDataOffset, traps);
    // IBA 14.2.5.6: a CA's clients register again when the SM says so.
    if (set_status == MadStatus::kOk && !n.is_switch() && local_effect != nullptr &&
        port_info::ClientReregister::get(in + kSmpDataOffset) != 0)
      local_effect->reregistered_ca_nodes.push_back(static_cast<unsigned>(at.node));
    // Answered as a Get of the attribute as it now stands.
    Method::set(req, static_cast<uint8_t>(MethodId::kGet));
  }
  PortView v = subnet_port_view(s, static_cast<unsigned>(at.node), port, at.port);
  if (hide_m_key) v.m_key = 0;
  if (switch_sl2vl) shm::unpack_sl2vl(st.sw.sl2vl[in_port][port], v.qos.sl_to_vl);
  SmpEffect effect;
  const Disposition d = answer_smp(v, req, kMadBytes, out, &effect);
  if (effect.qos_changed && switch_sl2vl) shm::pack_sl2vl(effect.qos.sl_to_vl, st.sw.sl2vl[in_port][port]);
  else if (effect.qos_changed) st.ports[port].qos = effect.qos;
  if (effect.pkeys_changed) st.ports[port].pkeys = effect.pkeys;
  if (set_status != MadStatus::kOk) Status::set(out, static_cast<uint16_t>(set_status));
  finish(in, directed, out);
  return d;
}

}  // namespace

PortView subnet_port_view(const Subnet& s, unsigned node, unsigned port, unsigned arrival_port) {
  const TopoNode& n = s.topology->nodes[node];
  const bool local = static_cast<int>(node) == s.topology->local_ca();
  if (local && port == 1) {
    PortView v = s.local;
    v.num_ports = n.num_ports;
    v.arrival_port = static_cast<uint8_t>(arrival_port);
    return v;
  }
  const shm::SubnetNode& st = s.state->node(node);
  const shm::SubnetPort& a = address_port(n, st, port);
  PortView v;
  v.node_type = n.is_switch() ? 2 : 1;
  v.num_ports = n.num_ports;
  v.port_num = static_cast<uint8_t>(port);
  v.arrival_port = static_cast<uint8_t>(arrival_port);
  // The device's CA has the device's GUIDs (its port 1's is node GUID + 1).
  v.node_guid = local ? s.local.node_guid : n.node_guid;
  v.sys_image_guid = local ? s.local.sys_image_guid : n.sys_guid;
  v.port_guid = local ? s.local.node_guid + port : n.port_guid(port);
  v.vendor_id = n.vendor_id != 0 ? n.vendor_id : s.local.vendor_id;
  v.device_id = n.device_id != 0 ? n.device_id : s.local.device_id;
  v.revision = s.local.revision;
  v.partition_cap = s.local.partition_cap;
  v.gid_prefix = s.local.gid_prefix;
  v.lid = a.lid;
  v.sm_lid = a.sm_lid;
  v.sm_sl = a.sm_sl;
  v.lmc = a.lmc;
  // A CA's port has the device port's capabilities but no SM; a switch's
  // ports their extended speeds (so tools read LinkSpeedExtActive) and SL
  // mapping (opensm sends a switch SL2VL tables only if port 0 has it).
  v.cap_mask = n.is_switch() ? kIsExtendedSpeedsSupported | kIsSlMappingSupported : s.local.cap_mask & ~kIsSm;
  v.port_state = port_state(s, node, port);
  v.phys_state = link_up(s, node, port)      ? kPhysLinkUp
                 : st.ports[port].phys_disabled ? kPhysDisabled
                                                : kPhysPolling;
  v.width_active = port == 0 ? 2 : n.ports[port].width;
  v.speed_ext_active = s.local.speed_ext_active;
  v.mtu = s.local.mtu;
  v.vl_cap = shm::kVlCap;
  v.qos = st.ports[port].qos;
  if (!n.is_switch()) v.pkeys = st.ports[port].pkeys;
  v.subnet_timeout = a.subnet_timeout;
  v.m_key = a.m_key;
  v.m_key_protect = a.m_key_protect;
  v.ethernet = false;
  if (local) std::memcpy(v.node_desc, s.local.node_desc, sizeof v.node_desc);
  else std::memcpy(v.node_desc, n.name.data(), std::min(n.name.size(), sizeof v.node_desc));
  return v;
}

bool route_lid(const Subnet& s, uint16_t dlid, unsigned* node, uint8_t* arrival_port) {
  const int origin = s.topology->local_ca();
  Hop at;
  if (origin < 0 || !walk_lid(s, origin, dlid, &at)) return false;
  *node = static_cast<unsigned>(at.node);
  *arrival_port = at.port;
  return true;
}

bool leaves_port(const PortView& local, const uint8_t* in, size_t len, uint16_t dlid) {
  if (in == nullptr || len < kMadBytes) return false;
  const uint8_t klass = MgmtClass::get(in);
  if (klass == static_cast<uint8_t>(MgmtClassId::kSubnDirectedRoute))
    // A LID-routed part (IBA 14.2.2) leaves the port unless it is for the port's own LID.
    return DrHopCount::get(in) != 0 || DrDlid::get(in) != kPermissiveLid ||
           (DrSlid::get(in) != kPermissiveLid && dlid != kPermissiveLid && !lid_matches(local.lid, local.lmc, dlid));
  if (klass != static_cast<uint8_t>(MgmtClassId::kSubnLidRouted)) return false;
  return dlid != kPermissiveLid && !lid_matches(local.lid, local.lmc, dlid);
}

Disposition answer_subnet_smp(const Subnet& s, const uint8_t* in, size_t len, uint16_t dlid, uint8_t* out,
                              SmpEffect* local_effect, RaisedTraps* traps) {
  if (in == nullptr || len < kMadBytes || s.topology == nullptr || s.state == nullptr) return Disposition::kDrop;
  const uint8_t klass = MgmtClass::get(in);
  const bool directed = klass == static_cast<uint8_t>(MgmtClassId::kSubnDirectedRoute);
  if (!directed && klass != static_cast<uint8_t>(MgmtClassId::kSubnLidRouted)) return Disposition::kDrop;
  // A response is for an SM; a node's SMA takes a TrapRepress without an
  // answer (it repeats no trap: mad/notice.h) and has no use for a Trap.
  if (ResponseBit::get(in) != 0 || is_smp_trap_repress(in) || is_smp_trap(in)) return Disposition::kDrop;
  const int origin = s.topology->local_ca();
  if (origin < 0) return Disposition::kDrop;
  uint8_t m[kMadBytes];
  std::memcpy(m, in, kMadBytes);
  Hop at;
  if (directed && (DrHopCount::get(m) > kDrMaxHops || DrDirection::get(m) != 0)) {
    // IBA 14.2.2: beyond 63 hops, or already returning, it is not ours to send.
    return Disposition::kDrop;
  }
  if (!leaves_port(s.local, m, kMadBytes, dlid)) {
    at = {origin, 1};  // for the device's own CA, as the topology has it
  } else if (directed) {
    if (!walk_directed(s, origin, dlid, m, &at)) return Disposition::kDrop;
  } else if (!walk_lid(s, origin, dlid, &at)) {
    return Disposition::kDrop;
  }
  return answer_at(s, at, m, directed, out, local_effect, traps);
}

}  // namespace softverbs::mad
