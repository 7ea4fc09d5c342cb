#include "verbs/device_attrs.h"

#include <cstdio>
#include <cstring>

#include "shm/port_link.h"
#include "shm/port_pkeys.h"
#include "shm/port_qos.h"
#include "util/time.h"
#include "verbs/dm.h"
#include "verbs/issm.h"
#include "verbs/port_config.h"

namespace softverbs::verbs {


void fill_device_attr(const shm::Segment& seg, ibv_device_attr* a) {
  std::memset(a, 0, sizeof *a);
  std::strncpy(a->fw_ver, kFirmwareVersion, sizeof a->fw_ver - 1);
  a->node_guid = seg.header().node_guid;
  a->sys_image_guid = seg.header().node_guid;
  a->max_mr_size = shm::kMaxMrSize;
  a->page_size_cap = 0xfffff000;  // 4 KiB and every larger power of two
  a->vendor_id = kVendorId;
  a->vendor_part_id = kVendorPartId;
  a->hw_ver = kHwVersion;
  a->max_qp = static_cast<int>(shm::kMaxQpSlots - 2);
  a->max_qp_wr = static_cast<int>(shm::kMaxQpWr);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SHUTDOWN_PORT | IBV_DEVICE_PORT_ACTIVE_EVENT |
                        IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_RESIZE_MAX_WR |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC | IBV_DEVICE_SRQ_RESIZE;
  a->max_sge = static_cast<int>(shm::kMaxSge);
  a->max_sge_rd = static_cast<int>(shm::kMaxSge);
  a->max_cq = static_cast<int>(shm::kMaxCqs);
  a->max_cqe = static_cast<int>(shm::kMaxCqe);
  a->max_mr = static_cast<int>(shm::kFirstMwSlot - 1);
  a->max_pd = 1 << 20;
  a->max_qp_rd_atom = static_cast<int>(shm::kMaxRdAtomic);
  a->max_ee_rd_atom = 0;
  a->max_res_rd_atom = static_cast<int>(shm::kMaxRdAtomic * (shm::kMaxQpSlots - 2));
  a->max_qp_init_rd_atom = static_cast<int>(shm::kMaxRdAtomic);
  a->max_ee_init_rd_atom = 0;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ee = 0;
  a->max_rdd = 0;
  a->max_mw = static_cast<int>(shm::kMaxMrs - shm::kFirstMwSlot);
  a->max_raw_ipv6_qp = 0;
  a->max_raw_ethy_qp = 0;
  a->max_mcast_grp = shm::kMaxMcastGroups;
  a->max_mcast_qp_attach = shm::kMaxMcastQpAttach;
  a->max_total_mcast_qp_attach = shm::kMaxMcastGroups * shm::kMaxMcastQpAttach;
  a->max_ah = 1 << 20;
  a->max_fmr = 0;
  a->max_map_per_fmr = 0;
  // Basic and XRC SRQs, one table; ibv_modify_srq grows one (IBV_DEVICE_SRQ_RESIZE).
  a->max_srq = static_cast<int>(shm::kMaxSrqs);
  a->max_srq_wr = static_cast<int>(shm::kMaxSrqWr);
  a->max_srq_sge = static_cast<int>(shm::kMaxSge);
  a->max_pkeys = static_cast<uint16_t>(shm::kPKeyTableCap);  // NodeInfo:PartitionCap
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
}

// IB_UVERBS_DEVICE_ATOMIC_WRITE and _FLUSH_GLOBAL: Linux's uapi bits for
// IBA 1.5 ATOMIC WRITE and for answering a FLUSH of global visibility, which
// rdma-core passes through in device_cap_flags_ex (its 44 headers predate
// the names). No FLUSH_PERSISTENT: there is no persistent memory here.
constexpr uint64_t kDeviceCapFlushGlobal = 1ull << 38;
constexpr uint64_t kDeviceCapAtomicWrite = 1ull << 40;

void fill_device_attr_ex(const shm::Segment& seg, ibv_device_attr_ex* a) {
  std::memset(a, 0, sizeof *a);
  fill_device_attr(seg, &a->orig_attr);
  a->comp_mask = 0;
  a->max_dm_size = kMaxDmSize;
  a->raw_packet_caps = 0;
  // Completion timestamps: the adapter clock (util/time.h), 64 bits of ns.
  a->completion_timestamp_mask = ~uint64_t{0};
  a->hca_core_clock = kAdapterClockKhz;
  a->device_cap_flags_ex = a->orig_attr.device_cap_flags | kDeviceCapFlushGlobal | kDeviceCapAtomicWrite;
  // On-demand paging, explicit and implicit, for every operation of every
  // transport the device offers (util/fault_in.h: the page fault).
  a->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  a->odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                                               IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
                                               IBV_ODP_SUPPORT_SRQ_RECV;
  a->odp_caps.per_transport_caps.uc_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
  a->odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
  a->phys_port_cnt_ex = 1;
}

void fill_port_attr(const shm::Segment& seg, ibv_port_attr* p) {
  std::memset(p, 0, sizeof *p);
  p->state = IBV_PORT_ACTIVE;
  p->max_mtu = IBV_MTU_4096;
  p->active_mtu = IBV_MTU_4096;
  p->gid_tbl_len = 1;
  // Extended speeds: EDR is only expressible in PortInfo:LinkSpeedExtActive (IBA 14.2.5.6).
  // SL_MAP: the port has an SLtoVLMappingTable (opensm programs it only then).
  // CLIENT_REG: an SM's ClientReregister reaches every context as
  // IBV_EVENT_CLIENT_REREGISTER (opensm sets it only on ports that say so).
  p->port_cap_flags = IBV_PORT_SM | IBV_PORT_SYS_IMAGE_GUID_SUP | IBV_PORT_CM_SUP | IBV_PORT_EXTENDED_SPEEDS_SUP |
                      IBV_PORT_SL_MAP_SUP | IBV_PORT_CLIENT_REG_SUP;
  p->max_msg_sz = shm::kMaxMsgSize;
  p->bad_pkey_cntr = shm::pkey_violations(seg.header());
  p->qkey_viol_cntr = 0;
  p->pkey_tbl_len = static_cast<uint16_t>(shm::kPKeyTableCap);
  p->lid = seg.header().lid;
  p->sm_lid = seg.header().sm_lid;
  // IBA PortState and ibv_port_state share their encoding (2 INIT ... 4 ACTIVE).
  p->state = static_cast<ibv_port_state>(seg.header().port_state.load(std::memory_order_relaxed));
  // With an external SM, IsSM belongs to whoever runs it: set while a
  // process holds the port's issm file (verbs/issm.h), as the kernel's
  // issm device sets it. Not asked on RoCE (no SM on Ethernet).
  if (seg.header().external_sm != 0 && (port_config().roce || !issm_held(issm_path(seg.path()))))
    p->port_cap_flags &= ~IBV_PORT_SM;
  p->lmc = 0;
  p->max_vl_num = shm::kVlCap;  // PortInfo:VLCap (VL0-7); OperVLs is the SMA's (shm/port_qos.h)
  p->sm_sl = 0;
  p->subnet_timeout = 18;
  p->init_type_reply = 0;
  const PortConfig& c = port_config();
  // The port's, once a process attached (shm/port_link.h); this process's until then.
  const shm::LinkConfig link = shm::load_link(seg.header(), c.link);
  p->active_width = link.width;
  p->active_speed = link.speed;
  p->phys_state = 5;     // LinkUp
  p->link_layer = IBV_LINK_LAYER_INFINIBAND;
  p->flags = 0;
  p->port_cap_flags2 = 0;
  if (c.roce) {
    // An Ethernet port: no LIDs, no subnet manager; addresses are GIDs.
    p->link_layer = IBV_LINK_LAYER_ETHERNET;
    p->state = IBV_PORT_ACTIVE;  // no SM on Ethernet, whatever SOFTVERBS_SM says
    p->lid = 0;
    p->sm_lid = 0;
    p->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
    p->gid_tbl_len = static_cast<int>(c.gids.size());
    p->max_mtu = c.mtu;
    p->active_mtu = c.mtu;
  }
}

unsigned port_rate_gbps(const ibv_port_attr& a) {
  const unsigned lanes = shm::link_lanes(a.active_width);
  // Signalling per lane in tenths of Gb/s.
  const unsigned tenths = a.active_speed == 128 ? 1000 : a.active_speed == 64 ? 500 : a.active_speed == 32 ? 250
                          : a.active_speed == 16 ? 140 : a.active_speed == 8 || a.active_speed == 4 ? 100
                          : a.active_speed == 2 ? 50 : 25;
  return lanes * tenths / 10;
}

std::string port_rate_text(const ibv_port_attr& a) {
  const char* speed = a.active_speed == 128 ? "NDR" : a.active_speed == 64 ? "HDR" : a.active_speed == 32 ? "EDR"
                      : a.active_speed == 16 ? "FDR" : a.active_speed == 8 ? "FDR10" : a.active_speed == 4 ? "QDR"
                      : a.active_speed == 2 ? "DDR" : "SDR";
  const unsigned lanes = shm::link_lanes(a.active_width);
  const unsigned tenths = port_rate_gbps(a) * 10 + (lanes == 1 && a.active_speed == 1 ? 5 : 0);
  char buf[64];
  if (tenths % 10 != 0) std::snprintf(buf, sizeof buf, "%u.%u Gb/sec (%uX %s)", tenths / 10, tenths % 10, lanes, speed);
  else std::snprintf(buf, sizeof buf, "%u Gb/sec (%uX %s)", tenths / 10, lanes, speed);
  return buf;
}

bool port_gid(const shm::Segment& seg, int index, ibv_gid* gid) {
  std::memset(gid, 0, sizeof *gid);
  const PortConfig& c = port_config();
  if (c.roce) {
    if (index < 0 || static_cast<size_t>(index) >= c.gids.size()) return false;
    std::memcpy(gid->raw, c.gids[static_cast<size_t>(index)].data(), 16);
    return true;
  }
  if (index != 0) return false;
  gid->raw[0] = 0xfe;
  gid->raw[1] = 0x80;
  std::memcpy(gid->raw + 8, &seg.header().port_guid, 8);
  return true;
}

bool port_gid_is_roce_v2() { return port_config().roce; }

int port_gid_count() { return port_config().roce ? static_cast<int>(port_config().gids.size()) : 1; }

}  // namespace softverbs::verbs
