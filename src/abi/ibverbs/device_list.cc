// Device enumeration and opening: ibv_get_device_list & co, ibv_open_device.
#include <endian.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "abi/ibverbs/abi.h"
#include "abi/ibverbs/sysfs_tree.h"
#include "fabric/fabrics.h"
#include "mad/agent.h"
#include "mad/ca_devices.h"
#include "mad/port_view.h"
#include "mad/qos_config_file.h"
#include "shm/subnet_state.h"
#include "verbs/context.h"
#include "verbs/device.h"
#include "verbs/device_attrs.h"
#include "verbs/port_config.h"
#include "verbs/sysfs_port.h"

using softverbs::verbs::Context;
using softverbs::verbs::Device;

namespace {

// Device 0 is the device's own CA; with SOFTVERBS_TOPOLOGY, 1.. are the
// topology's other CAs (mad/ca_devices.h), named on from device 0's name.
constexpr unsigned kMaxDevices = softverbs::shm::kSubnetMaxNodes;

ibv_device* device_at(unsigned index) {
  static ibv_device devs[kMaxDevices];
  static std::once_flag once;
  std::call_once(once, [] {
    const char* root = ibv_get_sysfs_path();
    for (unsigned i = 0; i < kMaxDevices; ++i) {
      ibv_device& d = devs[i];
      d.node_type = IBV_NODE_CA;
      d.transport_type = IBV_TRANSPORT_IB;
      const std::string n = softverbs::verbs::device_name(i);
      std::strncpy(d.name, n.c_str(), sizeof d.name - 1);
      std::snprintf(d.dev_name, sizeof d.dev_name, "uverbs_%s", n.c_str());
      // The device's own sysfs tree (sysfs_tree.h) holds device 0's directories.
      std::snprintf(d.dev_path, sizeof d.dev_path, "%s/class/infiniband_verbs/uverbs_%s", root, n.c_str());
      std::snprintf(d.ibdev_path, sizeof d.ibdev_path, "%s/class/infiniband/%s", root, n.c_str());
    }
  });
  return &devs[index];
}

ibv_device* soft_device() { return device_at(0); }

// The device's index, or -1 when `d` is not one of ours.
int index_of(const ibv_device* d) {
  const ibv_device* first = device_at(0);
  if (d < first || d >= first + kMaxDevices) return -1;
  return static_cast<int>(d - first);
}

// The host link's question about a request to or from another CA
// (fabric::SubnetRoute), answered by the subnet's data path.
bool subnet_carries(const softverbs::shm::Segment& seg, uint8_t from, const ibv_ah_attr& ah, uint8_t to,
                    softverbs::fabric::SubnetSource* source) {
  uint64_t guid = 0;
  const bool carried = softverbs::mad::ca_device_carries(seg, from, ah.dlid, ah.is_global ? ah.grh.dgid.raw + 8 : nullptr,
                                                          to, ah.sl, &source->lid, &guid);
  const uint64_t be = htobe64(guid);
  std::memcpy(source->port_guid, &be, sizeof be);
  return carried;
}

// The host link's count of what the subnet carried (fabric::SubnetCount).
void subnet_counts(const softverbs::shm::Segment& seg, uint8_t from, uint16_t dlid, uint8_t to, uint8_t sl,
                   uint32_t packets, uint64_t bytes) {
  softverbs::mad::ca_device_count_traffic(seg, from, dlid, to, sl, packets, bytes);
}

// Which CAs the subnet carries a multicast datagram to (fabric::SubnetMulticast).
uint64_t subnet_multicast(const softverbs::shm::Segment& seg, uint8_t from, uint16_t mlid, uint8_t sl,
                          uint32_t packets, uint64_t bytes, softverbs::fabric::SubnetSource* source) {
  uint64_t guid = 0;
  const uint64_t reached = softverbs::mad::ca_device_multicast(seg, from, mlid, sl, packets, bytes, &source->lid, &guid);
  const uint64_t be = htobe64(guid);
  std::memcpy(source->port_guid, &be, sizeof be);
  return reached;
}

// How many devices the process lists: 1, or with a topology 1 + its other CAs.
unsigned device_count(const softverbs::shm::Segment& seg) {
  if (softverbs::mad::loaded_subnet_of(seg) == nullptr) return 1;
  softverbs::fabric::set_subnet_route(subnet_carries, subnet_counts, subnet_multicast);
  softverbs::verbs::set_subnet_pkey_at(softverbs::mad::ca_device_pkey);
  return std::min(softverbs::mad::ca_device_count(seg), kMaxDevices);
}

}  // namespace

