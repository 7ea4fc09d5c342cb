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
// the requester's timer decides.
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
// the wire. REQUIRES: the caller holds a SubnetLock on subnet.state.
bool route_data(const Subnet& subnet, unsigned from, uint16_t dlid, const uint8_t* dgid_guid, unsigned to);

}  // namespace softverbs::mad
