// Device, port, GID and P_Key queries.
#include <endian.h>

#include <cstddef>
#include <cstring>

#include "abi/ibverbs/abi.h"
#include "mad/ca_devices.h"
#include "mad/port_view.h"
#include "shm/port_pkeys.h"
#include "util/time.h"
#include "verbs/context.h"
#include "verbs/device_attrs.h"

using softverbs::verbs::Context;

namespace {

const softverbs::shm::Segment& seg_of(ibv_context* ctx) { return Context::from(ctx)->device().seg(); }

// A context of another CA of the topology (issue 19): its port as its SMA
// reports it, over what every port of the device shares (speeds, MTU,
// capabilities). False for the device's own CA.
bool other_ca_port(ibv_context* ctx, softverbs::mad::PortView* out) {
  const uint8_t ca = Context::from(ctx)->ca();
  return ca != 0 && softverbs::mad::ca_device_port(seg_of(ctx), ca, out);
}

void fill_port(ibv_context* ctx, ibv_port_attr* attr) {
  softverbs::mad::fill_ca_device_port_attr(seg_of(ctx), Context::from(ctx)->ca(), attr);
}

void set_guids(ibv_context* ctx, ibv_device_attr* attr) {
  softverbs::mad::PortView v;
  if (!other_ca_port(ctx, &v)) return;
  attr->node_guid = htobe64(v.node_guid);
  attr->sys_image_guid = htobe64(v.sys_image_guid);
}

bool gid_of(ibv_context* ctx, int index, ibv_gid* gid) {
  if (!softverbs::verbs::port_gid(seg_of(ctx), index, gid)) return false;
  softverbs::mad::PortView v;
  if (other_ca_port(ctx, &v)) {
    const uint64_t be = htobe64(v.port_guid);
    std::memcpy(gid->raw + 8, &be, sizeof be);
  }
  return true;
}

}  // namespace

namespace softverbs::abi {

int op_query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t attr_len) {
  if (ctx == nullptr || attr == nullptr) return EINVAL;
  if (port != 1) return EINVAL;
  ibv_port_attr full;
  fill_port(ctx, &full);
  // Older binaries pass a shorter struct: copy what they have room for.
  std::memcpy(attr, &full, std::min(attr_len, sizeof full));
  return 0;
}

int op_query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                       size_t attr_size) {
  if (ctx == nullptr || attr == nullptr) return EINVAL;
  if (input != nullptr && input->comp_mask != 0) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex full;
  verbs::fill_device_attr_ex(seg_of(ctx), &full);
  set_guids(ctx, &full.orig_attr);
  std::memcpy(attr, &full, std::min(attr_size, sizeof full));
  return 0;
}

int op_query_rt_values(ibv_context* ctx, ibv_values_ex* values) {
  if (ctx == nullptr || values == nullptr) return EINVAL;
  if ((values->comp_mask & ~static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK)) != 0) return EINVAL;
  uint32_t answered = 0;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    // The clock completion timestamps are read from, in its ticks. Whole in
    // tv_nsec, as hardware providers return raw cycles (tv_sec 0): read as a
    // timespec it is the same number of ns, since a tick is one ns.
    values->raw_clock.tv_sec = 0;
    values->raw_clock.tv_nsec = static_cast<long>(adapter_clock_ticks());
    answered |= IBV_VALUES_MASK_RAW_CLOCK;
  }
  values->comp_mask = answered;
  return 0;
}

}  // namespace softverbs::abi

SV_EXPORT int ibv_query_device(ibv_context* ctx, ibv_device_attr* attr) {
  if (ctx == nullptr || attr == nullptr) return EINVAL;
  softverbs::verbs::fill_device_attr(seg_of(ctx), attr);
  set_guids(ctx, attr);
  return 0;
}

SV_EXPORT int ibv_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* attr) {
  // The compat struct is the same as ibv_port_attr up to its end.
  // The 1.1 ABI's struct ends where port_cap_flags2 begins.
  return softverbs::abi::op_query_port(ctx, port, reinterpret_cast<ibv_port_attr*>(attr),
                                       offsetof(ibv_port_attr, port_cap_flags2));
}

