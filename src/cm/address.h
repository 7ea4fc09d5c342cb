// IP addresses to devices, as the kernel's rdma_cm decides it for
// softverbs' devices.
//
//   - softverbs_roce0 owns its port's GIDs (SOFTVERBS_ROCE_ADDR);
//   - softverbs0 takes 127.0.0.0/8, ::1 and this host's other addresses;
//   - a destination that is not local goes out through a RoCE device.
// Lookups (getifaddrs) happen in the caller's network namespace.
//
// IB addresses (AF_IB, struct sockaddr_ib) name a port by its GID and a
// service by its ID (sib_sid under sib_sid_mask; the port is the low 16
// bits). As in the kernel's cma, only an InfiniBand port takes them
// (softverbs0): a RoCE port has no AF_IB capability.
#pragma once

#include <infiniband/ib.h>
#include <sys/socket.h>

#include <vector>

#include "cm/agent.h"
#include "shm/gsi_table.h"

namespace softverbs::cm {

shm::TableAddr table_addr(const sockaddr* sa);
bool is_wildcard(const sockaddr* sa);
uint16_t port_of(const sockaddr* sa);  // host order
void set_port(sockaddr* sa, uint16_t port);
socklen_t sockaddr_len(const sockaddr* sa);
// The GID an IP address has on a RoCE port (IPv4-mapped for IPv4); an IB
// address's own GID.
ibv_gid gid_of(const sockaddr* sa);

// The port space an AF_IB address's service ID selects for an id of port
// space `id_ps` (the kernel's cma_select_ib_ps): RDMA_PS_IB, TCP or UDP,
// with the ID and mask rewritten to that space; 0 if it selects none.
uint16_t select_ib_ps(uint16_t id_ps, sockaddr_ib* sib);
// The service ID a connection to `dst` asks for: an IB address's own, else
// (port space << 16) | port (IBA annex A11).
uint64_t service_id_of(uint16_t ps, const sockaddr* dst);
// An InfiniBand (not RoCE) device whose port has GID `g`, or nullptr.
Device* ib_device_of_gid(const std::vector<Device*>& devs, const ibv_gid& g);
// The InfiniBand device that reaches GID `g`: the one with the GID, else
// the first in its subnet (same prefix); nullptr if none.
Device* ib_device_for_dest(const std::vector<Device*>& devs, const ibv_gid& g);

// The device that owns local address `sa`, or nullptr.
Device* device_of_local(const std::vector<Device*>& devs, const sockaddr* sa);
// The device through which `dst` is reached, or nullptr.
Device* device_for_dest(const std::vector<Device*>& devs, const sockaddr* dst);
// The device an id joining an IP multicast group resolves to: that of its
// source address or of its binding, else the first RoCE device (the group
// reaches other hosts), else the host device. nullptr if none.
Device* device_for_group(const std::vector<Device*>& devs, Device* bound, const sockaddr* src);
// The source address a connection from `dev` to `dst` uses (port 0).
void source_for(const Device* dev, const sockaddr* dst, sockaddr_storage* out);

}  // namespace softverbs::cm
