#include "verbs/xrcd.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <new>

#include "shm/segment.h"
#include "shm/slot_reset.h"
#include "verbs/context.h"
#include "verbs/device.h"

namespace softverbs::verbs {
namespace {

constexpr uint32_t kLive = static_cast<uint32_t>(shm::SlotState::kLive);

// REQUIRES: the control lock. ino 0 (a private domain) never matches.
int find_domain(shm::Segment& seg, uint64_t dev, uint64_t ino) {
  for (uint32_t i = 0; ino != 0 && i < shm::kMaxXrcds; ++i) {
    const shm::SharedXrcd& x = seg.xrcd(i);
    if (x.slot_state.load(std::memory_order_relaxed) == kLive && x.dev == dev && x.ino == ino)
      return static_cast<int>(i);
  }
  return -1;
}

// REQUIRES: the control lock.
int claim_domain(shm::Segment& seg, uint64_t dev, uint64_t ino) {
  for (uint32_t i = 0; i < shm::kMaxXrcds; ++i) {
    shm::SharedXrcd& x = seg.xrcd(i);
    if (x.slot_state.load(std::memory_order_relaxed) == kLive) continue;
    shm::reset_slot_after_state(x);
    x.dev = dev;
    x.ino = ino;
    x.slot_state.store(kLive, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Result<Xrcd*> Xrcd::open(Context* ctx, const ibv_xrcd_init_attr& a) {
  // As the kernel's uverbs: both fields are required, and both "exists
  // already" under O_EXCL and "does not exist" without O_CREAT are EINVAL.
  constexpr uint32_t kNeeded = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if ((a.comp_mask & ~(kNeeded)) != 0) return Status::error(EOPNOTSUPP);
  if ((a.comp_mask & kNeeded) != kNeeded) return Status::error(EINVAL);
  if ((a.oflags & ~(O_CREAT | O_EXCL)) != 0) return Status::error(EINVAL);
  uint64_t dev = 0, ino = 0;
  if (a.fd != -1) {
    struct stat st;
    if (fstat(a.fd, &st) != 0) return Status::error(EBADF);
    dev = st.st_dev;
    ino = st.st_ino;
  } else if ((a.oflags & O_CREAT) == 0) {
    return Status::error(EINVAL);  // ibv_open_xrcd(3): fd -1 asks for a new domain with O_CREAT
  }
  auto* x = new (std::nothrow) Xrcd();
  if (x == nullptr) return Status::error(ENOMEM);
  Device& device = ctx->device();
  shm::Segment& seg = device.seg();
  {
    shm::ControlLock lock(seg);
    int slot = find_domain(seg, dev, ino);
    int err = 0;
    if (slot >= 0 && (a.oflags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) err = EINVAL;
    if (slot < 0 && err == 0) {
      if ((a.oflags & O_CREAT) == 0) err = EINVAL;
      else if ((slot = claim_domain(seg, dev, ino)) < 0) err = ENOMEM;
    }
    if (err != 0) {
      delete x;
      return Status::error(err);
    }
    shm::SharedXrcd& d = seg.xrcd(static_cast<uint32_t>(slot));
    ++d.opens;
    ++d.opens_by[device.self().slot];
    x->slot = static_cast<uint32_t>(slot);
  }
  x->ctx = ctx;
  x->ibv_xrcd_.context = ctx->ibv();
  return x;
}

Status Xrcd::close() {
  if (users.load() != 0) return Status::error(EBUSY);  // ibv_close_xrcd(3): SRQs or QPs still use it
  shm::Segment& seg = ctx->device().seg();
  {
    shm::ControlLock lock(seg);
    shm::SharedXrcd& d = seg.xrcd(slot);
    --d.opens_by[ctx->device().self().slot];
    if (--d.opens == 0) d.slot_state.store(static_cast<uint32_t>(shm::SlotState::kFree), std::memory_order_release);
  }
  delete this;
  return Status::ok();
}

}  // namespace softverbs::verbs
