// The performance management agents of every node of a topology (issue
// 19): a PMA GMP (class 0x04) the device's port sends to another LID is
// carried through the switches' forwarding tables, as a LID-routed SMP is
// (mad/subnet_sma.h), and answered by the node it reaches for the ports
// its PortSelect names, in the sender's thread.
//
// What the ports count is what crosses them. The device's traffic between
// its own QPs leaves and enters through the device's port 1; so that port
// counts what the device's own PMA counts and the port at the other end of
// its link the same traffic the other way round (mirror_pma_counters).
// What the subnet carried between the topology's CAs is added on every port
// its route crossed (shm::SubnetPort::traffic, mad/data_route.h). MADs are
// not counted, by any port.
//
// The caller hands in the two counter sets as they stand since their last
// resets and applies the resets the answer asks for to them; a Set clears
// the ports' SubnetPort::traffic itself (under the caller's SubnetLock).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mad/pma.h"
#include "mad/subnet_sma.h"

namespace softverbs::mad {

struct LinkPmaCounters {
  PmaCounters local;  // the device's port (port 1 of topology->local_ca())
  PmaCounters peer;   // the port its link reaches
};

struct LinkPmaReset {  // PmaCounter bits to clear
  PmaMask local;
  PmaMask peer;
};

// REQUIRES: `out` holds kMadBytes; the caller holds a SubnetLock on
// subnet.state. A GMP no port of the subnet's LIDs holds is dropped (its
// sender times out).
Disposition answer_subnet_pma(const Subnet& subnet, const LinkPmaCounters& counters, const uint8_t* in, size_t len,
                              uint16_t dlid, uint8_t* out, LinkPmaReset* reset);

// A GMP for the device's own port, answered by the PMA of the device's CA
// as the topology has it (all its ports, port 1 the device's), as the
// SMA answers for it. REQUIRES: as above.
Disposition answer_local_ca_pma(const Subnet& subnet, const LinkPmaCounters& counters, const uint8_t* in, size_t len,
                                uint8_t* out, LinkPmaReset* reset);

}  // namespace softverbs::mad
