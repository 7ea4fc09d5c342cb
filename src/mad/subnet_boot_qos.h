// The QoS tables a subnet's ports boot with, from its topology file's
// "# softverbs: qos_*" lines (mad/topology_qos.h), for a subnet without an
// SM (issue 20): every CA port gets the qos_ca_ set, every switch's port 0
// the qos_sw0_ set, its other ports the qos_swe_ set. A switch's SL2VL is
// per input and output port: each output port's table is the same for
// every input port, as opensm sends them.
#pragma once

#include "mad/topology.h"
#include "shm/subnet_state.h"

namespace softverbs::mad {

// Writes them into a new subnet state's nodes (SubnetState::open's
// on_create), indexed as the topology's. A set the file does not give
// keeps the state's boot tables.
void boot_subnet_qos(const Topology& t, shm::SubnetNode* nodes);

}  // namespace softverbs::mad
