#include "fabric/host/bounce_server.h"

#include <cerrno>
#include <cstring>

#include "transport/mem_ops.h"
#include "transport/target_memory.h"
#include "util/fault_in.h"
#include "util/futex.h"
#include "util/raw_memory.h"

namespace softverbs::fabric::host {

Status prepare_bounce_slots(shm::Segment& seg, shm::OwnerId self) {
  shm::ProcessSlot& proc = seg.process(self.slot);
  for (auto& s : proc.bounce) {
    if (s.buffer != 0) continue;  // kept across reuses of the process slot
    Result<shm::Offset> off = seg.arena_alloc(shm::kBounceBytes);
    if (!off.is_ok()) return off.status();
    s.buffer = off.value();
  }
  return Status::ok();
}

namespace {

// The requester checked the key against the shared table; check again here,
// against this process's own registration, before touching memory.
int serve(shm::Segment& seg, shm::OwnerId self, shm::BounceSlot& s) {
  if (s.mr_slot >= shm::kMaxMrs) return EINVAL;
  const shm::SharedMr& mr = seg.mr(s.mr_slot);
  if (s.rkey == 0 || mr.rkey.load(std::memory_order_acquire) != s.rkey || !(mr.owner == self)) return EFAULT;
  if (s.length > shm::kBounceBytes || s.addr < mr.addr || s.addr + s.length > mr.addr + mr.length) return EFAULT;
  char* buf = seg.ptr<char>(s.buffer);
  auto* target = reinterpret_cast<char*>(s.addr);
  if (transport::on_demand(mr) && !util::fault_in(s.addr, s.length, s.op != static_cast<uint32_t>(shm::BounceOp::kRead)))
    return EFAULT;
  switch (static_cast<shm::BounceOp>(s.op)) {
    // The requesting process orders these against the application (util/raw_memory.h).
    case shm::BounceOp::kWrite: util::raw_copy(target, buf, s.length); return 0;
    case shm::BounceOp::kRead: util::raw_copy(buf, target, s.length); return 0;
    case shm::BounceOp::kCmpSwap:
    case shm::BounceOp::kFetchAdd: {
      if (s.addr % 8 != 0 || s.length != 8) return EINVAL;
      auto* word = reinterpret_cast<uint64_t*>(target);
      s.original = s.op == static_cast<uint32_t>(shm::BounceOp::kCmpSwap)
                       ? util::raw_compare_swap(word, s.operand1, s.operand2)
                       : util::raw_fetch_add(word, s.operand1);
      return 0;
    }
    case shm::BounceOp::kAtomicStore:
      if (s.addr % 8 != 0 || s.length != 8) return EINVAL;
      util::raw_store64(reinterpret_cast<uint64_t*>(target), s.operand2);
      return 0;
  }
  return EINVAL;
}

}  // namespace

bool serve_bounce_requests(shm::Segment& seg, shm::OwnerId self) {
  bool any = false;
  for (auto& s : seg.process(self.slot).bounce) {
    if (s.state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::BounceState::kRequested)) continue;
    s.result = serve(seg, self, s);
    s.state.store(static_cast<uint32_t>(shm::BounceState::kDone), std::memory_order_release);
    futex_wake(&s.state, 1);
    any = true;
  }
  return any;
}

}  // namespace softverbs::fabric::host
