// The management agents of the device's port, as one entry point: a MAD
// that reached the port goes to the agent of its class (mad/sma.h: 0x01 and
// 0x81; mad/pma.h: 0x04) and is answered against the port's state in the
// shared segment, in the sender's process and thread, as the data path
// answers (no daemon). Independent of how the MAD travelled: today the
// local libibumad (src/abi/ibumad) calls it; later, whatever carries MADs
// between hosts and QP1 demultiplexers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mad/notice.h"
#include "mad/sma.h"
#include "shm/segment.h"

namespace softverbs::mad {

// REQUIRES: `out` holds kMadBytes. `dlid` is where a LID-routed MAD is
// addressed: the port's own LIDs (or the permissive LID) reach its agents;
// a subnet management packet for another LID, or a directed route of one
// hop or more, goes into the subnet of SOFTVERBS_TOPOLOGY
// (mad/subnet_sma.h) and is dropped without one. Classes without an agent
// in the device are dropped (they belong to userspace agents, which come
// later), and so is an SMP that finds the port's VL15 buffer full
// (mad/vl15_buffer.h: counted in VL15Dropped).
// `traps` (if not null) receives the traps the MAD's handling raised on
// the subnet's nodes that reach this port (mad/notice.h), for the caller to
// hand to the SM's agent.
Disposition answer_mad(const shm::Segment& seg, const uint8_t* in, size_t len, uint16_t dlid, uint8_t* out,
                       RaisedTraps* traps = nullptr);

// A GMP for a LID that is not the port's: with SOFTVERBS_TOPOLOGY, a PMA
// GMP (class 0x04) is answered by the node of the subnet that holds the LID
// (mad/subnet_pma.h); anything else, or without a topology, is dropped.
// REQUIRES: `out` holds kMadBytes.
Disposition answer_remote_gmp(const shm::Segment& seg, const uint8_t* in, size_t len, uint16_t dlid, uint8_t* out);

// The first process to attach to the device gives its port the QoS tables
// of SOFTVERBS_QOS_CONFIG (mad/qos_config_file.h), else those of
// SOFTVERBS_TOPOLOGY's file, if it has any (mad/topology_qos.h); every later
// call stores nothing, so an SM's tables are never undone, and warns once
// when the process's SOFTVERBS_QOS_CONFIG differs from what the port has.
// Called where a process attaches: the verbs device and libibumad.
void claim_boot_qos(const shm::Segment& seg);

struct Subnet;
// SOFTVERBS_TOPOLOGY's subnet as this process loaded it (once, for the
// process's life); nullptr without one or when it could not be used. Its
// `local` view is empty: take port_view(seg) under the subnet's lock.
const Subnet* loaded_subnet_of(const shm::Segment& seg);

// Whether SOFTVERBS_TOPOLOGY names a file that could not be used (its
// error already logged): the device then refuses management access.
bool topology_failed();

}  // namespace softverbs::mad
