#include "fabric/fabrics.h"

#include <atomic>

#include "fabric/host/bounce_server.h"
#include "fabric/host/host_fabric.h"
#include "fabric/host/mr_backing.h"
#include "fabric/host/peer_memory.h"
#include "fabric/udp/udp_fabric.h"

#include <cstring>
#include <mutex>

namespace softverbs::fabric {
namespace {

PortSetup g_port;
std::once_flag g_port_once;

}  // namespace

int PortSetup::gid_index(const uint8_t gid[16]) const {
  for (size_t i = 0; i < gids.size(); ++i)
    if (std::memcmp(gids[i].data(), gid, 16) == 0) return static_cast<int>(i);
  return -1;
}

void configure(const PortSetup& port) {
  std::call_once(g_port_once, [&] { g_port = port; });
}

const PortSetup& port() { return g_port; }

namespace {
std::atomic<SubnetRoute> g_subnet_route{nullptr};
std::atomic<SubnetCount> g_subnet_count{nullptr};
std::atomic<SubnetMulticast> g_subnet_multicast{nullptr};
}  // namespace

void set_subnet_route(SubnetRoute route, SubnetCount count, SubnetMulticast multicast) {
  g_subnet_count.store(count, std::memory_order_release);
  g_subnet_multicast.store(multicast, std::memory_order_release);
  g_subnet_route.store(route, std::memory_order_release);
}
SubnetRoute subnet_route() { return g_subnet_route.load(std::memory_order_acquire); }
SubnetCount subnet_count() { return g_subnet_count.load(std::memory_order_acquire); }
SubnetMulticast subnet_multicast() { return g_subnet_multicast.load(std::memory_order_acquire); }

Result<transport::Link*> link_for(DeviceHost& device, const ibv_ah_attr& ah, uint8_t qp_type) {
  const PortSetup& config = port();
  if (!config.roce || (qp_type != IBV_QPT_UD && config.gid_index(ah.grh.dgid.raw) >= 0)) return &host::host_fabric();
  udp::UdpFabric& udp = udp::udp_fabric();
  SV_RETURN_IF_ERROR(udp.start(device, config.gids, config.udp_port, host::host_fabric()));
  return &udp;
}

Status join_multicast(DeviceHost& device, const uint8_t mgid[16]) {
  const PortSetup& config = port();
  if (!config.roce) return Status::ok();
  udp::UdpFabric& udp = udp::udp_fabric();
  SV_RETURN_IF_ERROR(udp.start(device, config.gids, config.udp_port, host::host_fabric()));
  return udp.join(mgid);
}

void leave_multicast(const uint8_t mgid[16]) {
  if (port().roce) udp::udp_fabric().leave(mgid);
}

RegionExport export_region(uint64_t addr, uint64_t length) { return host::acquire_backing(addr, length); }
void unexport_region(const RegionExport& region) { host::release_backing(region); }
void quiesce_local_access() {
  if (g_port.roce) udp::udp_fabric().quiesce();
}

void with_peer_memory(shm::Segment& seg, shm::OwnerId owner, void (*fn)(transport::TargetMemory&, void*), void* arg) {
  host::PeerMemory mem(seg, owner);
  fn(mem, arg);
}

Status attach(shm::Segment& seg, shm::OwnerId self) { return host::prepare_bounce_slots(seg, self); }
bool serve(shm::Segment& seg, shm::OwnerId self) { return host::serve_bounce_requests(seg, self); }
void sweep() { host::release_stale_mappings(); }

}  // namespace softverbs::fabric