SV_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  int n = 0;
  ibv_device** list = nullptr;
  // A QoS file the port cannot take: no device, as for a bad SOFTVERBS_* setting.
  softverbs::Result<Device*> dev = softverbs::mad::qos_config_refused() ? softverbs::Result<Device*>(softverbs::Status::error(EINVAL)) : Device::get();
  const unsigned count = dev.is_ok() ? device_count(dev.value()->seg()) : 0;
  list = static_cast<ibv_device**>(calloc(count + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  if (dev.is_ok()) {
    // Before any QP of this process sends: the boot QoS tables.
    softverbs::mad::claim_boot_qos(dev.value()->seg());
    for (unsigned i = 0; i < count; ++i) list[n++] = device_at(i);
  }
  if (num_devices != nullptr) *num_devices = n;
  return list;
}

SV_EXPORT void ibv_free_device_list(ibv_device** list) { free(list); }

SV_EXPORT const char* ibv_get_device_name(ibv_device* device) {
  if (device == nullptr) return softverbs::abi::fail<const char>(EINVAL);
  return device->name;
}

SV_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
  softverbs::Result<Device*> dev = Device::get();
  const int index = index_of(device);
  softverbs::mad::PortView port;
  if (index < 0 || !dev.is_ok() ||
      (index > 0 && !softverbs::mad::ca_device_port(dev.value()->seg(), static_cast<unsigned>(index), &port))) {
    errno = EINVAL;
    return 0;
  }
  return index == 0 ? dev.value()->seg().header().node_guid : htobe64(port.node_guid);
}

SV_EXPORT int ibv_get_device_index(ibv_device* device) { return index_of(device); }

SV_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  const int index = index_of(device);
  softverbs::Result<Device*> dev = Device::get();
  if (index < 0 || !dev.is_ok() || static_cast<unsigned>(index) >= device_count(dev.value()->seg()))
    return softverbs::abi::fail<ibv_context>(EINVAL);
  const softverbs::verbs::Placement placement{static_cast<uint8_t>(index),
                                              softverbs::mad::loaded_subnet_of(dev.value()->seg()) != nullptr};
  softverbs::Result<Context*> ctx = Context::open(device, placement);
  if (!ctx.is_ok()) return softverbs::abi::fail<ibv_context>(ctx.code());
  softverbs::abi::fill_context_ops(ctx.value()->vctx());
  return ctx.value()->ibv();
}

SV_EXPORT int ibv_close_device(ibv_context* context) {
  if (context == nullptr) return EINVAL;
  delete Context::from(context);
  return 0;
}

// ibv_import_device(3): cmd_fd is a dup of a softverbs context's (another
// process's too); the new context shares its PD handles (context_file.h).
SV_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  softverbs::Result<Device*> dev = Device::get();
  if (cmd_fd < 0 || !dev.is_ok()) return softverbs::abi::fail<ibv_context>(EINVAL);
  const softverbs::verbs::Placement placement{0, softverbs::mad::loaded_subnet_of(dev.value()->seg()) != nullptr};
  softverbs::Result<Context*> ctx = Context::import(soft_device(), cmd_fd, placement);
  if (!ctx.is_ok()) return softverbs::abi::fail<ibv_context>(ctx.code());
  softverbs::abi::fill_context_ops(ctx.value()->vctx());
  return ctx.value()->ibv();
}
