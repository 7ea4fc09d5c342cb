#include "transport/mw_ops.h"

#include <atomic>

#include "transport/mem_ops.h"
#include "util/tsan.h"

namespace softverbs::transport {
namespace {

constexpr uint32_t kWindowAccess =
    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;

// Takes the window from valid with `rkey` to invalid; the winner uncounts it.
bool take_back(shm::Segment& seg, shm::SharedMr& w, uint32_t rkey) {
  uint32_t expected = rkey;
  if (rkey == 0 || !w.rkey.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return false;
  seg.mr(w.mw_mr_slot).bound_windows.fetch_sub(1, std::memory_order_seq_cst);
  return true;
}

}  // namespace

ibv_wc_status bind_window(shm::Segment& seg, shm::OwnerId self, uint32_t pd_id, uint32_t qpn, const WindowBind& b) {
  if (b.mw_slot < shm::kFirstMwSlot || b.mw_slot >= shm::kMaxMrs) return IBV_WC_MW_BIND_ERR;
  shm::SharedMr& w = seg.mr(b.mw_slot);
  // The window, the QP and the MR share one PD (IBA 10.6.7.2.1).
  if (w.lkey == 0 || !(w.owner == self) || w.pd_id != pd_id) return IBV_WC_MW_BIND_ERR;
  // Only the key byte may change (IBA 10.6.7.2: the R_Key's index is the window's).
  if ((b.new_rkey & ~kKeyByteMask) != (w.lkey & ~kKeyByteMask)) return IBV_WC_MW_BIND_ERR;
  const uint32_t current = w.rkey.load(std::memory_order_acquire);
  // C10-…: a type 2 window is bound only from the invalid state.
  if (w.mw_type == IBV_MW_TYPE_2 && current != 0) return IBV_WC_MW_BIND_ERR;
  if ((b.access & ~kWindowAccess) != 0) return IBV_WC_MW_BIND_ERR;
  if (w.mw_type == IBV_MW_TYPE_1 && b.length == 0 && b.mr_lkey == 0) {
    take_back(seg, w, current);  // ibv_bind_mw(3): a zero length unbinds
    return IBV_WC_SUCCESS;
  }
  MrRef mr;
  if (check_key(seg, b.mr_lkey, false, self, pd_id, 0, b.addr, b.length, 0, &mr) != KeyCheck::kOk)
    return IBV_WC_MW_BIND_ERR;
  const shm::SharedMr& region = *mr.mr;
  // IBA 10.6.7.2.1: the region allows binding, and remote write or atomic
  // access through a window needs local write on the region (ibv_bind_mw(3)).
  if ((region.access & IBV_ACCESS_MW_BIND) == 0) return IBV_WC_MW_BIND_ERR;
  if ((b.access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
      (region.access & IBV_ACCESS_LOCAL_WRITE) == 0)
    return IBV_WC_MW_BIND_ERR;
  if (current != 0) take_back(seg, w, current);  // a type 1 rebind
  const uint32_t region_slot = mr_slot_of_key(b.mr_lkey);
  shm::SharedMr& counted = seg.mr(region_slot);
  const uint32_t region_rkey = counted.rkey.load(std::memory_order_relaxed);
  // Counted first, then the region re-checked: ibv_dereg_mr does the reverse.
  counted.bound_windows.fetch_add(1, std::memory_order_seq_cst);
  if (region_rkey == 0 || counted.rkey.load(std::memory_order_seq_cst) != region_rkey) {
    counted.bound_windows.fetch_sub(1, std::memory_order_seq_cst);
    return IBV_WC_MW_BIND_ERR;
  }
  {
    // A rebind rewrites fields that a responder thread may still be reading
    // under the old key; check_key's re-read of the key discards what it read
    // (invariant 9), a seqlock TSan cannot follow.
    const UnsyncedAccess seqlock_writes;
    w.access = b.access & ~static_cast<uint32_t>(IBV_ACCESS_ZERO_BASED);
    w.addr = mr.va;
    w.length = b.length;
    w.iova = (b.access & IBV_ACCESS_ZERO_BASED) ? 0 : b.addr;
    w.mw_qpn = w.mw_type == IBV_MW_TYPE_2 ? qpn : 0;
    w.mw_mr_slot = region_slot;
    w.map_fd = region.map_fd;
    w.map_base = region.map_base;
    w.map_size = region.map_size;
    w.map_ino = region.map_ino;
    w.map_dev = region.map_dev;
    // Peers cache mappings by registration: a bind is a new one.
    w.reg_seq = seg.header().next_reg_seq.fetch_add(1, std::memory_order_relaxed);
  }
  w.rkey.store(b.new_rkey, std::memory_order_release);
  return IBV_WC_SUCCESS;
}

bool invalidate_window(shm::Segment& seg, uint32_t rkey, shm::OwnerId owner, uint32_t pd_id, uint32_t qpn) {
  if (!is_window_key(rkey)) return false;  // softverbs has no fast-registered MRs to invalidate
  shm::SharedMr& w = seg.mr(mr_slot_of_key(rkey));
  if (w.rkey.load(std::memory_order_acquire) != rkey) return false;
  if (!(w.owner == owner) || w.pd_id != pd_id || w.mw_type != IBV_MW_TYPE_2) return false;
  if (qpn != 0 && w.mw_qpn != qpn) return false;
  return take_back(seg, w, rkey);
}

void unbind_window(shm::Segment& seg, uint32_t mw_slot) {
  shm::SharedMr& w = seg.mr(mw_slot);
  for (uint32_t k = w.rkey.load(std::memory_order_acquire); k != 0; k = w.rkey.load(std::memory_order_acquire))
    if (take_back(seg, w, k)) return;
}

}  // namespace softverbs::transport
