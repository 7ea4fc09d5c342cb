// Byte ranges in the caller's own address space, and copying between lists
// of them. The payload of a request is always such a list: the requester's
// gathered SGEs on the host fabric, a packet's bytes on the UDP fabric.
// Every copy here may land in memory an application polls: place_copy.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <cstring>

#include "transport/placement_copy.h"

namespace softverbs::transport {

struct IoList {
  const iovec* iov = nullptr;
  uint32_t count = 0;
  uint64_t bytes = 0;
};

// Walks an IoList from a byte offset.
class IoCursor {
 public:
  explicit IoCursor(IoList list, uint64_t offset = 0) : list_(list) { skip(offset); }

  void skip(uint64_t n) {
    while (n > 0 && index_ < list_.count) {
      const uint64_t left = list_.iov[index_].iov_len - within_;
      if (n < left) {
        within_ += n;
        return;
      }
      n -= left;
      ++index_;
      within_ = 0;
    }
  }

  // Next contiguous piece of at most `max` bytes; length 0 at the end.
  iovec next(uint64_t max) {
    while (index_ < list_.count && list_.iov[index_].iov_len == within_) {
      ++index_;
      within_ = 0;
    }
    if (index_ >= list_.count) return {nullptr, 0};
    const iovec& v = list_.iov[index_];
    uint64_t n = v.iov_len - within_;
    if (n > max) n = max;
    iovec piece{static_cast<char*>(v.iov_base) + within_, n};
    within_ += n;
    return piece;
  }

 private:
  IoList list_;  // by value: cursors outlive the temporaries they are often built from
  uint32_t index_ = 0;
  uint64_t within_ = 0;
};

// Copies `n` bytes from `src` (from its offset) into the contiguous `dst`.
inline void gather_into(void* dst, IoCursor& src, uint64_t n) {
  auto* d = static_cast<char*>(dst);
  while (n > 0) {
    iovec p = src.next(n);
    if (p.iov_len == 0) return;
    place_copy(d, p.iov_base, p.iov_len);
    d += p.iov_len;
    n -= p.iov_len;
  }
}

// Copies `n` bytes from the contiguous `src` into `dst` (from its offset).
inline void scatter_from(IoCursor& dst, const void* src, uint64_t n) {
  auto* s = static_cast<const char*>(src);
  while (n > 0) {
    iovec p = dst.next(n);
    if (p.iov_len == 0) return;
    place_copy(p.iov_base, s, p.iov_len);
    s += p.iov_len;
    n -= p.iov_len;
  }
}

// gather_into/scatter_from for a list from `offset`. The usual case, the
// whole list from its start, walks the iovecs directly: the cursor's
// bookkeeping cost more than the few bytes of a small message.
inline void gather_list(void* dst, const IoList& src, uint64_t offset, uint64_t n) {
  if (offset == 0) {
    auto* d = static_cast<char*>(dst);
    for (uint32_t i = 0; i < src.count && n > 0; ++i) {
      const uint64_t k = src.iov[i].iov_len < n ? src.iov[i].iov_len : n;
      place_copy(d, src.iov[i].iov_base, k);
      d += k;
      n -= k;
    }
    return;
  }
  IoCursor c(src, offset);
  gather_into(dst, c, n);
}

inline void scatter_list(const IoList& dst, uint64_t offset, const void* src, uint64_t n) {
  if (offset == 0) {
    auto* s = static_cast<const char*>(src);
    for (uint32_t i = 0; i < dst.count && n > 0; ++i) {
      const uint64_t k = dst.iov[i].iov_len < n ? dst.iov[i].iov_len : n;
      place_copy(dst.iov[i].iov_base, s, k);
      s += k;
      n -= k;
    }
    return;
  }
  IoCursor c(dst, offset);
  scatter_from(c, src, n);
}

}  // namespace softverbs::transport
