// The copy that places a message's bytes in memory an application may be
// polling.
//
// Applications learn that a WRITE has landed by polling its last byte (the
// perftest latency tools, riostream), and may then write that byte
// themselves. A NIC's DMA stores each byte once; glibc's memcpy does not:
// for many sizes it stores overlapping vectors (a 64-byte copy with 64-byte
// vectors stores the whole range twice), so a byte can be stored again after
// the poller saw the first store and wrote its own value, which the second
// store then overwrites with the old one (x86 lets another core's store fall
// between the two). `place_copy` stores each of the last kOrderedTail bytes
// exactly once, in ascending order, after everything before them; the bulk
// before the tail keeps memcpy's speed (and its sfence after non-temporal
// stores, so the tail still follows it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softverbs::transport {

inline constexpr size_t kOrderedTail = 64;

namespace placement_detail {

// One load and one store of K bytes (K <= 16: one SSE move at most). The
// empty asm keeps the compiler from merging or reordering the stores.
template <size_t K>
[[gnu::always_inline]] inline void move(unsigned char*& d, const unsigned char*& s) {
  unsigned char v[K];
  __builtin_memcpy(v, s, K);
  __builtin_memcpy(d, v, K);
  asm volatile("" ::: "memory");
  d += K;
  s += K;
}

}  // namespace placement_detail

// Copies n <= kOrderedTail bytes, each destination byte stored once, in
// ascending address order.
[[gnu::always_inline]] inline void copy_each_byte_once(void* dst, const void* src, size_t n) {
  using placement_detail::move;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t k = n >> 4; k != 0; --k) move<16>(d, s);
  if (n & 8) move<8>(d, s);
  if (n & 4) move<4>(d, s);
  if (n & 2) move<2>(d, s);
  if (n & 1) move<1>(d, s);
}

inline void place_copy(void* dst, const void* src, size_t n) {
  if (n > kOrderedTail) {
    const size_t bulk = n - kOrderedTail;
    std::memcpy(dst, src, bulk);
    dst = static_cast<unsigned char*>(dst) + bulk;
    src = static_cast<const unsigned char*>(src) + bulk;
    n = kOrderedTail;
  }
  copy_each_byte_once(dst, src, n);
}

}  // namespace softverbs::transport
