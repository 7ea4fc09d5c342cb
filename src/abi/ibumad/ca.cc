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
#include "mad/ca_devices.h"
#include "mad/qos_config_file.h"
#include "shm/port_pkeys.h"
#include "verbs/device_attrs.h"
#include "verbs/issm.h"
#include "verbs/port_config.h"
#include "verbs/sysfs_port.h"

namespace softverbs::umad {
namespace {

constexpr unsigned kNodeTypeCa = 1;

void fill_port(const shm::Segment& seg, unsigned device, const char* ca, int portnum, umad_port_t* port) {
  ibv_port_attr a;
  mad::PortView other;
  const bool is_other = mad::fill_ca_device_port_attr(seg, device, &a, &other);
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
  port->port_guid = is_other ? htobe64(other.port_guid) : seg.header().port_guid;
  // rdma-core reads ports/N/pkeys/*: host-order values.
  port->pkeys_size = static_cast<unsigned>(a.pkey_tbl_len);
  port->pkeys = static_cast<uint16_t*>(std::calloc(port->pkeys_size, sizeof(uint16_t)));
  if (port->pkeys != nullptr) {
    const shm::PKeyTable t = is_other ? other.pkeys : shm::load_pkeys(seg.header());
    for (unsigned i = 0; i < port->pkeys_size && i < t.size(); ++i) port->pkeys[i] = t[i];
  } else {
    port->pkeys_size = 0;
  }
  std::snprintf(port->link_layer, sizeof port->link_layer, "%s",
                a.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
}

// The name ibv_get_device_list gives listed CA `index`.
std::string ca_name(unsigned index) { return verbs::device_name(index); }

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

unsigned listed_cas() { return segment() == nullptr ? 0 : mad::ca_device_count(*segment()); }

int listed_ca(const char* name) {
  const unsigned n = listed_cas();
  if (n == 0) return -1;
  if (name == nullptr || name[0] == '\0') return 0;
  for (unsigned i = 0; i < n; ++i)
    if (ca_name(i) == name) return static_cast<int>(i);
  return -1;
}

int resolve_port(int portnum) { return portnum == 0 || portnum == 1 ? 1 : -1; }

}  // namespace softverbs::umad

using namespace softverbs::umad;

SV_UMAD_EXPORT int umad_init(void) { return 0; }
SV_UMAD_EXPORT int umad_done(void) { return 0; }

SV_UMAD_EXPORT int umad_get_cas_names(char cas[][UMAD_CA_NAME_LEN], int max) {
  const unsigned n = listed_cas();
  int i = 0;
  for (; i < max && static_cast<unsigned>(i) < n; ++i)
    std::snprintf(cas[i], UMAD_CA_NAME_LEN, "%s", ca_name(static_cast<unsigned>(i)).c_str());
  return i;
}

SV_UMAD_EXPORT int umad_get_ca_portguids(const char* ca_name, __be64* portguids, int max) {
  const int index = listed_ca(ca_name);
  if (index < 0) return -ENODEV;
  // Index 0 is a switch's management port; a CA has none.
  if (max < 2) return -ENOMEM;
  ibv_port_attr a;
  softverbs::mad::PortView other;
  const bool is_other = softverbs::mad::fill_ca_device_port_attr(*segment(), static_cast<unsigned>(index), &a, &other);
  portguids[0] = 0;
  portguids[1] = is_other ? htobe64(other.port_guid) : segment()->header().port_guid;
  return 2;
}

SV_UMAD_EXPORT int umad_get_ca(const char* ca_name, umad_ca_t* ca) {
  const int index = listed_ca(ca_name);
  if (index < 0 || ca == nullptr) return -ENODEV;
  const softverbs::shm::Segment& seg = *segment();
  const std::string name = softverbs::umad::ca_name(static_cast<unsigned>(index));
  ibv_device_attr d;
  softverbs::verbs::fill_device_attr(seg, &d);
  std::memset(ca, 0, sizeof *ca);
  std::snprintf(ca->ca_name, sizeof ca->ca_name, "%s", name.c_str());
  ca->node_type = kNodeTypeCa;
  ca->numports = 1;
  std::snprintf(ca->fw_ver, sizeof ca->fw_ver, "%.19s", d.fw_ver);
  std::snprintf(ca->ca_type, sizeof ca->ca_type, "softverbs");
  std::snprintf(ca->hw_ver, sizeof ca->hw_ver, "0x%x", d.hw_ver);
  ca->node_guid = d.node_guid;
  ca->system_guid = d.sys_image_guid;
  ibv_port_attr a;
  softverbs::mad::PortView other;
  if (softverbs::mad::fill_ca_device_port_attr(seg, static_cast<unsigned>(index), &a, &other)) {
    ca->node_guid = htobe64(other.node_guid);
    ca->system_guid = htobe64(other.sys_image_guid);
  }
  auto* port = static_cast<umad_port_t*>(std::calloc(1, sizeof(umad_port_t)));
  if (port == nullptr) return -ENOMEM;
  fill_port(seg, static_cast<unsigned>(index), name.c_str(), 1, port);
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
  const int index = listed_ca(ca_name);
  if (index < 0 || port == nullptr) return -ENODEV;
  const int p = resolve_port(portnum);
  if (p < 0) return -EINVAL;
  fill_port(*segment(), static_cast<unsigned>(index), softverbs::umad::ca_name(static_cast<unsigned>(index)).c_str(), p,
            port);
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
  umad_device_node* head = nullptr;
  umad_device_node** tail = &head;
  for (unsigned i = 0; i < listed_cas(); ++i) {
    auto* node = static_cast<umad_device_node*>(std::calloc(1, sizeof(umad_device_node)));
    if (node != nullptr) node->ca_name = strdup(softverbs::umad::ca_name(i).c_str());
    if (node == nullptr || node->ca_name == nullptr) {
      std::free(node);
      umad_free_ca_device_list(head);
      return nullptr;
    }
    *tail = node;
    tail = &node->next;
  }
  return head;
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
