// What the device and its port report (ibv_query_device/_ex, ibv_query_port,
// GID and P_Key tables). One place, so every query agrees with the limits the
// code enforces (shm/limits.h).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "shm/segment.h"

namespace softverbs::verbs {

inline constexpr uint32_t kVendorId = 0x5356;  // not a real vendor: software keys paths on Mellanox/Amazon ids
inline constexpr uint32_t kVendorPartId = 1;
inline constexpr uint32_t kHwVersion = 1;
inline constexpr char kFirmwareVersion[] = "0.1.0";

void fill_device_attr(const shm::Segment& seg, ibv_device_attr* attr);
void fill_device_attr_ex(const shm::Segment& seg, ibv_device_attr_ex* attr);
void fill_port_attr(const shm::Segment& seg, ibv_port_attr* attr);
// The port's rate as the kernel names it in sysfs: "40 Gb/sec (4X QDR)"
// (whole Gb/s of signalling, as umad_port_t.rate has it: 1X SDR is 2).
unsigned port_rate_gbps(const ibv_port_attr& attr);
std::string port_rate_text(const ibv_port_attr& attr);
// The GID table. InfiniBand port: index 0 only, fe80::/64 + port GUID (IBA
// 4.1.1). RoCE port: one RoCE v2 GID per configured address. False when
// `index` is outside the table.
bool port_gid(const shm::Segment& seg, int index, ibv_gid* gid);
int port_gid_count();
bool port_gid_is_roce_v2();

}  // namespace softverbs::verbs
