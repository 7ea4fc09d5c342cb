// What kind of port this process's device has, decided once from the
// environment before the device is first opened. The verbs layer owns it;
// the fabrics get the part they need (fabric::PortSetup) when the device
// attaches (fabric::configure).
//
//   SOFTVERBS_ROCE_ADDR=10.0.0.1[,fd00::1...]  a RoCEv2 device, softverbs_roce0:
//       Ethernet link layer, one RoCE v2 GID per address (IPv4 as ::ffff:a.b.c.d),
//       traffic to other hosts over UDP (fabric/udp).
//   SOFTVERBS_ROCE_PORT=4791     the UDP port (tests use others)
//   SOFTVERBS_ROCE_MTU=1024      the port's active MTU: 256..4096 (default: the
//                                largest that the first address's link carries,
//                                1024 on 1500-byte Ethernet, 4096 on jumbo frames)
//   SOFTVERBS_FAULTS=loss=0.01,dup=0.01,reorder=0.01:8,corrupt=0.001,seed=7
//                                a misbehaving network between this process's
//                                sends and the wire (src/fabric/fault/fault_config.h)
//   SOFTVERBS_LINK=4xSDR         the port's width x speed (default 4X EDR; RoCE 1X EDR)
//   SOFTVERBS_LINK_PACING=1      requests leave no faster than that rate, and
//                                the VL arbitration tables share it (transport/link_pacing.h)
//       Both are the port's: the first process to attach stores them in the
//       segment (shm/port_link.h); a later one with other values is told so.
//   SOFTVERBS_QOS_CONFIG=qos.conf  the port's SL2VL and VL arbitration tables
//                                (and OperVLs, VLHighLimit) without an SM, from
//                                opensm's own options (qos_ca_max_vls,
//                                qos_ca_high_limit, qos_ca_vlarb_high,
//                                qos_ca_vlarb_low, qos_ca_sl2vl, or their qos_*
//                                defaults; mad/qos_config_file.h, docs/QOS.md).
//                                The first process to attach stores them in the
//                                segment (mad::claim_boot_qos), in place of a
//                                topology file's qos_ca_* lines for this port; a
//                                later one whose tables differ from the port's is
//                                told so. A file that cannot be read or tables the
//                                port could not take: no device, with the reason.
//                                Read by the mad layer (mad::process_qos_config),
//                                which the verbs layer does not include.
// Unset: the InfiniBand-link host device softverbs0.
//
// Processes that share a device must agree on these; the default segment of
// a RoCE device is named after its first address, so two network namespaces
// of one host with different addresses get two devices.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/fabrics.h"
#include "shm/port_link.h"

namespace softverbs::verbs {

// roce, gids, udp_port, mtu and faults: fabric::PortSetup.
struct PortConfig : fabric::PortSetup {
  std::string device_name;         // softverbs0 | softverbs_roce0
  std::vector<std::string> addrs;  // the addresses as written
  std::string error;               // non-empty: the environment is invalid (logged; no device)
  shm::LinkConfig link;            // what this process would give the port (SOFTVERBS_LINK*)
  bool link_set = false;           // SOFTVERBS_LINK or SOFTVERBS_LINK_PACING was given
};

// Parsed once; thread-safe.
const PortConfig& port_config();
// Parses a configuration (exposed for tests).
PortConfig parse_port_config(const char* roce_addr, const char* roce_port, const char* roce_mtu,
                             const char* faults = nullptr);

// SOFTVERBS_LINK and SOFTVERBS_LINK_PACING into `c` (its roce decided);
// sets c.error when they do not parse (exposed for tests).
void parse_link_config(const char* link, const char* pacing, PortConfig* c);

// SOFTVERBS_DEVICE_PATH, or the default segment of the configured device.
std::string device_segment_path();

// Whether `gid` is one of this port's GIDs (RoCE) and its index.
int local_gid_index(const uint8_t gid[16]);

}  // namespace softverbs::verbs
