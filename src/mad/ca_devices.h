// The topology's CAs as the verbs ABI sees them (issue 19; the numbering
// and the data path's rules are mad/data_route.h's): how many devices
// SOFTVERBS_TOPOLOGY gives, each one's port as its SMA reports it, and
// whether the subnet carries a data packet between two of them. Without a
// topology there is one device, the device's own port.
//
// Thread-safety: any thread. Each call takes the subnet's lock (a slow
// path: never the default device's data path, which needs none of this).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "mad/port_view.h"
#include "shm/port_events.h"
#include "shm/segment.h"

namespace softverbs::mad {

// 1 + the topology's other CAs.
unsigned ca_device_count(const shm::Segment& seg);

// The port of device `device` (>= 1: another CA of the topology), as its
// SMA reports it (GUIDs, LID, SM LID, SM SL, LMC, state). False: no such
// device.
bool ca_device_port(const shm::Segment& seg, unsigned device, PortView* out);

// ibv_query_port's answer for device `device`: what every port of the
// device shares (speeds, MTU, VLs) with, for another CA, its own LID, SM
// LID, SM SL, LMC, state and capabilities. `*view` (when given) gets that
// CA's port; false for the device's own CA or no such device.
bool fill_ca_device_port_attr(const shm::Segment& seg, unsigned device, ibv_port_attr* attr,
                              PortView* view = nullptr);

// The P_Key at `index` of device `device`'s port (0: none, no such device).
uint16_t ca_device_pkey(const shm::Segment& seg, unsigned device, unsigned index);

// Whether a data packet on service level `sl` from device `from`'s port to
// `dlid` (and, with a GRH, `dgid_guid`, the DGID's interface ID in network
// order) reaches device `to`'s port (mad/data_route.h); `*slid` and
// `*port_guid` get the sender's port's LID and GUID (host order).
bool ca_device_carries(const shm::Segment& seg, unsigned from, uint16_t dlid, const uint8_t* dgid_guid,
                       unsigned to, uint8_t sl, uint16_t* slid, uint64_t* port_guid);

// Counts `packets` packets of `bytes` payload on service level `sl` from
// device `from`'s port to `dlid` on every port their route crosses up to
// device `to`'s port (mad/data_route.h count_data_path), or up to the port
// that discarded them for an SL on VL15; nothing when the subnet loses
// them otherwise.
void ca_device_count_traffic(const shm::Segment& seg, unsigned from, uint16_t dlid, unsigned to, uint8_t sl,
                             uint64_t packets, uint64_t bytes);

// The devices a multicast packet on `sl` from device `from`'s port to
// `mlid` reaches through the switches' multicast forwarding tables (bit k:
// device k's port; mad/data_route.h route_multicast), its `packets`
// packets of `bytes` payload counted on every port it crosses; `*slid` and
// `*port_guid` get the sender's port's LID and GUID (host order). 0 when
// the device has no topology.
uint64_t ca_device_multicast(const shm::Segment& seg, unsigned from, uint16_t mlid, uint8_t sl, uint64_t packets,
                             uint64_t bytes, uint16_t* slid, uint64_t* port_guid);

struct Subnet;

// What an SM's Set may change on the port of device k (index k - 1: the
// topology's other CAs), for the events it raises there.
struct CaDevicePortState {
  PortView view;
};
// REQUIRES: the caller holds a SubnetLock on subnet.state.
std::vector<CaDevicePortState> ca_device_port_states(const Subnet& subnet);
// The events between two such readings, each on its device's port
// (shm/port_events.h), and the changed ports' sysfs files written again.
// REQUIRES: the segment's control lock.
// `reregistered[k - 1]`: device k's port took a ClientReregister
// (IBV_EVENT_CLIENT_REREGISTER), whether or not anything else changed.
void append_ca_device_events(const shm::Segment& seg, const std::vector<CaDevicePortState>& was,
                             const std::vector<CaDevicePortState>& now, const std::vector<bool>& reregistered = {});
// The devices (index k - 1, as above) of the topology's CA nodes `nodes`.
// REQUIRES: the caller holds a SubnetLock on subnet.state.
std::vector<bool> reregistered_devices(const Subnet& subnet, const std::vector<unsigned>& nodes);

}  // namespace softverbs::mad
