// fork() support: ibv_fork_init, ibv_is_fork_initialized and the
// ibv_dontfork_range / ibv_dofork_range pair.
//
// rdma-core needs ibv_fork_init because a hardware MR pins pages: after a
// fork, copy-on-write would move the parent's pages away from what the HCA
// DMAs into. softverbs' memory regions do not depend on page pinning (the
// fabric reads and writes the process's memory through its own mappings),
// so fork safety needs no preparation: ibv_fork_init succeeds and
// ibv_is_fork_initialized reports IBV_FORK_UNNEEDED, as rdma-core does on a
// kernel with copy-on-fork for pinned pages.
//
// The range calls still do what their names say, for callers (Debian's
// libmlx5 buffers) that want a region kept out of a child: madvise() over
// the range rounded out to whole pages. Unlike rdma-core they keep no
// reference counts, so overlapping ranges share one advice.
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

// Entry points leave the library; the build hides everything else.
#define SV_PUBLIC __attribute__((visibility("default")))

namespace softverbs::abi {
namespace {

int advise_range(void* base, size_t size, int advice) {
  if (base == nullptr || size == 0) return 0;
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return errno != 0 ? errno : EINVAL;
  const uintptr_t mask = static_cast<uintptr_t>(page) - 1;
  const uintptr_t first = reinterpret_cast<uintptr_t>(base);
  if (size > UINTPTR_MAX - first - mask) {
    errno = EINVAL;
    return EINVAL;
  }
  const uintptr_t start = first & ~mask;
  const uintptr_t end = (first + size + mask) & ~mask;
  if (madvise(reinterpret_cast<void*>(start), end - start, advice) != 0) return errno;
  return 0;
}

}  // namespace
}  // namespace softverbs::abi

extern "C" {

SV_PUBLIC int ibv_fork_init(void) { return 0; }

SV_PUBLIC enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

// Both return 0, or the errno value of the failed madvise (errno is set too).
SV_PUBLIC int ibv_dontfork_range(void* base, size_t size) {
  return softverbs::abi::advise_range(base, size, MADV_DONTFORK);
}

SV_PUBLIC int ibv_dofork_range(void* base, size_t size) {
  return softverbs::abi::advise_range(base, size, MADV_DOFORK);
}

}  // extern "C"
