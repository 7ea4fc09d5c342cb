// Copies and atomics on memory that another process synchronizes.
//
// Some accesses are ordered only through shared memory and futexes across
// processes (a peer's request arrives, we serve it, the peer completes it and
// the application sees the completion). ThreadSanitizer sees the accesses of
// one process and none of that ordering, so it reports races that cannot
// happen. These helpers are the accesses it must not see; they are used only
// where the cross-process protocol orders them (bounce serving).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softverbs::util {

#define SV_UNSEEN_BY_SANITIZERS \
  __attribute__((no_sanitize("address", "thread"), noinline, optimize("no-tree-loop-distribute-patterns")))

SV_UNSEEN_BY_SANITIZERS inline void raw_copy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  if (((reinterpret_cast<uintptr_t>(d) ^ reinterpret_cast<uintptr_t>(s)) & 7) == 0) {
    for (; i < n && (reinterpret_cast<uintptr_t>(d + i) & 7) != 0; ++i) d[i] = s[i];
    for (; i + 8 <= n; i += 8) *reinterpret_cast<uint64_t*>(d + i) = *reinterpret_cast<const uint64_t*>(s + i);
  }
  for (; i < n; ++i) d[i] = s[i];
}

// 64-bit fetch-and-add and compare-and-swap as the CPU does them (lock-prefixed
// on x86), out of the sanitizers' sight; return the original value.
inline uint64_t raw_fetch_add(uint64_t* p, uint64_t add) {
#if defined(__x86_64__)
  asm volatile("lock xaddq %0, %1" : "+r"(add), "+m"(*p) : : "memory");
  return add;
#else
  return __atomic_fetch_add(p, add, __ATOMIC_SEQ_CST);
#endif
}

inline uint64_t raw_compare_swap(uint64_t* p, uint64_t expected, uint64_t desired) {
#if defined(__x86_64__)
  asm volatile("lock cmpxchgq %2, %1" : "+a"(expected), "+m"(*p) : "r"(desired) : "memory");
  return expected;
#else
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
#endif
}

// ATOMIC WRITE's store: one aligned 64-bit move, never torn; the compiler
// barrier keeps it after the stores before it (x86 keeps store order).
inline void raw_store64(uint64_t* p, uint64_t v) {
#if defined(__x86_64__)
  asm volatile("movq %1, %0" : "=m"(*p) : "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

}  // namespace softverbs::util
