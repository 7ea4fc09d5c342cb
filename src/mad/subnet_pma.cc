#include "mad/subnet_pma.h"

#include <algorithm>

#include "mad/mad_layout.h"

namespace softverbs::mad {

namespace {

// IBA 16.1.3.5 / 16.1.4.11: PortCounters and PortCountersExtended read
// the same figures; PortOpRcvCounters repeats the received ones.
void add_traffic(const shm::SubnetTraffic& t, PmaCounters* c) {
  c->v[kXmitPkts] += t.xmit_packets;
  c->v[kXmitData] += t.xmit_words;
  c->v[kRcvPkts] += t.rcv_packets;
  c->v[kRcvData] += t.rcv_words;
  c->v[kOpRcvPkts] += t.rcv_packets;
  c->v[kOpRcvData] += t.rcv_words;
  c->v[kXmitDiscards] += t.xmit_discards;
  c->v[kMcastXmitPkts] += t.mcast_xmit_packets;
  c->v[kMcastRcvPkts] += t.mcast_rcv_packets;
  // Unlike the device's port (mad/pma_counters.cc), counted per VL as each
  // link carried them: a switch's VL depends on the input port too.
  for (unsigned i = 0; i < 16; ++i) {
    c->v[kXmitDataSl0 + i] += t.xmit_words_sl[i];
    c->v[kRcvDataSl0 + i] += t.rcv_words_sl[i];
    c->v[kRcvPktsVl0 + i] += t.rcv_packets_vl[i];
    c->v[kRcvDataVl0 + i] += t.rcv_words_vl[i];
  }
}

// A Set's reset. PortOpRcvCounters resets on its own in the device's PMA;
// here it shares the received figures, so clearing either clears both.
void clear_traffic(const PmaMask& reset, shm::SubnetTraffic* t) {
  if (reset[kXmitPkts]) t->xmit_packets = 0;
  if (reset[kXmitData]) t->xmit_words = 0;
  if (reset[kRcvPkts] || reset[kOpRcvPkts]) t->rcv_packets = 0;
  if (reset[kRcvData] || reset[kOpRcvData]) t->rcv_words = 0;
  if (reset[kXmitDiscards]) t->xmit_discards = 0;
  if (reset[kMcastXmitPkts]) t->mcast_xmit_packets = 0;
  if (reset[kMcastRcvPkts]) t->mcast_rcv_packets = 0;
  for (unsigned i = 0; i < 16; ++i) {
    if (reset[kXmitDataSl0 + i]) t->xmit_words_sl[i] = 0;
    if (reset[kRcvDataSl0 + i]) t->rcv_words_sl[i] = 0;
    if (reset[kRcvPktsVl0 + i]) t->rcv_packets_vl[i] = 0;
    if (reset[kRcvDataVl0 + i]) t->rcv_words_vl[i] = 0;
  }
}

// The PMA of node `node`, for the ports its PortSelect names.
Disposition answer_node(const Subnet& s, unsigned node, const LinkPmaCounters& c, const uint8_t* in, uint8_t* out,
                        LinkPmaReset* reset) {
  const Topology& t = *s.topology;
  const int local = t.local_ca();
  const TopoNode& n = t.nodes[node];
  const TopoLink& facing = t.nodes[static_cast<size_t>(local)].ports[1];
  // Ports 1..num_ports; a switch's port 0 has no counters (no enhanced
  // port 0: SwitchInfo says so).
  PmaCounters ports[kTopoMaxPorts] = {};
  PmaMask resets[kTopoMaxPorts];
  unsigned local_port = 0, peer_port = 0;
  if (static_cast<int>(node) == local) {
    ports[0] = c.local;
    local_port = 1;
  }
  if (facing.node == static_cast<int>(node) && facing.port >= 1) {
    ports[facing.port - 1] = c.peer;
    peer_port = facing.port;
  }
  // What the topology's other CAs sent through each port (shm::SubnetTraffic).
  shm::SubnetPort* subnet_ports = s.state->node(node).ports;
  const unsigned counted = std::min<unsigned>(n.num_ports, shm::kSubnetMaxPorts - 1);
  for (unsigned p = 1; p <= counted; ++p) add_traffic(subnet_ports[p].traffic, &ports[p - 1]);
  const Disposition d = answer_pma_ports(ports, n.num_ports, in, kMadBytes, out, resets);
  for (unsigned p = 1; p <= counted; ++p) clear_traffic(resets[p - 1], &subnet_ports[p].traffic);
  if (local_port != 0) reset->local = resets[local_port - 1];
  if (peer_port != 0) reset->peer = resets[peer_port - 1];
  return d;
}

bool well_formed(const Subnet& s, const uint8_t* in, size_t len) {
  return in != nullptr && len >= kMadBytes && s.topology != nullptr && s.state != nullptr &&
         s.topology->local_ca() >= 0 && MgmtClass::get(in) == static_cast<uint8_t>(MgmtClassId::kPerfMgmt) &&
         ResponseBit::get(in) == 0;
}

}  // namespace

Disposition answer_subnet_pma(const Subnet& s, const LinkPmaCounters& c, const uint8_t* in, size_t len,
                              uint16_t dlid, uint8_t* out, LinkPmaReset* reset) {
  *reset = {};
  if (!well_formed(s, in, len)) return Disposition::kDrop;
  unsigned node = 0;
  uint8_t arrival = 0;
  if (!route_lid(s, dlid, &node, &arrival)) return Disposition::kDrop;
  return answer_node(s, node, c, in, out, reset);
}

Disposition answer_local_ca_pma(const Subnet& s, const LinkPmaCounters& c, const uint8_t* in, size_t len,
                                uint8_t* out, LinkPmaReset* reset) {
  *reset = {};
  if (!well_formed(s, in, len)) return Disposition::kDrop;
  return answer_node(s, static_cast<unsigned>(s.topology->local_ca()), c, in, out, reset);
}

}  // namespace softverbs::mad
