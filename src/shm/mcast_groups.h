// The port's multicast groups (shm::SharedMcastGroup): which QPs of the
// device are attached to which group, for every process of the device.
//
// Thread-safety: attach and detach take SegmentHeader::control (invariant 1);
// for_each_member reads without a lock, as senders do on the datapath, and
// may see an attach or detach that races with it either way.
#pragma once

#include <cstdint>
#include <cstring>

#include "shm/segment.h"

namespace softverbs::shm {

inline constexpr uint32_t kMulticastQpn = 0xffffff;  // IBA 10.5.2.5: the BTH DestQP of every multicast packet
inline constexpr uint16_t kMulticastLidBase = 0xc000;  // IBA 4.1.4: 0xc000 .. 0xfffe
inline constexpr uint16_t kPermissiveLid = 0xffff;

// IBA 4.1.1: an ff prefix; RoCE (as Linux's rdma_is_multicast_addr): also
// an IPv4-mapped address of 224.0.0.0/4.
inline bool is_multicast_gid(const uint8_t gid[16]) {
  static constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return gid[0] == 0xff || (std::memcmp(gid, kV4Mapped, 12) == 0 && (gid[12] & 0xf0) == 0xe0);
}
inline bool is_multicast_lid(uint16_t lid) { return lid >= kMulticastLidBase && lid != kPermissiveLid; }

// What an attach did: error 0, or ENOMEM (no free group, or the group is
// full); `added`: the QP was not in the group before (attaching it again
// changes nothing and succeeds).
struct McastChange {
  int error = 0;
  bool added = false;
};

McastChange mcast_attach(Segment& seg, const uint8_t mgid[16], uint16_t mlid, uint32_t qpn);
// 0, or EINVAL: the QP is not in the group.
int mcast_detach(Segment& seg, const uint8_t mgid[16], uint32_t qpn);
// The QP is being destroyed: out of every group; calls left(mgid) for each.
template <class F>
void mcast_detach_all(Segment& seg, uint32_t qpn, F&& left) {
  for (uint32_t g = 0; g < kMaxMcastGroups; ++g) {
    SharedMcastGroup& group = seg.mcast_group(g);
    if (group.members.load(std::memory_order_acquire) == 0) continue;
    uint8_t mgid[16];
    std::memcpy(mgid, group.mgid, 16);
    if (mcast_detach(seg, mgid, qpn) == 0) left(mgid);
  }
}

// Calls f(group, qpn) for each QPN (possibly of a QP gone since) attached to a
// group the address names: by MGID when `mgid` is given, else by MLID.
template <class F>
void for_each_mcast_member(const Segment& seg, const uint8_t* mgid, uint16_t mlid, F&& f) {
  for (uint32_t g = 0; g < kMaxMcastGroups; ++g) {
    const SharedMcastGroup& group = seg.mcast_group(g);
    if (group.members.load(std::memory_order_acquire) == 0) continue;
    if (mgid != nullptr ? std::memcmp(group.mgid, mgid, 16) != 0 : group.mlid != mlid) continue;
    for (const std::atomic<uint32_t>& entry : group.qpn) {
      const uint32_t qpn = entry.load(std::memory_order_acquire);
      if (qpn != 0) f(group, qpn);
    }
  }
}

}  // namespace softverbs::shm
