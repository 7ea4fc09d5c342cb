#include "transport/placement_copy.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <vector>

namespace softverbs::transport {
namespace {

// Every length and both alignments: the bytes are copied, and nothing
// around them is touched.
TEST(PlacementCopy, CopiesExactlyTheRange) {
  std::vector<unsigned char> src(400), dst(400);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  for (size_t n = 0; n <= 300; ++n) {
    for (size_t so = 0; so < 32; so += 5) {
      for (size_t doff = 0; doff < 32; doff += 3) {
        std::memset(dst.data(), 0xEE, dst.size());
        place_copy(dst.data() + doff, src.data() + so, n);
        ASSERT_EQ(std::memcmp(dst.data() + doff, src.data() + so, n), 0) << n << " " << so << " " << doff;
        for (size_t i = 0; i < doff; ++i) ASSERT_EQ(dst[i], 0xEE) << n;
        for (size_t i = doff + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << n;
      }
    }
  }
}

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Counts the stores each byte of one page receives. The page is read-only;
// a store faults, the handler opens the page and single-steps that one
// instruction (the trap flag); the trap handler then finds the bytes it
// changed, counts them and turns each into its complement, so that a later
// store of the same value to the same byte shows as a change too. (The
// sanitizers own SIGSEGV, hence not in their builds.)
class StoreCounter {
 public:
  static constexpr size_t kPage = 4096;

  StoreCounter() {
    page_ = static_cast<unsigned char*>(mmap(nullptr, kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    self_ = this;
    struct sigaction sa {};
    sa.sa_flags = SA_SIGINFO;
    sa.sa_sigaction = on_fault;
    sigaction(SIGSEGV, &sa, &old_segv_);
    sa.sa_sigaction = on_trap;
    sigaction(SIGTRAP, &sa, &old_trap_);
  }
  ~StoreCounter() {
    sigaction(SIGSEGV, &old_segv_, nullptr);
    sigaction(SIGTRAP, &old_trap_, nullptr);
    munmap(page_, kPage);
    self_ = nullptr;
  }

  unsigned char* page() { return page_; }
  const std::array<uint8_t, kPage>& stores() const { return stores_; }

 private:
  static void on_fault(int, siginfo_t* info, void* uc) {
    auto* p = static_cast<unsigned char*>(info->si_addr);
    if (self_ == nullptr || p < self_->page_ || p >= self_->page_ + kPage) abort();  // a real crash
    std::memcpy(self_->before_.data(), self_->page_, kPage);
    mprotect(self_->page_, kPage, PROT_READ | PROT_WRITE);
    static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_EFL] |= 0x100;  // trap after one instruction
  }
  static void on_trap(int, siginfo_t*, void* uc) {
    for (size_t i = 0; i < kPage; ++i) {
      if (self_->page_[i] != self_->before_[i]) {
        ++self_->stores_[i];
        self_->page_[i] = static_cast<unsigned char>(~self_->page_[i]);
      }
    }
    mprotect(self_->page_, kPage, PROT_READ);
    static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_EFL] &= ~0x100LL;
  }

  static inline StoreCounter* self_ = nullptr;
  unsigned char* page_;
  std::array<unsigned char, kPage> before_{};
  std::array<uint8_t, kPage> stores_{};
  struct sigaction old_segv_ {}, old_trap_ {};
};

using CopyFn = void (*)(void*, const void*, size_t);

// How many stores each byte of the last kOrderedTail received.
std::vector<int> tail_stores(CopyFn copy, size_t dst_offset, size_t n) {
  std::vector<unsigned char> src(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i % 255 + 1);  // never 0: the page starts zeroed
  StoreCounter counter;
  copy(counter.page() + dst_offset, src.data(), n);
  std::vector<int> out;
  const size_t tail = n < kOrderedTail ? n : kOrderedTail;
  for (size_t i = dst_offset + n - tail; i < dst_offset + n; ++i) out.push_back(counter.stores()[i]);
  return out;
}

// The counter itself can tell a byte stored twice.
TEST(PlacementCopy, StoreCounterSeesAByteStoredTwice) {
  const CopyFn twice = [](void* d, const void* s, size_t n) {
    copy_each_byte_once(d, s, n);
    asm volatile("" ::: "memory");
    std::memcpy(static_cast<char*>(d) + n - 8, static_cast<const char*>(s) + n - 8, 8);
  };
  const std::vector<int> stores = tail_stores(twice, 16, 64);
  EXPECT_EQ(stores[0], 1);
  EXPECT_EQ(stores[63], 2);
}

// The regression riostream found: its 64-byte buffer sits 16 bytes into a
// page, and glibc's AVX-512 memcpy stores such a copy twice; the last 64
// bytes of any placement are stored once each.
TEST(PlacementCopy, EachByteOfTheTailIsStoredOnce) {
  for (size_t n : {1, 7, 8, 15, 16, 33, 63, 64, 65, 100, 128, 200, 1000, 3000}) {
    for (size_t offset : {0, 16, 40, 63}) {
      const std::vector<int> stores = tail_stores(place_copy, offset, n);
      for (size_t i = 0; i < stores.size(); ++i) ASSERT_EQ(stores[i], 1) << "n " << n << " offset " << offset << " byte " << i;
    }
  }
}
#endif

}  // namespace
}  // namespace softverbs::transport
