#include "shm/mcast_groups.h"

#include <cerrno>

namespace softverbs::shm {
namespace {

// Whether a live QP has number `qpn`.
bool live(const Segment& seg, uint32_t qpn) {
  const SharedQp& qp = seg.qp(qpn & (kMaxQpSlots - 1));
  return qp.slot_state.load(std::memory_order_acquire) == static_cast<uint32_t>(SlotState::kLive) && qp.qpn == qpn;
}

// REQUIRES: the control lock. Entries of QPs that are gone (a process that
// died without detaching) are emptied, so that they free their places.
void drop_stale(const Segment& seg, SharedMcastGroup& group) {
  uint32_t members = 0;
  for (std::atomic<uint32_t>& entry : group.qpn) {
    const uint32_t qpn = entry.load(std::memory_order_relaxed);
    if (qpn == 0) continue;
    if (!live(seg, qpn))
      entry.store(0, std::memory_order_relaxed);
    else
      ++members;
  }
  group.members.store(members, std::memory_order_release);
}

SharedMcastGroup* find(Segment& seg, const uint8_t mgid[16]) {
  for (uint32_t g = 0; g < kMaxMcastGroups; ++g) {
    SharedMcastGroup& group = seg.mcast_group(g);
    if (group.members.load(std::memory_order_relaxed) != 0 && std::memcmp(group.mgid, mgid, 16) == 0) return &group;
  }
  return nullptr;
}

}  // namespace

McastChange mcast_attach(Segment& seg, const uint8_t mgid[16], uint16_t mlid, uint32_t qpn) {
  ControlLock lock(seg);
  McastChange change;
  SharedMcastGroup* group = find(seg, mgid);
  if (group != nullptr) drop_stale(seg, *group);
  if (group == nullptr || group->members.load(std::memory_order_relaxed) == 0) {
    group = nullptr;
    for (uint32_t g = 0; g < kMaxMcastGroups && group == nullptr; ++g) {
      SharedMcastGroup& candidate = seg.mcast_group(g);
      if (candidate.members.load(std::memory_order_relaxed) != 0) drop_stale(seg, candidate);
      if (candidate.members.load(std::memory_order_relaxed) == 0) group = &candidate;
    }
    // rxe and mlx5 answer ENOMEM past max_mcast_grp and max_mcast_qp_attach.
    if (group == nullptr) return {ENOMEM};
    // Free: no sender reads its entries or key until `members` is set.
    for (std::atomic<uint32_t>& entry : group->qpn) entry.store(0, std::memory_order_relaxed);
    std::memcpy(group->mgid, mgid, 16);
    group->mlid = mlid;
  }
  std::atomic<uint32_t>* empty = nullptr;
  for (std::atomic<uint32_t>& entry : group->qpn) {
    const uint32_t q = entry.load(std::memory_order_relaxed);
    if (q == qpn) return change;  // already attached
    if (q == 0 && empty == nullptr) empty = &entry;
  }
  if (empty == nullptr) return {ENOMEM};
  change.added = true;
  empty->store(qpn, std::memory_order_release);
  group->members.store(group->members.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  return change;
}

int mcast_detach(Segment& seg, const uint8_t mgid[16], uint32_t qpn) {
  ControlLock lock(seg);
  SharedMcastGroup* group = find(seg, mgid);
  if (group == nullptr) return EINVAL;
  for (std::atomic<uint32_t>& entry : group->qpn) {
    if (entry.load(std::memory_order_relaxed) != qpn) continue;
    entry.store(0, std::memory_order_release);
    group->members.store(group->members.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    return 0;
  }
  return EINVAL;  // rxe and mlx5: detaching from a group the QP is not in
}

}  // namespace softverbs::shm
