// Device enumeration and opening: ibv_get_device_list & co, ibv_open_device.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "abi/ibverbs/abi.h"
#include "abi/ibverbs/sysfs_tree.h"
#include "mad/agent.h"
#include "mad/qos_config_file.h"
#include "verbs/context.h"
#include "verbs/device.h"
#include "verbs/device_attrs.h"
#include "verbs/port_config.h"

using softverbs::verbs::Context;
using softverbs::verbs::Device;

namespace {

ibv_device* soft_device() {
  static ibv_device dev = [] {
    ibv_device d{};
    d.node_type = IBV_NODE_CA;
    d.transport_type = IBV_TRANSPORT_IB;
    const std::string& name = softverbs::verbs::port_config().device_name;
    std::strncpy(d.name, name.c_str(), sizeof d.name - 1);
    std::snprintf(d.dev_name, sizeof d.dev_name, "uverbs_%s", name.c_str());
    // The device's own sysfs tree (sysfs_tree.h) holds these directories.
    const char* root = ibv_get_sysfs_path();
    std::snprintf(d.dev_path, sizeof d.dev_path, "%s/class/infiniband_verbs/uverbs_%s", root, name.c_str());
    std::snprintf(d.ibdev_path, sizeof d.ibdev_path, "%s/class/infiniband/%s", root, name.c_str());
    return d;
  }();
  return &dev;
}

bool is_ours(const ibv_device* d) { return d == soft_device(); }

}  // namespace

SV_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  auto** list = static_cast<ibv_device**>(calloc(2, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  int n = 0;
  // A QoS file the port cannot take: no device, as for a bad SOFTVERBS_* setting.
  if (!softverbs::mad::qos_config_refused()) {
    softverbs::Result<Device*> dev = Device::get();
    if (dev.is_ok()) {
      // Before any QP of this process sends: the boot QoS tables.
      softverbs::mad::claim_boot_qos(dev.value()->seg());
      list[n++] = soft_device();
    }
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
  if (device == nullptr || !is_ours(device) || !dev.is_ok()) {
    errno = EINVAL;
    return 0;
  }
  return dev.value()->seg().header().node_guid;
}

SV_EXPORT int ibv_get_device_index(ibv_device* device) {
  if (device == nullptr || !is_ours(device)) return -1;
  return 0;
}

SV_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (device == nullptr || !is_ours(device)) return softverbs::abi::fail<ibv_context>(EINVAL);
  softverbs::Result<Context*> ctx = Context::open(device);
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
  if (cmd_fd < 0 || !Device::get().is_ok()) return softverbs::abi::fail<ibv_context>(EINVAL);
  softverbs::Result<Context*> ctx = Context::import(soft_device(), cmd_fd);
  if (!ctx.is_ok()) return softverbs::abi::fail<ibv_context>(ctx.code());
  softverbs::abi::fill_context_ops(ctx.value()->vctx());
  return ctx.value()->ibv();
}
