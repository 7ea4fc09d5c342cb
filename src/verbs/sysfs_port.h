// The port's directory of the device's sysfs tree (abi/ibverbs/sysfs_tree.h):
// class/infiniband/<dev>/ports/1/{state,phys_state,lid,sm_lid,rate,...}, as
// the kernel's ib_core shows a port. ibstatus and libibumad's readers take
// the port's state from these files, so whoever changes the port (an SM's
// PortInfo Set, mad/agent.cc) writes them again; no daemon keeps them.
//
// Thread-safety: each file is replaced by rename, so a reader sees the old
// text or the new one, never a part. Writers of one tree serialize on the
// segment's control lock (refresh_sysfs_port's REQUIRES).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "shm/port_pkeys.h"
#include "shm/segment.h"

namespace softverbs::verbs {

// Writes the port's files into `port_dir` (created if need be). Whether all were written.
bool write_sysfs_port(const std::string& port_dir, const shm::Segment& seg);
// The same for a port described by `a` and `pkeys`, whose GIDs' interface
// ID is `port_guid_be` (a topology's other CA: mad/ca_devices.h).
bool write_sysfs_port(const std::string& port_dir, const shm::Segment& seg, const ibv_port_attr& a,
                      const shm::PKeyTable& pkeys, uint64_t port_guid_be);

// The name of device `index` (0: the configured device; k: a topology's
// other CA, named on from it: softverbs0 -> softverbsk).
std::string device_name(unsigned index);
// class/infiniband/<device_name(index)> of the tree beside `seg`.
std::string sysfs_device_dir(const shm::Segment& seg, unsigned index);

// The port directory of the tree beside `seg`, written again if the tree
// exists (a process that never built one leaves it to whoever does).
// REQUIRES: the segment's control lock.
void refresh_sysfs_port(const shm::Segment& seg);

// ports/1/cap_mask made to say `cap_mask`, if the tree exists and it says
// otherwise: the IsSM bit follows the issm file's holder (verbs/issm.h),
// whose open and close nobody sees, so whoever answers PortInfo under an
// external SM brings the file up to date. No lock: every writer writes
// what it just read from the port, each file replaced whole.
void sync_sysfs_cap_mask(const shm::Segment& seg, uint32_t cap_mask);

}  // namespace softverbs::verbs