SV_EXPORT int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (ctx == nullptr || gid == nullptr || port != 1) return -1;
  return gid_of(ctx, index, gid) ? 0 : -1;
}

namespace {
// The context's port's table: the device's own, or another CA's in the subnet.
softverbs::shm::PKeyTable pkeys_of(ibv_context* ctx) {
  const unsigned ca = Context::from(ctx)->ca();
  if (ca == 0) return softverbs::shm::load_pkeys(seg_of(ctx).header());
  softverbs::mad::PortView v;
  if (!softverbs::mad::ca_device_port(seg_of(ctx), ca, &v)) return {};
  return v.pkeys;
}
}  // namespace

SV_EXPORT int ibv_query_pkey(ibv_context* ctx, uint8_t port, int index, __be16* pkey) {
  if (ctx == nullptr || pkey == nullptr || port != 1 || index < 0 ||
      static_cast<unsigned>(index) >= softverbs::shm::kPKeyTableCap)
    return -1;
  // The table an SM programs (shm/port_pkeys.h); index 0 boots as 0xFFFF.
  *pkey = htobe16(pkeys_of(ctx)[static_cast<unsigned>(index)]);
  return 0;
}

SV_EXPORT int ibv_get_pkey_index(ibv_context* ctx, uint8_t port, __be16 pkey) {
  if (ctx == nullptr || port != 1) return -1;
  // As rdma-core's: the first entry equal to `pkey`, membership bit included.
  const softverbs::shm::PKeyTable t = pkeys_of(ctx);
  for (unsigned i = 0; i < t.size(); ++i)
    if (t[i] == be16toh(pkey)) return static_cast<int>(i);
  return -1;
}

// rdma-core's private enum ibv_gid_type_sysfs (driver.h, not installed): 0 is
// "IB/RoCE v1", 1 is "RoCE v2". An enum is an int in the C ABI.
enum : uint32_t { kGidTypeSysfsIbRoceV1 = 0, kGidTypeSysfsRoceV2 = 1 };

SV_EXPORT int ibv_query_gid_type(ibv_context* ctx, uint8_t port, unsigned int index, uint32_t* type) {
  if (ctx == nullptr || type == nullptr || port != 1 || index >= static_cast<unsigned>(softverbs::verbs::port_gid_count())) {
    errno = EINVAL;
    return -1;
  }
  // An InfiniBand port's GIDs are of the IB/RoCE v1 kind; a RoCE port's are v2.
  *type = softverbs::verbs::port_gid_is_roce_v2() ? kGidTypeSysfsRoceV2 : kGidTypeSysfsIbRoceV1;
  return 0;
}

SV_EXPORT int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                                uint32_t flags, size_t entry_size) {
  if (ctx == nullptr || entry == nullptr || flags != 0 || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (port != 1) return EINVAL;
  if (index >= static_cast<uint32_t>(softverbs::verbs::port_gid_count())) return ENODATA;
  std::memset(entry, 0, sizeof *entry);
  gid_of(ctx, static_cast<int>(index), &entry->gid);
  entry->gid_index = index;
  entry->port_num = 1;
  entry->gid_type = softverbs::verbs::port_gid_is_roce_v2() ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
  entry->ndev_ifindex = 0;
  return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries, size_t max_entries, uint32_t flags,
                                       size_t entry_size) {
  if (ctx == nullptr || (entries == nullptr && max_entries > 0) || flags != 0 ||
      entry_size < sizeof(ibv_gid_entry))
    return -EINVAL;
  const auto count = static_cast<size_t>(softverbs::verbs::port_gid_count());
  if (max_entries < count) return -EINVAL;
  for (size_t i = 0; i < count; ++i) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<uint8_t*>(entries) + i * entry_size);
    const int rc = _ibv_query_gid_ex(ctx, 1, static_cast<uint32_t>(i), e, 0, entry_size);
    if (rc != 0) return -rc;
  }
  return static_cast<ssize_t>(count);
}
