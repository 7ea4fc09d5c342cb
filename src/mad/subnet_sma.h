// The subnet management agents of every node of a topology (issue 19): an
// SMP the device's port sends is carried along the topology's links — by
// directed route (IBA 14.2.2: hop pointer and count, initial and return
// paths) or by LID through the switches' linear forwarding tables — and
// answered by the node it reaches, against that node's state in the shared
// subnet state (shm/subnet_state.h), in the sender's thread: no daemon, as
// the device's own SMA (mad/sma.h) answers.
//
// A CA's port is answered by the same codec as the device's port (a
// PortView of it); a switch adds SwitchInfo and its forwarding tables. An
// SMP whose path leaves the fabric (a port without a link, a port a switch
// does not have, a CA in the middle of a path, an unprogrammed LFT entry)
// is dropped, as the IBA drops it: its sender times out.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mad/notice.h"
#include "mad/port_view.h"
#include "mad/sma.h"
#include "mad/topology.h"
#include "shm/subnet_state.h"

namespace softverbs::mad {

struct Subnet {
  const Topology* topology = nullptr;
  const shm::SubnetState* state = nullptr;
  // The device's port: port 1 of topology->local_ca(), answered as the
  // device answers (its GUIDs, LID and tables are the segment's).
  PortView local;
};

// Whether an SMP the device's port sends leaves the port: a directed route
// of one hop or more, or a LID other than the port's own.
bool leaves_port(const PortView& local, const uint8_t* in, size_t len, uint16_t dlid);

// An SMP that does not leave the port is answered for the device's CA as
// the topology has it (its port count; ports other than 1 from the subnet
// state), port 1 by the device's own SMA codec.
// REQUIRES: `out` holds kMadBytes; the caller holds a SubnetLock on
// subnet.state. `dlid` is the destination of a LID-routed SMP (ignored for
// a directed route). `local_effect` receives a Set's effect on the device's
// own port (a path that comes back to it), for the caller to store.
// `traps` (if not null) receives the traps a Set raised that reach the
// device's port (a switch's link state change: mad/notice.h), for the
// caller to hand to the SM's agent.
Disposition answer_subnet_smp(const Subnet& subnet, const uint8_t* in, size_t len, uint16_t dlid, uint8_t* out,
                              SmpEffect* local_effect, RaisedTraps* traps = nullptr);

// Where a LID-routed packet from the device's port to `dlid` arrives:
// across its link, then from switch to switch by their LFTs, to the port
// whose LID range holds `dlid` (a switch's: its port 0's LID). False when
// nothing carries it there (an unlinked port, an unprogrammed LFT entry, a
// loop). REQUIRES: the caller holds a SubnetLock on subnet.state.
bool route_lid(const Subnet& subnet, uint16_t dlid, unsigned* node, uint8_t* arrival_port);

// The PortView of `port` of node `node` as the subnet state has it (for
// the SMA and for libibumad's view of the topology).
PortView subnet_port_view(const Subnet& subnet, unsigned node, unsigned port, unsigned arrival_port);

}  // namespace softverbs::mad
