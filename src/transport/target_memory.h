// How the responder reaches the memory of the process that owns a target
// memory region. The responder decides *whether* an access is allowed
// (mem_ops.h); a TargetMemory only carries it out.
//
// The host fabric provides one per target process (mapped memfd, cross-memory
// attach, or bounce through the owner's service thread); for a target in the
// calling process — and on the UDP fabric, where the responder always runs in
// the owner — LocalMemory does plain loads and stores.
#pragma once

#include <cstdint>

#include <cerrno>

#include "shm/objects.h"
#include "transport/iov.h"
#include "transport/mem_ops.h"
#include "util/fault_in.h"
#include "util/status.h"
#include "util/tsan.h"

namespace softverbs::transport {

// kStore: ATOMIC WRITE's 64-bit store of `swap` (no original is returned).
enum class AtomicOp { kCmpSwap, kFetchAdd, kStore };

class TargetMemory {
 public:
  virtual ~TargetMemory() = default;
  // Copies `length` bytes of `src` (from src_offset) to owner address `va` of `mr`.
  virtual Status write(const shm::SharedMr& mr, uint64_t va, const IoList& src, uint64_t src_offset,
                       uint64_t length) = 0;
  // Copies `length` bytes at owner address `va` of `mr` into `dst` (from dst_offset).
  virtual Status read(const shm::SharedMr& mr, uint64_t va, uint64_t length, const IoList& dst,
                      uint64_t dst_offset) = 0;
  // 64-bit atomic at an 8-byte aligned owner address; returns the original value.
  virtual Status atomic(const shm::SharedMr& mr, uint64_t va, AtomicOp op, uint64_t compare_add, uint64_t swap,
                        uint64_t* original) = 0;
  // An ODP region (mem_ops.h on_demand): whether [va, va + length) can be
  // read (or written) now. The accesses above check for themselves; this is
  // for a READ, whose data is copied after the responder answered. EFAULT
  // when not; a memory that cannot tell says yes and fails the access later.
  virtual Status fault_in(const shm::SharedMr&, uint64_t, uint64_t, bool) { return Status::ok(); }
};

class LocalMemory final : public TargetMemory {
 public:
  Status write(const shm::SharedMr& mr, uint64_t va, const IoList& src, uint64_t src_offset, uint64_t length) override {
    if (on_demand(mr) && !util::fault_in(va, length, true)) [[unlikely]]
      return Status::error(EFAULT);
    const UnsyncedAccess placement;
    gather_list(reinterpret_cast<void*>(va), src, src_offset, length);
    return Status::ok();
  }
  Status read(const shm::SharedMr& mr, uint64_t va, uint64_t length, const IoList& dst, uint64_t dst_offset) override {
    if (on_demand(mr) && !util::fault_in(va, length, false)) [[unlikely]]
      return Status::error(EFAULT);
    const UnsyncedAccess placement;
    scatter_list(dst, dst_offset, reinterpret_cast<const void*>(va), length);
    return Status::ok();
  }
  Status atomic(const shm::SharedMr& mr, uint64_t va, AtomicOp op, uint64_t compare_add, uint64_t swap,
                uint64_t* original) override {
    if (on_demand(mr) && !util::fault_in(va, 8, true)) [[unlikely]]
      return Status::error(EFAULT);
    const UnsyncedAccess placement;
    *original = do_atomic(reinterpret_cast<uint64_t*>(va), op, compare_add, swap);
    return Status::ok();
  }

  Status fault_in(const shm::SharedMr&, uint64_t va, uint64_t length, bool write) override {
    return util::fault_in(va, length, write) ? Status::ok() : Status::error(EFAULT);
  }

  static uint64_t do_atomic(uint64_t* p, AtomicOp op, uint64_t compare_add, uint64_t swap) {
    if (op == AtomicOp::kFetchAdd) return __atomic_fetch_add(p, compare_add, __ATOMIC_SEQ_CST);
    if (op == AtomicOp::kStore) {
      // Release: it lands after everything the responder placed before it.
      __atomic_store_n(p, swap, __ATOMIC_RELEASE);
      return 0;
    }
    uint64_t expected = compare_add;
    __atomic_compare_exchange_n(p, &expected, swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;  // the value found, whether or not it was swapped
  }
};

}  // namespace softverbs::transport
