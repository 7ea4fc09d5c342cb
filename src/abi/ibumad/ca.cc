// CA and port discovery: what rdma-core reads from /sys/class/infiniband,
// answered from the device itself (the values ibv_query_device and
// ibv_query_port give, and the synthetic sysfs tree shows).
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "abi/ibumad/umad_abi.h"
#include "mad/agent.h"
#include "mad/qos_config_file.h"
#include "shm/port_pkeys.h"
#include "verbs/device_attrs.h"
#include "verbs/issm.h"
#include "verbs/port_config.h"

namespace softverbs::umad {
namespace {

constexpr unsigned kNodeTypeCa = 1;

void fill_port(const shm::Segment& seg, const char* ca, int portnum, umad_port_t* port) {
  ibv_port_attr a;
  verbs::fill_port_attr(seg, &a);
  std::memset(port, 0, sizeof *port);
  std::snprintf(port->ca_name, sizeof port->ca_name, "%s", ca);
  port->portnum = portnum;
  port->base_lid = a.lid;
  port->lmc = a.lmc;
  port->sm_lid = a.sm_lid;
  port->sm_sl = a.sm_sl;
  port->state = a.state;
  port->phys_state = a.phys_state;
  port->rate = static_cast<int>(verbs::port_rate_gbps(a));
  port->capmask = htobe32(a.port_cap_flags);
  ibv_gid gid;
  verbs::port_gid(seg, 0, &gid);
  port->gid_prefix = gid.global.subnet_prefix;
  port->port_guid = seg.header().port_guid;
  // rdma-core reads ports/N/pkeys/*: host-order values.
  port->pkeys_size = static_cast<unsigned>(a.pkey_tbl_len);
  port->pkeys = static_cast<uint16_t*>(std::calloc(port->pkeys_size, sizeof(uint16_t)));
  if (port->pkeys != nullptr) {
    const shm::PKeyTable t = shm::load_pkeys(seg.header());
    for (unsigned i = 0; i < port->pkeys_size && i < t.size(); ++i) port->pkeys[i] = t[i];
  } else {
    port->pkeys_size = 0;
  }
  std::snprintf(port->link_layer, sizeof port->link_layer, "%s",
                a.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
}

}  // namespace

const shm::Segment* segment() {
  static const std::unique_ptr<shm::Segment> seg = []() -> std::unique_ptr<shm::Segment> {
    if (!verbs::port_config().error.empty() || mad::qos_config_refused()) return nullptr;
    auto s = shm::Segment::open(verbs::device_segment_path());
    if (!s.is_ok()) return nullptr;
    mad::claim_boot_qos(*s.value());
    return std::move(s.value());
  }();
  return seg.get();
}

const char* resolve_ca(const char* name) {
  if (segment() == nullptr) return nullptr;
  const std::string& ours = verbs::port_config().device_name;
  if (name == nullptr || name[0] == '\0' || ours == name) return ours.c_str();
  return nullptr;
}

int resolve_port(int portnum) { return portnum == 0 || portnum == 1 ? 1 : -1; }

}  // namespace softverbs::umad

using namespace softverbs::umad;

SV_UMAD_EXPORT int umad_init(void) { return 0; }
SV_UMAD_EXPORT int umad_done(void) { return 0; }

SV_UMAD_EXPORT int umad_get_cas_names(char cas[][UMAD_CA_NAME_LEN], int max) {
  const char* ca = resolve_ca(nullptr);
  if (ca == nullptr || max < 1) return 0;
  std::snprintf(cas[0], UMAD_CA_NAME_LEN, "%s", ca);
  return 1;
}

SV_UMAD_EXPORT int umad_get_ca_portguids(const char* ca_name, __be64* portguids, int max) {
  if (resolve_ca(ca_name) == nullptr) return -ENODEV;
  // Index 0 is a switch's management port; a CA has none.
  if (max < 2) return -ENOMEM;
  portguids[0] = 0;
  portguids[1] = segment()->header().port_guid;
  return 2;
}

SV_UMAD_EXPORT int umad_get_ca(const char* ca_name, umad_ca_t* ca) {
  const char* name = resolve_ca(ca_name);
  if (name == nullptr || ca == nullptr) return -ENODEV;
  const softverbs::shm::Segment& seg = *segment();
  ibv_device_attr d;
  softverbs::verbs::fill_device_attr(seg, &d);
  std::memset(ca, 0, sizeof *ca);
  std::snprintf(ca->ca_name, sizeof ca->ca_name, "%s", name);
  ca->node_type = kNodeTypeCa;
  ca->numports = 1;
  std::snprintf(ca->fw_ver, sizeof ca->fw_ver, "%.19s", d.fw_ver);
  std::snprintf(ca->ca_type, sizeof ca->ca_type, "softverbs");
  std::snprintf(ca->hw_ver, sizeof ca->hw_ver, "0x%x", d.hw_ver);
  ca->node_guid = d.node_guid;
  ca->system_guid = d.sys_image_guid;
  auto* port = static_cast<umad_port_t*>(std::calloc(1, sizeof(umad_port_t)));
  if (port == nullptr) return -ENOMEM;
  fill_port(seg, name, 1, port);
  ca->ports[1] = port;
  return 0;
}

SV_UMAD_EXPORT int umad_release_ca(umad_ca_t* ca) {
  if (ca == nullptr) return -ENODEV;
  for (umad_port_t*& p : ca->ports) {
    if (p == nullptr) continue;
    std::free(p->pkeys);
    std::free(p);
    p = nullptr;
  }
  return 0;
}

SV_UMAD_EXPORT int umad_get_port(const char* ca_name, int portnum, umad_port_t* port) {
  const char* name = resolve_ca(ca_name);
  if (name == nullptr || port == nullptr) return -ENODEV;
  const int p = resolve_port(portnum);
  if (p < 0) return -EINVAL;
  fill_port(*segment(), name, p, port);
  return 0;
}

SV_UMAD_EXPORT int umad_release_port(umad_port_t* port) {
  if (port == nullptr) return -ENODEV;
  std::free(port->pkeys);
  port->pkeys = nullptr;
  port->pkeys_size = 0;
  return 0;
}

SV_UMAD_EXPORT int umad_get_issm_path(const char* ca_name, int portnum, char path[], int max) {
  if (resolve_ca(ca_name) == nullptr) return -ENODEV;
  if (resolve_port(portnum) < 0) return -EINVAL;
  const softverbs::shm::Segment* seg = segment();
  if (seg == nullptr) return -ENODEV;
  // The port's issm file, a FIFO beside the segment: whoever holds it open
  // sets the port's IsSM bit (verbs/issm.h), as /dev/infiniband/issmN does.
  const std::string issm = softverbs::verbs::issm_path(seg->path());
  if (path == nullptr || max <= 0 || issm.size() >= static_cast<size_t>(max)) return -EINVAL;
  if (const int err = softverbs::verbs::make_issm(issm); err != 0) return -err;
  std::snprintf(path, static_cast<size_t>(max), "%s", issm.c_str());
  return 0;
}

SV_UMAD_EXPORT struct umad_device_node* umad_get_ca_device_list(void) {
  const char* ca = resolve_ca(nullptr);
  if (ca == nullptr) return nullptr;
  auto* node = static_cast<umad_device_node*>(std::calloc(1, sizeof(umad_device_node)));
  if (node == nullptr) return nullptr;
  node->ca_name = strdup(ca);
  if (node->ca_name == nullptr) {
    std::free(node);
    return nullptr;
  }
  return node;
}

SV_UMAD_EXPORT void umad_free_ca_device_list(struct umad_device_node* head) {
  while (head != nullptr) {
    umad_device_node* next = head->next;
    std::free(const_cast<char*>(head->ca_name));
    std::free(head);
    head = next;
  }
}

SV_UMAD_EXPORT int umad_sort_ca_device_list(struct umad_device_node** head, size_t /*size: the list ends itself*/) {
  if (head == nullptr) return -EINVAL;
  // Insertion sort by name, as rdma-core orders them; the list is short.
  umad_device_node* sorted = nullptr;
  for (umad_device_node* cur = *head; cur != nullptr;) {
    umad_device_node* next = cur->next;
    umad_device_node** at = &sorted;
    while (*at != nullptr && std::strcmp((*at)->ca_name, cur->ca_name) < 0) at = &(*at)->next;
    cur->next = *at;
    *at = cur;
    cur = next;
  }
  *head = sorted;
  return 0;
}
