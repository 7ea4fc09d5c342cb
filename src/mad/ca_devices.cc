#include "mad/ca_devices.h"

#include <endian.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "mad/agent.h"
#include "mad/data_route.h"
#include "mad/subnet_sma.h"
#include "verbs/device_attrs.h"
#include "verbs/sysfs_port.h"

namespace softverbs::mad {
namespace {

// The node behind each device index: the topology is constant for the
// process, and so is this.
const std::vector<int>& device_nodes(const Subnet& s) {
  static const std::vector<int> nodes = ca_device_nodes(*s.topology);
  return nodes;
}

}  // namespace

unsigned ca_device_count(const shm::Segment& seg) {
  const Subnet* s = loaded_subnet_of(seg);
  if (s == nullptr) return 1;
  const size_t n = device_nodes(*s).size();
  return n == 0 ? 1 : static_cast<unsigned>(n);
}

bool ca_device_port(const shm::Segment& seg, unsigned device, PortView* out) {
  const Subnet* loaded = loaded_subnet_of(seg);
  if (loaded == nullptr || device >= device_nodes(*loaded).size()) return false;
  Subnet s = *loaded;
  shm::SubnetLock lock(*s.state);
  s.local = port_view(seg);
  *out = subnet_port_view(s, static_cast<unsigned>(device_nodes(s)[device]), 1, 1);
  return true;
}

namespace {
// Another CA's own answers over what every port of the device shares.
void apply_ca_view(const PortView& v, ibv_port_attr* attr) {
  attr->lid = v.lid;
  attr->sm_lid = v.sm_lid;
  attr->sm_sl = v.sm_sl;
  attr->lmc = v.lmc;
  attr->state = static_cast<ibv_port_state>(v.port_state);
  attr->phys_state = v.phys_state;
  attr->port_cap_flags = v.cap_mask;
}

// Its port's sysfs files, when the tree beside the segment exists
// (verbs/sysfs_port.h: whoever changes a port writes them again).
void refresh_ca_device_sysfs(const shm::Segment& seg, unsigned device, const PortView& v) {
  const std::string dir = verbs::sysfs_device_dir(seg, device);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return;
  ibv_port_attr a;
  verbs::fill_port_attr(seg, &a);
  apply_ca_view(v, &a);
  verbs::write_sysfs_port(dir + "/ports/1", seg, a, v.pkeys, htobe64(v.port_guid));
}
}  // namespace

bool fill_ca_device_port_attr(const shm::Segment& seg, unsigned device, ibv_port_attr* attr, PortView* view) {
  verbs::fill_port_attr(seg, attr);
  PortView v;
  if (device == 0 || !ca_device_port(seg, device, &v)) return false;
  apply_ca_view(v, attr);
  if (view != nullptr) *view = v;
  return true;
}

std::vector<CaDevicePortState> ca_device_port_states(const Subnet& s) {
  std::vector<CaDevicePortState> states;
  if (s.topology == nullptr || s.state == nullptr) return states;
  const std::vector<int>& nodes = device_nodes(s);
  for (size_t k = 1; k < nodes.size(); ++k)
    states.push_back({subnet_port_view(s, static_cast<unsigned>(nodes[k]), 1, 1)});
  return states;
}

std::vector<bool> reregistered_devices(const Subnet& s, const std::vector<unsigned>& nodes) {
  std::vector<bool> devices;
  if (nodes.empty() || s.topology == nullptr) return devices;
  const std::vector<int>& device_node = device_nodes(s);
  devices.assign(device_node.size() > 0 ? device_node.size() - 1 : 0, false);
  for (size_t k = 1; k < device_node.size(); ++k)
    for (const unsigned n : nodes)
      if (static_cast<int>(n) == device_node[k]) devices[k - 1] = true;
  return devices;
}

void append_ca_device_events(const shm::Segment& seg, const std::vector<CaDevicePortState>& was,
                             const std::vector<CaDevicePortState>& now, const std::vector<bool>& reregistered) {
  for (size_t i = 0; i < was.size() && i < now.size(); ++i) {
    const PortView& a = was[i].view;
    const PortView& b = now[i].view;
    const bool reregister = i < reregistered.size() && reregistered[i];
    uint64_t bits =
        shm::port_change_events({a.lid, a.sm_lid, a.port_state}, {b.lid, b.sm_lid, b.port_state}, reregister);
    if (a.pkeys != b.pkeys) bits |= 1ull << IBV_EVENT_PKEY_CHANGE;
    if (bits == 0 && a.phys_state == b.phys_state && a.cap_mask == b.cap_mask && a.lmc == b.lmc && a.sm_sl == b.sm_sl)
      continue;
    const auto device = static_cast<unsigned>(i + 1);
    shm::append_port_events(seg, bits, static_cast<uint8_t>(device));
    refresh_ca_device_sysfs(seg, device, b);
  }
}

uint16_t ca_device_pkey(const shm::Segment& seg, unsigned device, unsigned index) {
  PortView v;
  if (index >= v.pkeys.size() || !ca_device_port(seg, device, &v)) return 0;
  return v.pkeys[index];
}

bool ca_device_carries(const shm::Segment& seg, unsigned from, uint16_t dlid, const uint8_t* dgid_guid,
                       unsigned to, uint8_t sl, uint16_t* slid, uint64_t* port_guid) {
  const Subnet* loaded = loaded_subnet_of(seg);
  if (loaded == nullptr) return false;
  const std::vector<int>& nodes = device_nodes(*loaded);
  if (from >= nodes.size() || to >= nodes.size()) return false;
  Subnet s = *loaded;
  shm::SubnetLock lock(*s.state);
  s.local = port_view(seg);
  const auto src = static_cast<unsigned>(nodes[from]);
  const PortView source = subnet_port_view(s, src, 1, 1);
  *slid = source.lid;
  *port_guid = source.port_guid;
  return route_data(s, src, dlid, dgid_guid, static_cast<unsigned>(nodes[to]), sl);
}

void ca_device_count_traffic(const shm::Segment& seg, unsigned from, uint16_t dlid, unsigned to, uint8_t sl,
                             uint64_t packets, uint64_t bytes) {
  const Subnet* loaded = loaded_subnet_of(seg);
  if (loaded == nullptr) return;
  const std::vector<int>& nodes = device_nodes(*loaded);
  if (from >= nodes.size() || to >= nodes.size()) return;
  Subnet s = *loaded;
  shm::SubnetLock lock(*s.state);
  s.local = port_view(seg);
  DataPath path;
  if (route_data(s, static_cast<unsigned>(nodes[from]), dlid, nullptr, static_cast<unsigned>(nodes[to]), sl, &path) ||
      path.discarded)
    count_data_path(s, path, sl, packets, bytes);
}

uint64_t ca_device_multicast(const shm::Segment& seg, unsigned from, uint16_t mlid, uint8_t sl, uint64_t packets,
                             uint64_t bytes, uint16_t* slid, uint64_t* port_guid) {
  const Subnet* loaded = loaded_subnet_of(seg);
  if (loaded == nullptr) return 0;
  const std::vector<int>& nodes = device_nodes(*loaded);
  if (from >= nodes.size()) return 0;
  Subnet s = *loaded;
  shm::SubnetLock lock(*s.state);
  s.local = port_view(seg);
  const auto src = static_cast<unsigned>(nodes[from]);
  const PortView source = subnet_port_view(s, src, 1, 1);
  *slid = source.lid;
  *port_guid = source.port_guid;
  const uint64_t reached = route_multicast(s, src, mlid, sl, packets, bytes);
  uint64_t devices = 0;
  for (size_t k = 0; k < nodes.size() && k < 64; ++k)
    if ((reached >> nodes[k] & 1) != 0) devices |= 1ull << k;
  return devices;
}

}  // namespace softverbs::mad
