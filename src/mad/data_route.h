// The topology's CAs as verbs devices, and the data path between them
// (issue 19). softverbs0 is the device's own CA (Topology::local_ca()), the
// device's port its port 1; softverbs1, softverbs2, ... are the topology's
// other CAs in file order, each by its port 1 (a CA whose port 1 has no
// link is listed too: its port is DOWN and carries nothing).
//
// A data packet between them goes as the subnet carries it (IBA 7.2,
// 18.2.4): it leaves only an ACTIVE port, crosses links that are up (no
// end disabled) into ACTIVE ports, and each switch sends it on by the
// linear forwarding table an SM programmed; it arrives at the port whose
// LID range holds its DLID. Anything else loses it, as a fabric does, and
// the requester's timer decides. Each link carries it on the VL its
// sender's SL2VL table gives its SL (a CA: its port's table; a switch: the
// table of its input × output port, IBA 14.2.5.8); a hop that maps the SL
// to VL15 discards it there (IBA 7.6.6).
//
// Pure functions of a Subnet: the caller holds its SubnetLock.
#pragma once

#include <cstdint>
#include <vector>

#include "mad/subnet_sma.h"

namespace softverbs::mad {

// The topology's node behind each device index (index 0: local_ca()).
std::vector<int> ca_device_nodes(const Topology& t);

// Whether a data packet sent by port 1 of CA node `from` to `dlid` arrives
// at port 1 of CA node `to`. With `dgid_guid` (a GRH: the DGID's interface
// ID, network order) the arrival port must also be that GID's. A DLID of
// the sender's own port stays in its CA (`to` must be `from`), never on
// the wire. `sl`: the packet's service level. REQUIRES: the caller holds a
// SubnetLock on subnet.state.
bool route_data(const Subnet& subnet, unsigned from, uint16_t dlid, const uint8_t* dgid_guid, unsigned to,
                uint8_t sl = 0);

// The ports a packet crosses, each link once: it leaves port `leave[i]` of
// node `leave_node[i]` and enters port `enter[i]` of node `enter_node[i]`.
// A packet looped back in its CA crosses none. `vl[i]`: the VL link i
// carries it on. When a port discarded it for its SL's VL15 (`discarded`),
// the links are those it crossed before, and the port is
// (`discard_node`, `discard_port`).
struct DataPath {
  static constexpr unsigned kMaxLinks = 64;
  unsigned links = 0;
  uint8_t leave_node[kMaxLinks], leave[kMaxLinks], enter_node[kMaxLinks], enter[kMaxLinks], vl[kMaxLinks];
  bool discarded = false;
  uint8_t discard_node = 0, discard_port = 0;
};
// route_data that also says which ports it crosses (`*path`, meaningful
// when it arrives or was discarded).
bool route_data(const Subnet& subnet, unsigned from, uint16_t dlid, const uint8_t* dgid_guid, unsigned to,
                uint8_t sl, DataPath* path);

// IBA 18.2.4.3: a multicast packet sent by port 1 of CA node `from` to
// `mlid` leaves that ACTIVE port on the VL its table gives `sl`; each
// switch it enters by an ACTIVE port sends it out of every ACTIVE port its
// MulticastForwardingTable entry for `mlid` names, except the one it came
// in by (on the VL of that input × output table; VL15 drops it there), and
// a CA's port takes it without sending it on. Returns the CA nodes whose
// port 1 received it (bit n: node n). With `packets` non-zero, every port
// it crosses counts them (`bytes`: their payload) as count_data_path does,
// also as multicast (PortMulticastXmit/RcvPkts). A switch reached twice (a
// loop in the tables) sends it on once. REQUIRES: the caller holds a
// SubnetLock on subnet.state.
uint64_t route_multicast(const Subnet& subnet, unsigned from, uint16_t mlid, uint8_t sl, uint64_t packets = 0,
                         uint64_t bytes = 0);

// IBA 16.1.3.5: every port `path` leaves counts the packets as sent (PortXmitPkts,
// PortXmitData, PortXmitDataSL for `sl`), every port it enters as received
// (also PortRcvDataSL, and PortVLOpPackets/Data on the VL the link carried
// them on), and a port that discarded them its PortXmitDiscards, in the
// subnet state beside its SMA's fields (shm::SubnetPort::traffic), so the
// node's PMA shows them (mad/subnet_pma.h). `bytes`: the payload of all
// the packets. REQUIRES: the caller holds a SubnetLock on subnet.state.
void count_data_path(const Subnet& subnet, const DataPath& path, uint8_t sl, uint64_t packets, uint64_t bytes);

}  // namespace softverbs::mad
