// What the agents answer from: the port's management-visible state, taken
// from the same place ibv_query_device/ibv_query_port take it (the segment
// header and verbs/device_attrs), so a MAD and a verb never disagree.
// A plain value: the codecs are pure functions of it, and the golden tests
// build one by hand.
#pragma once

#include <cstdint>

#include "shm/port_pkeys.h"
#include "shm/port_qos.h"
#include "shm/segment.h"

namespace softverbs::mad {

struct PortView {
  uint64_t node_guid = 0;         // host order
  uint64_t port_guid = 0;
  uint64_t sys_image_guid = 0;
  uint64_t gid_prefix = 0xfe80000000000000ull;
  uint32_t vendor_id = 0;
  uint16_t device_id = 0;
  uint32_t revision = 0;
  uint16_t partition_cap = 1;     // P_Key table entries (at most shm::kPKeyTableCap)
  shm::PKeyTable pkeys = shm::default_pkeys();  // entries past partition_cap are not the port's
  uint16_t pkey_violations = 0;   // PortInfo:P_KeyViolations
  uint16_t lid = 0;
  uint16_t sm_lid = 0;
  uint8_t sm_sl = 0;
  uint8_t lmc = 0;
  uint32_t cap_mask = 0;          // PortInfo:CapabilityMask, as ibv_port_attr.port_cap_flags
  uint8_t port_state = 4;         // IBA 14.2.5.6: 4 = Active
  uint8_t phys_state = 5;         // LinkUp
  uint8_t width_active = 2;       // IBA encoding: 1 = 1x, 2 = 4x
  uint8_t speed_ext_active = 2;   // 1 FDR, 2 EDR, 4 HDR, 8 NDR; 0 = none
  uint8_t speed_active = 1;       // LinkSpeedActive: 1 SDR, 2 DDR, 4 QDR (1 under an extended speed)
  uint8_t mtu = 5;                // 5 = 4096
  uint8_t vl_cap = shm::kVlCap;   // as ibv_port_attr.max_vl_num: 4 = VL0-7
  shm::QosTables qos = shm::default_qos();  // OperVLs, VLHighLimit, SL2VL, VLArb
  uint8_t subnet_timeout = 18;
  bool ethernet = false;          // a RoCE port: no subnet management
  // Which node and port this is (IBA 14.2.5.3/14.2.5.6): the device's port
  // is port 1 of a one-port CA; a subnet's other nodes (mad/subnet_sma.h)
  // have more ports, and a switch answers PortInfo:LocalPortNum with the
  // port the SMP came in on.
  uint8_t node_type = 1;          // 1 = CA, 2 = switch
  uint8_t num_ports = 1;
  uint8_t port_num = 1;           // the port this view describes
  uint8_t arrival_port = 1;       // the port the SMP reached the node through
  // The device's port under an external SM (SOFTVERBS_SM=none, a topology):
  // its PortInfo Sets move the LID, the SM's LID and the port state.
  bool external_sm = false;
  // IBA 14.2.4 M_Key protection (a subnet's other ports; the device's own
  // port has none): what PortInfo shows, the SMA having checked the key.
  uint64_t m_key = 0;
  uint8_t m_key_protect = 0;
  char node_desc[64] = {};
};

// The view of the device's only port (port 1).
PortView port_view(const shm::Segment& seg);

}  // namespace softverbs::mad
