#include "fabric/host/mr_backing.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>

#include "shm/limits.h"
#include "util/log.h"
#include "util/proc_maps.h"
#include "util/raw_mmap.h"

namespace softverbs::fabric::host {
namespace {

constexpr char kMemfdName[] = "softverbs-mr";

struct Span {
  uint64_t start;
  uint64_t size;
  int fd;
  uint64_t ino;
  uint64_t dev;
  uint64_t id;
  uint32_t users;
};

struct Registry {
  std::mutex mu;
  std::map<uint64_t, Span> spans;  // by start
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: used from atexit paths
  return *r;
}

// True when every byte of [start, end) lies in private anonymous read-write
// memory (or in one of our own memfd spans that is no longer registered).
bool remappable(uint64_t start, uint64_t end) {
  return util::every_mapping_in(start, end, [](const util::Mapping& m) {
    const bool anon = m.name.empty() || m.name == "[heap]";
    const bool ours = m.name.starts_with("/memfd:softverbs-mr");
    return m.read && m.write && ((anon && m.is_private) || (ours && !m.is_private));
  });
}

bool overlaps_own_stack(uint64_t start, uint64_t end) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return true;
  void* stack = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&attr, &stack, &size);
  pthread_attr_destroy(&attr);
  const uint64_t lo = reinterpret_cast<uint64_t>(stack);
  return start < lo + size && lo < end;
}

// Whole pages are copied, including bytes around the registered region that
// belong to other allocations: that is intended, so these two stay out of the
// sanitizers' sight (and out of memcpy, which ASan intercepts).
#define SV_RAW_MEMORY __attribute__((no_sanitize("address", "thread"), optimize("no-tree-loop-distribute-patterns")))

SV_RAW_MEMORY bool page_is_zero(const unsigned char* p) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t acc = 0;
  for (size_t i = 0; i < shm::kPageSize / 8; ++i) acc |= w[i];
  return acc == 0;
}

SV_RAW_MEMORY void copy_pages(void* dst, const void* src, uint64_t bytes) {
  auto* d = static_cast<uint64_t*>(dst);
  const auto* s = static_cast<const uint64_t*>(src);
  for (uint64_t i = 0; i < bytes / 8; ++i) d[i] = s[i];
}

// Copies the span into a new memfd and maps it in place. Zero pages are not
// copied, so untouched memory stays unallocated in the memfd too.
bool remap(Span& s) {
  int fd = memfd_create(kMemfdName, MFD_CLOEXEC);
  if (fd < 0) return false;
  if (ftruncate(fd, static_cast<off_t>(s.size)) != 0) {
    close(fd);
    return false;
  }
  void* tmp = util::raw_mmap(nullptr, s.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (tmp == MAP_FAILED) {
    close(fd);
    return false;
  }
  auto* src = reinterpret_cast<const unsigned char*>(s.start);
  auto* dst = static_cast<unsigned char*>(tmp);
  for (uint64_t off = 0; off < s.size; off += shm::kPageSize)
    if (!page_is_zero(src + off)) copy_pages(dst + off, src + off, shm::kPageSize);
  void* p = util::raw_mmap(reinterpret_cast<void*>(s.start), s.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  util::raw_munmap(tmp, s.size);
  if (p == MAP_FAILED) {
    // MAP_FIXED failing leaves the old mapping in place (EINVAL/ENOMEM before any change).
    close(fd);
    return false;
  }
  struct stat st;
  fstat(fd, &st);
  s.fd = fd;
  s.ino = st.st_ino;
  s.dev = st.st_dev;
  return true;
}

void after_fork_in_child() {
  Registry& r = registry();
  // The child is single-threaded here; the parent's lock state is irrelevant.
  new (&r.mu) std::mutex();
  for (auto& [start, s] : r.spans) {
    void* anon = util::raw_mmap(nullptr, s.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (anon != MAP_FAILED) {
      copy_pages(anon, reinterpret_cast<void*>(s.start), s.size);
      util::raw_mremap(anon, s.size, s.size, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(s.start));
    }
    close(s.fd);
  }
  r.spans.clear();
}

void install_fork_handler() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, after_fork_in_child); });
}

Backing to_backing(const Span& s) { return Backing{s.fd, s.start, s.size, s.ino, s.dev, s.id}; }

}  // namespace

bool remap_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SOFTVERBS_REMAP");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

Backing acquire_backing(uint64_t addr, uint64_t length) {
  if (!remap_enabled() || length == 0) return {};
  const uint64_t start = addr & ~(shm::kPageSize - 1);
  const uint64_t end = (addr + length + shm::kPageSize - 1) & ~(shm::kPageSize - 1);
  if (end <= start) return {};
  install_fork_handler();
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  // Invariant 1: reuse a containing span, refuse a straddled one.
  auto it = r.spans.upper_bound(start);
  if (it != r.spans.begin()) {
    auto prev = std::prev(it);
    if (prev->second.start + prev->second.size > start) {
      if (prev->second.start + prev->second.size >= end) {
        prev->second.users += 1;
        return to_backing(prev->second);
      }
      return {};
    }
  }
  if (it != r.spans.end() && it->second.start < end) return {};
  if (overlaps_own_stack(start, end) || !remappable(start, end)) return {};
  Span s{start, end - start, -1, 0, 0, r.next_id++, 1};
  if (!remap(s)) {
    SV_LOG(kDebug, "memory at %#llx+%llu stays private: %s", static_cast<unsigned long long>(addr),
           static_cast<unsigned long long>(length), std::strerror(errno));
    return {};
  }
  r.spans.emplace(start, s);
  return to_backing(s);
}

void release_backing(const Backing& b) {
  if (b.fd < 0) return;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.spans.find(b.base);
  if (it == r.spans.end() || it->second.id != b.span_id) return;
  if (--it->second.users == 0) {
    close(it->second.fd);
    r.spans.erase(it);
  }
}

}  // namespace softverbs::fabric::host
