// XRC domains (ibv_open_xrcd(3)): the scope within which an XRC_RECV QP
// takes receive WQEs from XRC SRQs (IBA Annex A14, XRC).
//
// The domain itself is a slot of the segment (shm::SharedXrcd), found by
// the (device, inode) of the file it was opened with, so that processes
// opening the same file share one domain; fd -1 gives a domain private to
// its opener. This object is one process's handle on it, embedding the
// ABI's ibv_xrcd.
//
// users counts the SRQs and QPs created (or opened) through this handle:
// close fails with EBUSY while any remains. The last handle closed, in any
// process, frees the slot; a process that dies holding handles has them
// released by whoever reclaims it (shm::release_xrcds_of).
//
// Thread-safety: open/close take the segment's control lock; users is atomic.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "util/status.h"

namespace softverbs::verbs {

class Context;

struct Xrcd {
  ibv_xrcd ibv_xrcd_{};  // first: ibv_xrcd* is this object
  Context* ctx = nullptr;
  uint32_t slot = 0;
  std::atomic<uint32_t> users{0};

  static Result<Xrcd*> open(Context* ctx, const ibv_xrcd_init_attr& attr);
  static Xrcd* from(ibv_xrcd* x) { return reinterpret_cast<Xrcd*>(x); }
  ibv_xrcd* ibv() { return &ibv_xrcd_; }
  Status close();
};
static_assert(offsetof(Xrcd, ibv_xrcd_) == 0);

}  // namespace softverbs::verbs
