#include "mad/data_route.h"

#include <algorithm>
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

// As the device's own PMA counts (mad/pma_counters.cc): the payload and
// each packet's headers and CRCs, in 4-octet words.
uint64_t words_of(uint64_t packets, uint64_t bytes) { return (bytes + packets * kIbPacketOverheadBytes) / 4; }

struct LinkCount {
  uint8_t sl;
  uint64_t packets, words;
  bool multicast;
};

// One link crossed on `vl`: sent by one port, received by the other.
void count_link(const Subnet& s, unsigned leave_node, uint8_t leave, unsigned enter_node, uint8_t enter, uint8_t vl,
                const LinkCount& c) {
  shm::SubnetTraffic& out = s.state->node(leave_node).ports[leave].traffic;
  out.xmit_packets += c.packets;
  out.xmit_words += c.words;
  out.xmit_words_sl[c.sl] += c.words;
  shm::SubnetTraffic& in = s.state->node(enter_node).ports[enter].traffic;
  in.rcv_packets += c.packets;
  in.rcv_words += c.words;
  in.rcv_words_sl[c.sl] += c.words;
  in.rcv_packets_vl[vl & 15] += c.packets;
  in.rcv_words_vl[vl & 15] += c.words;
  if (c.multicast) {
    out.mcast_xmit_packets += c.packets;
    in.mcast_rcv_packets += c.packets;
  }
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

uint64_t route_multicast(const Subnet& s, unsigned from, uint16_t mlid, uint8_t sl, uint64_t packets, uint64_t bytes) {
  const Topology& t = *s.topology;
  sl &= 15;
  if (!is_ca(t, from) || t.nodes[from].num_ports < 1 || mlid < kMulticastLidBase || mlid == kPermissiveLid) return 0;
  const unsigned entry = mlid - kMulticastLidBase;
  if (entry >= shm::kMftCap) return 0;  // beyond MulticastFDBCap: no switch forwards it
  const PortView source = view(s, from, 1);
  if (source.port_state != kPortActive) return 0;  // IBA 7.2
  const LinkCount count{sl, packets, words_of(packets, bytes), true};
  uint64_t reached = 0, forwarded = 0;
  struct At {
    uint8_t node, in;
  } queue[shm::kSubnetMaxNodes];
  unsigned head = 0, tail = 0;
  // Out of port `out` of `node` on `vl`, into the port at the link's other end.
  const auto send = [&](unsigned node, uint8_t out, uint8_t vl) {
    if (vl == shm::kVl15) {  // IBA 7.6.6
      if (packets != 0) s.state->node(node).ports[out].traffic.xmit_discards += packets;
      return;
    }
    const TopoLink& l = t.nodes[node].ports[out];
    if (l.node < 0) return;
    const auto next = static_cast<unsigned>(l.node);
    if (view(s, next, l.port).port_state != kPortActive) return;  // IBA 7.2: an inactive port drops data
    if (packets != 0) count_link(s, node, out, next, static_cast<uint8_t>(l.port), vl, count);
    if (!t.nodes[next].is_switch()) {
      if (l.port == 1) reached |= 1ull << next;
      return;
    }
    if ((forwarded >> next & 1) != 0 || tail == shm::kSubnetMaxNodes) return;
    forwarded |= 1ull << next;
    queue[tail++] = {static_cast<uint8_t>(next), static_cast<uint8_t>(l.port)};
  };
  send(from, 1, source.qos.sl_to_vl[sl]);
  while (head < tail) {
    const At at = queue[head++];
    const unsigned ports = std::min<unsigned>(t.nodes[at.node].num_ports, shm::kSubnetMaxPorts - 1);
    const uint16_t* masks = s.state->node(at.node).sw.mft[entry];
    // IBA 18.2.4.3: every port of the entry's mask but the arrival port
    // (port 0, the switch's own, takes no data).
    for (unsigned port = 1; port <= ports; ++port) {
      if (port == at.in || (masks[port / 16] >> (port % 16) & 1) == 0) continue;
      if (view(s, at.node, port).port_state != kPortActive) continue;
      send(at.node, static_cast<uint8_t>(port), switch_vl(s, at.node, at.in, static_cast<uint8_t>(port), sl));
    }
  }
  return reached;
}

void count_data_path(const Subnet& s, const DataPath& path, uint8_t sl, uint64_t packets, uint64_t bytes) {
  const LinkCount count{static_cast<uint8_t>(sl & 15), packets, words_of(packets, bytes), false};
  for (unsigned i = 0; i < path.links && i < DataPath::kMaxLinks; ++i)
    count_link(s, path.leave_node[i], path.leave[i], path.enter_node[i], path.enter[i], path.vl[i], count);
  if (path.discarded) s.state->node(path.discard_node).ports[path.discard_port].traffic.xmit_discards += packets;
}

}  // namespace softverbs::mad
