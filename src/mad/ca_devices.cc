#include "mad/ca_devices.h"

#include <vector>

#include "mad/agent.h"
#include "mad/data_route.h"
#include "mad/subnet_sma.h"

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

bool ca_device_carries(const shm::Segment& seg, unsigned from, uint16_t dlid, const uint8_t* dgid_guid,
                       unsigned to, uint16_t* slid, uint64_t* port_guid) {
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
  return route_data(s, src, dlid, dgid_guid, static_cast<unsigned>(nodes[to]));
}

void ca_device_count_traffic(const shm::Segment& seg, unsigned from, uint16_t dlid, unsigned to, uint64_t packets,
                             uint64_t bytes) {
  const Subnet* loaded = loaded_subnet_of(seg);
  if (loaded == nullptr) return;
  const std::vector<int>& nodes = device_nodes(*loaded);
  if (from >= nodes.size() || to >= nodes.size()) return;
  Subnet s = *loaded;
  shm::SubnetLock lock(*s.state);
  s.local = port_view(seg);
  DataPath path;
  if (route_data(s, static_cast<unsigned>(nodes[from]), dlid, nullptr, static_cast<unsigned>(nodes[to]), &path))
    count_data_path(s, path, packets, bytes);
}

}  // namespace softverbs::mad
