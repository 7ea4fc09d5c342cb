#include "verbs/mw.h"

#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <new>

#include "shm/slot_high_water.h"
#include "shm/segment.h"
#include "transport/mem_ops.h"
#include "transport/mw_ops.h"
#include "verbs/context.h"
#include "verbs/device.h"

namespace softverbs::verbs {
namespace {

uint8_t random_byte() {
  uint8_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = static_cast<uint8_t>(reinterpret_cast<uintptr_t>(&v) >> 4);
  return v;
}

// A free window slot, marked allocated (lkey != 0) with its owner, PD and
// type before the control lock is released (invariant 1).
Result<uint32_t> claim_window(shm::Segment& seg, shm::OwnerId self, uint32_t pd_id, ibv_mw_type type) {
  static std::atomic<uint32_t> hint{0};
  constexpr uint32_t kWindows = shm::kMaxMrs - shm::kFirstMwSlot;
  shm::ControlLock lock(seg);
  const uint32_t start = hint.load(std::memory_order_relaxed);
  for (uint32_t n = 0; n < kWindows; ++n) {
    const uint32_t slot = shm::kFirstMwSlot + (start + n) % kWindows;
    shm::SharedMr& w = seg.mr(slot);
    if (w.rkey.load(std::memory_order_relaxed) != 0 || w.lkey != 0) continue;
    w.owner = self;
    w.pd_id = pd_id;
    w.mw_type = type;
    w.mw_qpn = 0;
    w.map_fd = -1;
    w.lkey = transport::window_key_base(slot, random_byte());
    shm::raise_high_water(seg.header().high_water.windows, slot - shm::kFirstMwSlot);
    hint.store(start + n + 1, std::memory_order_relaxed);
    return slot;
  }
  return Status::error(ENOMEM);
}

}  // namespace

Result<Mw*> allocate_mw(Pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return Status::error(EINVAL);
  Device& dev = pd->ctx->device();
  auto* mw = new (std::nothrow) Mw();
  if (mw == nullptr) return Status::error(ENOMEM);
  Result<uint32_t> slot = claim_window(dev.seg(), dev.self(), pd->id, type);
  if (!slot.is_ok()) {
    delete mw;
    return slot.status();
  }
  mw->slot = slot.value();
  mw->pd = pd;
  mw->ibv.context = pd->ctx->ibv();
  mw->ibv.pd = &pd->ibv;
  mw->ibv.rkey = dev.seg().mr(mw->slot).lkey;
  mw->ibv.handle = mw->slot;
  mw->ibv.type = type;
  pd->users.fetch_add(1, std::memory_order_relaxed);
  return mw;
}

Status deallocate_mw(Mw* mw) {
  shm::Segment& seg = mw->pd->ctx->device().seg();
  transport::unbind_window(seg, mw->slot);
  {
    shm::ControlLock lock(seg);
    seg.mr(mw->slot).lkey = 0;
  }
  mw->pd->users.fetch_sub(1, std::memory_order_relaxed);
  delete mw;
  return Status::ok();
}

void fill_bind(transport::SendWqe& w, ibv_mw* mw, uint32_t new_rkey, const ibv_mw_bind_info& info) {
  w.remote_qpn = Mw::from(mw)->slot;
  w.rkey = new_rkey;
  w.remote_addr = info.addr;
  w.compare_add = info.length;
  const uint64_t lkey = info.mr != nullptr ? info.mr->lkey : 0;
  w.swap = (lkey << 32) | info.mw_access_flags;
  w.length = 0;
  w.num_sge = 0;
  w.inline_len = 0;
}

}  // namespace softverbs::verbs
