// Key lookup and the protection checks of every memory access, for every role
// (requester's local SGEs, responder's receive SGEs and remote keys).
//
// Returns its own error kind; callers map it (nak_table.h for the responder,
// a local completion status for the requester).
#pragma once

#include <atomic>
#include <cstdint>

#include "shm/objects.h"
#include "shm/segment.h"

namespace softverbs::transport {

inline constexpr uint32_t kAccessOnDemand = 1u << 6;  // IBV_ACCESS_ON_DEMAND (verbs.h)
// IB_UVERBS_ACCESS_FLUSH_GLOBAL / _PERSISTENT (Linux uapi, IBA 1.5 FLUSH):
// rdma-core 44's verbs.h has no names for them yet.
inline constexpr uint32_t kAccessFlushGlobal = 1u << 8;
inline constexpr uint32_t kAccessFlushPersistent = 1u << 9;

enum class KeyCheck : uint8_t {
  kOk,
  kBadKey,     // no live MR has this key, or it belongs to another process/PD
  kAccess,     // the MR does not grant the access
  kRange,      // the range is not inside the MR
  kAlignment,  // an atomic's address is not 8-byte aligned
};

struct MrRef {
  const shm::SharedMr* mr = nullptr;
  uint64_t va = 0;  // owner virtual address of the first byte
};

// An on-demand paging region (IBV_ACCESS_ON_DEMAND): its pages are faulted
// in at each access (util/fault_in.h), never touched blindly.
inline bool on_demand(const shm::SharedMr& mr) { return (mr.access & kAccessOnDemand) != 0; }

// Keys of the two kinds never collide, and each names its slot:
//   an MR's:     random(16)            | 0 | slot(15)
//   a window's:  random(1) | index(15) | 1 | random(7) | key byte(8)
// A window keeps its upper 24 bits for life; the low byte is the consumer's
// (IBA 10.6.7.2: ibv_inc_rkey, a type 2 bind's new R_Key).
static_assert(shm::kMrSlotBits == 16 && shm::kFirstMwSlot == 0x8000u);
inline constexpr uint32_t kWindowKeyBit = 0x8000u;
inline constexpr uint32_t kKeyByteMask = 0xffu;
inline bool is_window_key(uint32_t key) { return (key & kWindowKeyBit) != 0; }
inline uint32_t mr_slot_of_key(uint32_t key) {
  return is_window_key(key) ? shm::kFirstMwSlot | ((key >> 16) & 0x7fffu) : key & 0x7fffu;
}
// The fixed part (key byte 0) of the keys of window slot `slot`, from 8 random bits.
inline uint32_t window_key_base(uint32_t slot, uint8_t random) {
  return (static_cast<uint32_t>(random & 0x80u) << 24) | ((slot & 0x7fffu) << 16) | kWindowKeyBit |
         (static_cast<uint32_t>(random & 0x7fu) << 8);
}

// IBA 10.6.3 / C10-…: a key is valid only for its own PD, for the accesses
// the region grants, and for addresses inside the region. A window's R_Key
// also only through the QP a type 2 window is bound to (IBA 10.6.7.2.2):
// `qpn` is the QP the access arrives on.
// `remote` selects the rkey, otherwise the lkey (a window has none).
inline KeyCheck check_key(const shm::Segment& seg, uint32_t key, bool remote, shm::OwnerId owner, uint32_t pd_id,
                          uint32_t qpn, uint64_t iova, uint64_t length, uint32_t need_access, MrRef* out) {
  if (key == 0 || (!remote && is_window_key(key))) return KeyCheck::kBadKey;
  const shm::SharedMr& mr = seg.mr(mr_slot_of_key(key));
  const uint32_t rkey = mr.rkey.load(std::memory_order_acquire);
  if (rkey == 0) return KeyCheck::kBadKey;
  if (remote ? rkey != key : mr.lkey != key) return KeyCheck::kBadKey;
  const shm::OwnerId mr_owner = mr.owner;
  const uint32_t mr_pd = mr.pd_id;
  const uint32_t access = mr.access;
  const uint64_t mr_iova = mr.iova;
  const uint64_t mr_len = mr.length;
  const uint64_t mr_addr = mr.addr;
  const uint32_t bound_qpn = mr.mw_qpn;
  // A concurrent re-registration or rebind changes the key: re-check after the reads.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (mr.rkey.load(std::memory_order_relaxed) != rkey) return KeyCheck::kBadKey;
  if (!(mr_owner == owner) || mr_pd != pd_id) return KeyCheck::kBadKey;
  if (bound_qpn != 0 && bound_qpn != qpn) return KeyCheck::kBadKey;
  if ((access & need_access) != need_access) return KeyCheck::kAccess;
  if (iova < mr_iova || length > mr_len || iova - mr_iova > mr_len - length) return KeyCheck::kRange;
  out->mr = &mr;
  out->va = mr_addr + (iova - mr_iova);
  return KeyCheck::kOk;
}

}  // namespace softverbs::transport
