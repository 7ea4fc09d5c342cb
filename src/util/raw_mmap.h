// mmap, munmap and mremap as bare system calls, past libc's symbols.
//
// Registration remaps application memory onto a memfd, and peers map and
// unmap those memfds. Memory-event hooks in the application (UCX's ucm,
// which patches libc's mmap/munmap or their PLT slots) would see each of
// those calls as the application's own memory changing under it, and drop
// every registration cached on those pages, so each message re-registers.
// Our calls do not change what the application's pages hold, so they go to
// the kernel directly. Same return conventions as libc: MAP_FAILED or -1
// with errno set.
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace softverbs::util {

inline void* raw_mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) {
  long r = syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
  return r == -1 ? MAP_FAILED : reinterpret_cast<void*>(r);
}

inline int raw_munmap(void* addr, size_t length) {
  return static_cast<int>(syscall(SYS_munmap, addr, length));
}

inline void* raw_mremap(void* old_addr, size_t old_size, size_t new_size, int flags, void* new_addr) {
  long r = syscall(SYS_mremap, old_addr, old_size, new_size, flags, new_addr);
  return r == -1 ? MAP_FAILED : reinterpret_cast<void*>(r);
}

}  // namespace softverbs::util
