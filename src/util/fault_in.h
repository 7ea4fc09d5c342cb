// On-demand paging's page fault, done by the CPU: make a range of this
// process's memory present for an access, or learn that it cannot be.
//
// An ODP region is registered without pinning or remapping its pages, so
// the adapter must not touch them with plain loads and stores: a page the
// application unmapped would kill the process with SIGSEGV. Every access to
// ODP memory faults its range in first (one madvise per access); a range that
// is not mapped, or not writable for a write, fails here and the access is
// refused with the error the verbs layer documents.
//
// A page unmapped between this check and the access is the application's
// race, as it is on hardware that caches translations.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>

namespace softverbs::util {

// Out of line: a syscall anyway, and the hot paths that test for ODP keep
// only the test.
[[gnu::noinline, gnu::cold]] inline bool fault_in(uint64_t addr, uint64_t length, bool write) {
  if (length == 0) return true;
  constexpr uint64_t kPage = 4096;  // the smallest page: any mapping is aligned to it
  const uint64_t lo = addr & ~(kPage - 1);
  const uint64_t end = addr + length;
  if (end < addr || end > ~(kPage - 1)) return false;
  const uint64_t hi = (end + kPage - 1) & ~(kPage - 1);
  for (;;) {
    if (madvise(reinterpret_cast<void*>(lo), hi - lo, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
      return true;
    if (errno != EINTR && errno != EAGAIN) return false;
  }
}

}  // namespace softverbs::util
