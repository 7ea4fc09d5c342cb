// Initiator side of the host fabric: reaching the memory of another process
// on this host, by the best path that works (fastest first):
//   map:    the owner's memfd (mr_backing.h) mapped here; a WRITE is one memcpy,
//           an atomic one CPU atomic;
//   cma:    process_vm_writev/readv (needs ptrace-attach permission);
//           atomics go through bounce, since two syscalls are not atomic;
//   bounce: a request slot in the owner's ProcessSlot, served by its sleeping
//           service thread (bounce_server.h) — works under any ptrace policy.
// SOFTVERBS_HOST_PATH=map|cma|bounce caps the choice (auto = best). With
// SOFTVERBS_HOST_PATH_STRICT=1 as well, that path is the only one: a transfer
// it cannot carry fails (the request is answered with a remote operational
// error, and a warning is logged) instead of falling back to a slower one —
// for tests and measurements that must know which path ran. cma's atomics
// still go through bounce, which is how that path does atomics.
//
// Thread-safety: PeerMemory objects are cheap, per-request, single-threaded;
// the mapping cache behind them is shared by the process and thread-safe.
#pragma once

#include <cstdint>

#include "shm/segment.h"
#include "transport/target_memory.h"

namespace softverbs::fabric::host {

enum class Path : uint8_t { kLocal = 0, kMap = 1, kCma = 2, kBounce = 3 };
const char* path_name(Path p);
// The best path this process may use, from SOFTVERBS_HOST_PATH.
Path path_cap();
// SOFTVERBS_HOST_PATH_STRICT=1 with SOFTVERBS_HOST_PATH=map|cma|bounce: no fallback.
bool path_strict();

class PeerMemory final : public transport::TargetMemory {
 public:
  PeerMemory(shm::Segment& seg, shm::OwnerId target);

  Status write(const shm::SharedMr& mr, uint64_t va, const transport::IoList& src, uint64_t src_offset,
               uint64_t length) override;
  Status read(const shm::SharedMr& mr, uint64_t va, uint64_t length, const transport::IoList& dst,
              uint64_t dst_offset) override;
  Status atomic(const shm::SharedMr& mr, uint64_t va, transport::AtomicOp op, uint64_t compare_add, uint64_t swap,
                uint64_t* original) override;

  // The slowest path the last operations needed (for `softverbs status`).
  Path used() const { return used_; }
  // Where [va, va + length) of the target's region is mapped here, when the
  // map path reaches it; nullptr otherwise.
  char* direct(const shm::SharedMr& mr, uint64_t va, uint64_t length) { return mapped(mr, va, length); }

 private:
  char* mapped(const shm::SharedMr& mr, uint64_t va, uint64_t length);
  Status transfer(const shm::SharedMr& mr, uint64_t va, uint64_t length, const transport::IoList& local,
                  uint64_t local_offset, bool to_target);
  Status cma(const shm::SharedMr& mr, uint64_t va, uint64_t length, const transport::IoList& local,
             uint64_t local_offset, bool to_target);
  Status bounce(const shm::SharedMr& mr, uint64_t va, uint64_t length, const transport::IoList* local,
                uint64_t local_offset, shm::BounceOp op, uint64_t a, uint64_t b, uint64_t* original);
  Status refuse_fallback(const char* why);
  void note(Path p) {
    if (p > used_) used_ = p;
  }

  shm::Segment& seg_;
  shm::OwnerId target_;
  int pid_;
  Path used_ = Path::kLocal;
};

// Unmaps cached peer mappings that went stale more than a grace period ago.
void release_stale_mappings();

}  // namespace softverbs::fabric::host
