#include "mad/ca_devices.h"

#include <vector>

#include "mad/agent.h"
#include "mad/data_route.h"
#include "mad/subnet_sma.h"
#include "verbs/device_attrs.h"

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

bool fill_ca_device_port_attr(const shm::Segment& seg, unsigned device, ibv_port_attr* attr, PortView* view) {
  verbs::fill_port_attr(seg, attr);
  PortView v;
  if (device == 0 || !ca_device_port(seg, device, &v)) return false;
  attr->lid = v.lid;
  attr->sm_lid = v.sm_lid;
  attr->sm_sl = v.sm_sl;
  attr->lmc = v.lmc;
  attr->state = static_cast<ibv_port_state>(v.port_state);
  attr->phys_state = v.phys_state;
  attr->port_cap_flags = v.cap_mask;
  if (view != nullptr) *view = v;
  return true;
}

std::vector<CaDevicePortState> ca_device_port_states(const Subnet& s) {
  std::vector<CaDevicePortState> states;
  if (s.topology == nullptr || s.state == nullptr) return states;
  const std::vector<int>& nodes = device_nodes(s);
  for (size_t k = 1; k < nodes.size(); ++k) {
    const PortView v = subnet_port_view(s, static_cast<unsigned>(nodes[k]), 1, 1);
    states.push_back({{v.lid, v.sm_lid, v.port_state}, v.pkeys});
  }
  return states;
}

void append_ca_device_events(const shm::Segment& seg, const std::vector<CaDevicePortState>& was,
                             const std::vector<CaDevicePortState>& now) {
  for (size_t i = 0; i < was.size() && i < now.size(); ++i) {
    uint64_t bits = shm::port_change_events(was[i].port, now[i].port, false);
    if (was[i].pkeys != now[i].pkeys) bits |= 1ull << IBV_EVENT_PKEY_CHANGE;
    shm::append_port_events(seg, bits, static_cast<uint8_t>(i + 1));
  }
}

uint16_t ca_device_pkey(const shm::Segment& seg, unsigned device, unsigned index) {
  PortView v;
  if (index >= v.pkeys.size() || !ca_device_port(seg, device, &v)) return 0;
  return v.pkeys[index];
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

}  // namespace softverbs::mad
