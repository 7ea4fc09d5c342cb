// Memory windows in the key table (IBA 10.6.7): binding one to a region,
// invalidating it locally or for a SEND WITH INVALIDATE.
//
// A window is a slot of the shared MR table from shm::kFirstMwSlot on; while
// bound it reads as a region (its range, rights and R_Key, its MR's pages),
// so check_key (mem_ops.h) and every memory path serve it unchanged. Its
// R_Key is the one word that makes it valid: stored last by a bind, taken
// back by compare-and-swap by whoever invalidates it, so exactly one party
// uncounts it from its MR (SharedMr::bound_windows).
//
// Binds and local invalidations run in the owner, under the QP's send-side
// lock; a remote invalidation runs in whoever runs the responder.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "shm/segment.h"

namespace softverbs::transport {

// A bind work request, as the requester carries it out.
struct WindowBind {
  uint32_t mw_slot;
  uint32_t new_rkey;
  uint32_t mr_lkey;   // 0: no MR (a type 1 unbind)
  uint64_t addr;      // in the MR's address space (its iova)
  uint64_t length;
  uint32_t access;    // mw_access_flags
};

// IBA 10.6.7.2 (C10-…): the checks of a bind, then the window takes its new
// range and R_Key; a type 1 window bound before is rebound, a length-0 bind
// of one unbinds it. IBV_WC_MW_BIND_ERR on any failed check.
ibv_wc_status bind_window(shm::Segment& seg, shm::OwnerId self, uint32_t pd_id, uint32_t qpn, const WindowBind& b);

// Invalidates the type 2 window whose R_Key is `rkey`, owned by `owner` in
// PD `pd_id` and bound to QP `qpn` when qpn != 0 (IBA 10.6.7.2.3: a type 1
// window cannot be invalidated this way). False when no such window is valid.
bool invalidate_window(shm::Segment& seg, uint32_t rkey, shm::OwnerId owner, uint32_t pd_id, uint32_t qpn);

// Makes a window invalid whatever its key (ibv_dealloc_mw, type 1 rebind).
void unbind_window(shm::Segment& seg, uint32_t mw_slot);

}  // namespace softverbs::transport
