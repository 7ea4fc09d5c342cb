#include "mad/data_route.h"

#include <cstring>

namespace softverbs::mad {
namespace {

constexpr uint8_t kPortActive = 4;
constexpr uint16_t kMulticastLidBase = 0xc000;
// A route longer than this is a loop in the forwarding tables (IBA 14.2.2
// bounds a directed route at 64 hops; a LID route is no longer).
constexpr unsigned kMaxHops = DataPath::kMaxLinks;
// LRH 8 + BTH 12 + ICRC 4 besides the payload, as mad/pma_counters.cc counts.
constexpr uint64_t kIbPacketOverheadBytes = 24;

bool holds(const PortView& v, uint16_t dlid) {
  return v.lid != 0 && dlid >= v.lid && dlid < v.lid + (1u << v.lmc);
}

// A port's state as its SMA reports it: DOWN when its link is down.
PortView view(const Subnet& s, unsigned node, unsigned port) { return subnet_port_view(s, node, port, port); }

bool is_ca(const Topology& t, unsigned node) { return node < t.nodes.size() && !t.nodes[node].is_switch(); }

bool gid_is_port(const Subnet& s, unsigned node, const uint8_t* dgid_guid) {
  if (dgid_guid == nullptr) return true;
  const uint64_t guid = view(s, node, 1).port_guid;
  uint8_t be[8];
  for (int i = 0; i < 8; ++i) be[i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  return std::memcmp(be, dgid_guid, 8) == 0;
}

// IBA 14.2.5.8: a switch maps SL to VL per input and output port.
uint8_t switch_vl(const Subnet& s, unsigned node, uint8_t in, uint8_t out, uint8_t sl) {
  if (in >= shm::kSubnetMaxPorts || out >= shm::kSubnetMaxPorts) return shm::kVl15;
  uint8_t vls[16];
  shm::unpack_sl2vl(s.state->node(node).sw.sl2vl[in][out], vls);
  return vls[sl & 15];
}

bool discard(DataPath* path, unsigned node, uint8_t port) {
  path->discarded = true;
  path->discard_node = static_cast<uint8_t>(node);
  path->discard_port = port;
  return false;
}

}  // namespace

std::vector<int> ca_device_nodes(const Topology& t) {
  std::vector<int> nodes;
  const int local = t.local_ca();
  if (local < 0) return nodes;
  nodes.push_back(local);
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (static_cast<int>(i) != local && !t.nodes[i].is_switch() && t.nodes[i].num_ports >= 1)
      nodes.push_back(static_cast<int>(i));
  return nodes;
}

bool route_data(const Subnet& s, unsigned from, uint16_t dlid, const uint8_t* dgid_guid, unsigned to, uint8_t sl) {
  DataPath unused;
  return route_data(s, from, dlid, dgid_guid, to, sl, &unused);
}

bool route_data(const Subnet& s, unsigned from, uint16_t dlid, const uint8_t* dgid_guid, unsigned to, uint8_t sl,
                DataPath* path) {
  path->links = 0;
  path->discarded = false;
  sl &= 15;
  const Topology& t = *s.topology;
  if (!is_ca(t, from) || !is_ca(t, to) || t.nodes[from].num_ports < 1 || t.nodes[to].num_ports < 1) return false;
  if (dlid == 0 || dlid >= kMulticastLidBase) return false;
  const PortView source = view(s, from, 1);
  // IBA 7.2: data leaves an ACTIVE port only.
  if (source.port_state != kPortActive) return false;
  // The port's own address: the CA loops it back without the link.
  if (holds(source, dlid)) return from == to && gid_is_port(s, to, dgid_guid);
  unsigned node = from;
  uint8_t out = 1;
  uint8_t in = 0;  // the port it entered the switch `node` by
  for (unsigned hop = 0; hop < kMaxHops; ++hop) {
    const TopoNode& n = t.nodes[node];
    if (out == 0 || out > n.num_ports) return false;
    // Leaving: the port ACTIVE, its link up (a down link reads DOWN).
    if (hop > 0 && view(s, node, out).port_state != kPortActive) return false;
    const TopoLink& l = n.ports[out];
    if (l.node < 0) return false;
    const uint8_t vl = hop == 0 ? source.qos.sl_to_vl[sl] : switch_vl(s, node, in, out, sl);
    // IBA 7.6.6: the port that would send it on VL15 drops it.
    if (vl == shm::kVl15) return discard(path, node, out);
    path->leave_node[hop] = static_cast<uint8_t>(node);
    path->leave[hop] = out;
    path->enter_node[hop] = static_cast<uint8_t>(l.node);
    path->enter[hop] = static_cast<uint8_t>(l.port);
    path->vl[hop] = vl;
    path->links = hop + 1;
    node = static_cast<unsigned>(l.node);
    in = static_cast<uint8_t>(l.port);
    const PortView at = view(s, node, l.port);
    if (at.port_state != kPortActive) return false;  // IBA 7.2: an inactive port drops data
    if (!t.nodes[node].is_switch())
      return node == to && l.port == 1 && holds(at, dlid) && gid_is_port(s, to, dgid_guid);
    // A switch: its own LID (port 0's, `at` shows it) is no CA's.
    if (holds(at, dlid)) return false;
    out = dlid < shm::kLftCap ? s.state->node(node).sw.lft[dlid] : shm::kLftUnset;
  }
  return false;
}

void count_data_path(const Subnet& s, const DataPath& path, uint8_t sl, uint64_t packets, uint64_t bytes) {
  sl &= 15;
  // As the device's own PMA counts (mad/pma_counters.cc): the payload and
  // each packet's headers and CRCs, in 4-octet words.
  const uint64_t words = (bytes + packets * kIbPacketOverheadBytes) / 4;
  for (unsigned i = 0; i < path.links && i < DataPath::kMaxLinks; ++i) {
    shm::SubnetTraffic& out = s.state->node(path.leave_node[i]).ports[path.leave[i]].traffic;
    out.xmit_packets += packets;
    out.xmit_words += words;
    out.xmit_words_sl[sl] += words;
    shm::SubnetTraffic& in = s.state->node(path.enter_node[i]).ports[path.enter[i]].traffic;
    in.rcv_packets += packets;
    in.rcv_words += words;
    in.rcv_words_sl[sl] += words;
    const unsigned vl = path.vl[i] & 15;
    in.rcv_packets_vl[vl] += packets;
    in.rcv_words_vl[vl] += words;
  }
  if (path.discarded) s.state->node(path.discard_node).ports[path.discard_port].traffic.xmit_discards += packets;
}

}  // namespace softverbs::mad
