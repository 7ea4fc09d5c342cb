#include "mad/port_view.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "verbs/device_attrs.h"
#include "verbs/port_config.h"
#include "verbs/sysfs_port.h"

namespace softverbs::mad {

PortView port_view(const shm::Segment& seg) {
  ibv_device_attr d;
  verbs::fill_device_attr(seg, &d);
  ibv_port_attr p;
  verbs::fill_port_attr(seg, &p);
  PortView v;
  v.node_guid = be64toh(d.node_guid);
  v.sys_image_guid = be64toh(d.sys_image_guid);
  v.port_guid = be64toh(seg.header().port_guid);
  v.vendor_id = d.vendor_id;
  v.device_id = static_cast<uint16_t>(d.vendor_part_id);
  v.revision = d.hw_ver;
  v.partition_cap = static_cast<uint16_t>(d.max_pkeys);
  v.pkeys = shm::load_pkeys(seg.header());
  v.pkey_violations = p.bad_pkey_cntr;
  v.lid = p.lid;
  v.sm_lid = p.sm_lid;
  v.sm_sl = p.sm_sl;
  v.lmc = p.lmc;
  v.cap_mask = p.port_cap_flags;
  v.port_state = static_cast<uint8_t>(p.state);
  v.phys_state = p.phys_state;
  v.width_active = p.active_width;
  // ibv_port_attr.active_speed 16, 32, 64, 128 (FDR, EDR, HDR, NDR) are
  // IBA LinkSpeedExtActive 1, 2, 4, 8; SDR, DDR, QDR (1, 2, 4) are
  // LinkSpeedActive's own; FDR10 is a vendor extension, reported as QDR.
  v.speed_ext_active = p.active_speed >= 16 ? static_cast<uint8_t>(p.active_speed >> 4) : 0;
  v.speed_active = p.active_speed <= 4 ? p.active_speed : p.active_speed == 8 ? 4 : 1;
  v.mtu = static_cast<uint8_t>(p.active_mtu);
  v.vl_cap = p.max_vl_num;
  v.qos = shm::load_qos(seg.header());
  v.subnet_timeout = p.subnet_timeout;
  v.ethernet = p.link_layer == IBV_LINK_LAYER_ETHERNET;
  v.external_sm = seg.header().external_sm != 0;
  // IsSM came from the issm file just now; the sysfs tree learns it here.
  if (v.external_sm && !v.ethernet) verbs::sync_sysfs_cap_mask(seg, v.cap_mask);
  // The same text as the sysfs tree's node_desc (abi/ibverbs/sysfs_tree.cc).
  char host[64] = "softverbs";
  gethostname(host, sizeof host - 1);
  // IBA 14.2.5.2: 64 bytes, NUL-padded, not necessarily NUL-terminated.
  const std::string desc = std::string(host) + " " + verbs::port_config().device_name;
  std::memcpy(v.node_desc, desc.data(), std::min(desc.size(), sizeof v.node_desc));
  return v;
}

}  // namespace softverbs::mad
