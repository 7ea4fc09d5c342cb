// IP addresses to devices, as the kernel's rdma_cm decides it for
// softverbs' devices.
//
//   - softverbs_roce0 owns its port's GIDs (SOFTVERBS_ROCE_ADDR);
//   - softverbs0 takes 127.0.0.0/8, ::1 and this host's other addresses;
//   - a destination that is not local goes out through a RoCE device.
// Lookups (getifaddrs) happen in the caller's network namespace.
#pragma once

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
// The GID an IP address has on a RoCE port (IPv4-mapped for IPv4).
ibv_gid gid_of(const sockaddr* sa);

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
