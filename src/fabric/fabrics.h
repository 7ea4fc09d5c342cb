// The fabrics of this process's device, behind the one face the verbs layer
// sees: which link carries a QP's requests, and the hooks that memory
// registration and the service thread call. verbs/ includes this (and
// port_config.h), never a fabric itself (tests/structure/include_graph.py).
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "fabric/device_host.h"
#include "fabric/fault/fault_config.h"
#include "transport/link.h"
#include "transport/target_memory.h"
#include "util/status.h"
#include "wire/roce_udp.h"

namespace softverbs::fabric {

// What the fabrics need to know of the device's port; the verbs layer owns
// the port's configuration (verbs/port_config.h) and hands this over.
struct PortSetup {
  bool roce = false;
  std::vector<wire::Gid> gids;  // RoCE: index = GID index
  uint16_t udp_port = wire::kRoceV2Port;
  ibv_mtu mtu = IBV_MTU_4096;
  fault::FaultConfig faults;  // SOFTVERBS_FAULTS: what the fabrics do to their traffic

  // The index of `gid` among the port's GIDs, or -1.
  int gid_index(const uint8_t gid[16]) const;
};
// Before the fabrics are used: the port they serve (the first call wins;
// a process has one device). Until then, an InfiniBand port without faults.
void configure(const PortSetup& port);
const PortSetup& port();

// With SOFTVERBS_TOPOLOGY the segment's QPs sit behind the ports of several
// CAs (issue 19: shm::SharedQp::ca). The host link carries a request
// between two QPs of the device's own CA itself; any other it hands to
// this, the management plane's answer (it knows the subnet, which the
// fabrics must not), on a slow path that may take the subnet's lock:
// whether the subnet carries a packet from port 1 of CA `from_ca` to `ah`
// (the sender's port ACTIVE, across up links and the switches' forwarding
// tables as an SM programmed them, every port crossed ACTIVE) to port 1 of
// CA `to_ca`. `*source` gets the sender's port's addresses.
struct SubnetSource {  // filled by the route, read only once it said yes
  uint16_t lid;
  uint8_t port_guid[8];  // network order, as a GID's interface ID
};
using SubnetRoute = bool (*)(const shm::Segment& seg, uint8_t from_ca, const ibv_ah_attr& ah, uint8_t to_ca,
                             SubnetSource* source);
// The packets on service level `sl` the subnet carried from CA `from_ca`
// to `dlid` (CA `to_ca`), counted on every port of their route (`bytes`:
// their payload): the PMA of the ports they cross shows them, not the
// device's port (issue 19). Called too for packets the route refused: a
// port that discarded them for an SL on VL15 counts them.
using SubnetCount = void (*)(const shm::Segment& seg, uint8_t from_ca, uint16_t dlid, uint8_t to_ca, uint8_t sl,
                             uint32_t packets, uint64_t bytes);
// A UD multicast datagram of `packets` packets (`bytes`: their payload)
// on service level `sl` from CA `from_ca` to `mlid`: the CAs the switches'
// multicast forwarding tables carry it to (bit k: CA k's port), counted on
// every port it crosses; `*source` gets the sender's port's addresses.
using SubnetMulticast = uint64_t (*)(const shm::Segment& seg, uint8_t from_ca, uint16_t mlid, uint8_t sl,
                                     uint32_t packets, uint64_t bytes, SubnetSource* source);
// Set where the device is opened with a topology (any call wins; the same
// functions every time). Unset, a request that needs it is lost.
void set_subnet_route(SubnetRoute route, SubnetCount count, SubnetMulticast multicast);
SubnetRoute subnet_route();
SubnetCount subnet_count();
SubnetMulticast subnet_multicast();

// The link that reaches `ah` from a QP of type `qp_type`, chosen at RTR: the
// host link for QPs of this host's device, the UDP link (started on first
// use) for other hosts. A UD QP has no address of its own: on a RoCE port it
// takes the UDP link, which hands datagrams for this host to the host link.
Result<transport::Link*> link_for(DeviceHost& device, const ibv_ah_attr& ah, uint8_t qp_type);

// ibv_attach_mcast: a QP of this process joined the group `mgid`. On a RoCE
// port the UDP fabric (started if need be) counts the process's QPs in each
// group and joins the IP multicast group the MGID maps to with the first;
// on InfiniBand nothing is needed (the host link finds the group's QPs in
// the segment).
Status join_multicast(DeviceHost& device, const uint8_t mgid[16]);
// One of them left it (detached or destroyed); the last leaves the IP group.
void leave_multicast(const uint8_t mgid[16]);

// Where peers can reach a registered region's pages, as the fabrics keep it
// for the MR's lifetime (the shared MR entry publishes it: shm::SharedMr's
// map_* fields).
struct RegionExport {
  int fd = -1;  // -1: not reachable that way
  uint64_t base = 0;  // virtual address of file offset 0
  uint64_t size = 0;
  uint64_t ino = 0;
  uint64_t dev = 0;
  uint64_t span_id = 0;
};
// ibv_reg_mr: the fabrics prepare [addr, addr + length) for peers (the host
// fabric moves private anonymous memory onto a memfd that peers map).
RegionExport export_region(uint64_t addr, uint64_t length);
// The last MR over the export is gone.
void unexport_region(const RegionExport& region);
// A key was invalidated (ibv_dereg_mr, ibv_rereg_mr): returns once every
// access to this process's memory that a fabric began under the old key has
// finished — as an HCA finishes its DMA before deregistration returns — so
// the application may free the memory. The UDP fabric's responder reaches
// our memory directly, under its receive locks.
void quiesce_local_access();

// Runs fn(memory, arg) with `owner`'s memory, another process of this
// host's device, reached as the host link reaches a peer's (map, cma,
// bounce): for a packet link's responder whose request lands in another
// process (an XRC SRQ of a domain shared through a file).
void with_peer_memory(shm::Segment& seg, shm::OwnerId owner, void (*fn)(transport::TargetMemory&, void*), void* arg);

// The service thread's hooks. attach: once, when the process attaches to the
// device; serve: each time it wakes (whether it did any work); sweep: every
// couple of seconds.
Status attach(shm::Segment& seg, shm::OwnerId self);
bool serve(shm::Segment& seg, shm::OwnerId self);
void sweep();

}  // namespace softverbs::fabric
