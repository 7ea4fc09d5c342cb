#include "fabric/host/peer_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "shm/process_registry.h"
#include "util/futex.h"
#include "util/log.h"
#include "util/raw_mmap.h"
#include "util/time.h"

namespace softverbs::fabric::host {
namespace {

constexpr uint32_t kMapRefused = 1;
constexpr uint32_t kCmaRefused = 2;

struct Mapping {
  char* base;
  uint64_t size;
  uint32_t refs;
};

struct CacheEntry {
  std::atomic<uint64_t> seq;     // reg_seq of the registration the delta belongs to
  std::atomic<intptr_t> delta;   // local pointer = owner va + delta
  Mapping* mapping;              // guarded by MapCache::mu
};

// One per process: which peer registrations are mapped here, and where.
class MapCache {
 public:
  static MapCache& get() {
    static MapCache* c = new MapCache();
    return *c;
  }

  char* lookup(const shm::SharedMr& mr, uint32_t slot, uint64_t va) {
    CacheEntry& e = entries_[slot];
    const uint64_t s1 = e.seq.load(std::memory_order_acquire);
    if (s1 != 0 && s1 == mr.reg_seq) {
      const intptr_t d = e.delta.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (e.seq.load(std::memory_order_relaxed) == s1) return reinterpret_cast<char*>(va + d);
    }
    return nullptr;
  }

  char* map_slow(const shm::SharedMr& mr, uint32_t slot, uint64_t va, int pid, shm::OwnerId owner) {
    std::lock_guard lock(mu_);
    if (refused(owner) & kMapRefused) return nullptr;
    const auto key = std::make_pair(mr.map_ino, mr.map_dev);
    Mapping* m = nullptr;
    if (auto it = maps_.find(key); it != maps_.end()) {
      m = it->second;
    } else {
      char path[64];
      std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, mr.map_fd);
      int fd = ::open(path, O_RDWR | O_CLOEXEC);
      if (fd < 0) {
        if (errno == EACCES || errno == EPERM) refuse(owner, kMapRefused);
        SV_LOG(kDebug, "cannot open %s: %s", path, std::strerror(errno));
        return nullptr;
      }
      struct stat st;
      // The owner may have closed that fd and reused the number: check the inode.
      if (fstat(fd, &st) != 0 || st.st_ino != mr.map_ino || st.st_dev != mr.map_dev ||
          static_cast<uint64_t>(st.st_size) < mr.map_size) {
        ::close(fd);
        return nullptr;
      }
      void* p = util::raw_mmap(nullptr, mr.map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ::close(fd);
      if (p == MAP_FAILED) return nullptr;
      m = new Mapping{static_cast<char*>(p), mr.map_size, 0};
      maps_.emplace(key, m);
    }
    CacheEntry& e = entries_[slot];
    if (e.mapping != m) {
      if (e.mapping != nullptr) unref(e.mapping);
      m->refs += 1;
      e.mapping = m;
    }
    const intptr_t delta = reinterpret_cast<intptr_t>(m->base) - static_cast<intptr_t>(mr.map_base);
    e.seq.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    e.delta.store(delta, std::memory_order_relaxed);
    e.seq.store(mr.reg_seq, std::memory_order_release);
    return reinterpret_cast<char*>(va + delta);
  }

  uint32_t refused(shm::OwnerId owner) {
    const uint64_t v = refusals_[owner.slot].load(std::memory_order_relaxed);
    return (v >> 32) == owner.generation ? static_cast<uint32_t>(v) : 0;
  }
  void refuse(shm::OwnerId owner, uint32_t bits) {
    const uint64_t v = (static_cast<uint64_t>(owner.generation) << 32) | (refused(owner) | bits);
    refusals_[owner.slot].store(v, std::memory_order_relaxed);
  }

  void release_stale() {
    std::lock_guard lock(mu_);
    const uint64_t now = now_ns();
    for (auto it = stale_.begin(); it != stale_.end();) {
      if (now - it->first < shm::kReclaimGraceNs || it->second->refs != 0) {
        ++it;
        continue;
      }
      util::raw_munmap(it->second->base, it->second->size);
      for (auto mit = maps_.begin(); mit != maps_.end(); ++mit)
        if (mit->second == it->second) {
          maps_.erase(mit);
          break;
        }
      delete it->second;
      it = stale_.erase(it);
    }
  }

 private:
  MapCache() {
    // Sparse: only the entries of slots actually used get memory.
    void* p = util::raw_mmap(nullptr, sizeof(CacheEntry) * shm::kMaxMrs, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    entries_ = static_cast<CacheEntry*>(p);
  }
  void unref(Mapping* m) {
    if (--m->refs == 0) stale_.emplace_back(now_ns(), m);
  }

  std::mutex mu_;
  CacheEntry* entries_;
  std::map<std::pair<uint64_t, uint64_t>, Mapping*> maps_;
  std::vector<std::pair<uint64_t, Mapping*>> stale_;
  std::atomic<uint64_t> refusals_[shm::kMaxProcesses] = {};
};

}  // namespace

const char* path_name(Path p) {
  switch (p) {
    case Path::kLocal: return "local";
    case Path::kMap: return "map";
    case Path::kCma: return "cma";
    case Path::kBounce: return "bounce";
  }
  return "?";
}

Path path_cap() {
  static const Path cap = [] {
    const char* v = std::getenv("SOFTVERBS_HOST_PATH");
    if (v == nullptr || std::strcmp(v, "auto") == 0 || std::strcmp(v, "map") == 0) return Path::kMap;
    if (std::strcmp(v, "cma") == 0) return Path::kCma;
    if (std::strcmp(v, "bounce") == 0) return Path::kBounce;
    SV_LOG(kWarn, "SOFTVERBS_HOST_PATH=%s is not auto|map|cma|bounce; using auto", v);
    return Path::kMap;
  }();
  return cap;
}

bool path_strict() {
  static const bool strict = [] {
    const char* v = std::getenv("SOFTVERBS_HOST_PATH_STRICT");
    if (v == nullptr || std::strcmp(v, "1") != 0) return false;
    const char* path = std::getenv("SOFTVERBS_HOST_PATH");
    if (path == nullptr || std::strcmp(path, "auto") == 0) {
      SV_LOG(kWarn, "SOFTVERBS_HOST_PATH_STRICT=1 needs SOFTVERBS_HOST_PATH=map|cma|bounce; ignored");
      return false;
    }
    return true;
  }();
  return strict;
}

void release_stale_mappings() { MapCache::get().release_stale(); }

PeerMemory::PeerMemory(shm::Segment& seg, shm::OwnerId target)
    : seg_(seg), target_(target), pid_(seg.process(target.slot).pid) {}

char* PeerMemory::mapped(const shm::SharedMr& mr, uint64_t va, uint64_t length) {
  if (path_cap() > Path::kMap || mr.map_fd < 0) return nullptr;
  if (va < mr.map_base || va + length > mr.map_base + mr.map_size) return nullptr;
  const uint32_t slot = static_cast<uint32_t>(&mr - &seg_.mr(0));
  MapCache& cache = MapCache::get();
  if (char* p = cache.lookup(mr, slot, va)) return p;
  return cache.map_slow(mr, slot, va, pid_, target_);
}

Status PeerMemory::cma(const shm::SharedMr&, uint64_t va, uint64_t length, const transport::IoList& local,
                       uint64_t local_offset, bool to_target) {
  transport::IoCursor cur(local, local_offset);
  constexpr int kBatch = 64;
  iovec liov[kBatch];
  while (length > 0) {
    int n = 0;
    uint64_t batch = 0;
    transport::IoCursor probe = cur;
    while (n < kBatch && batch < length) {
      iovec p = probe.next(length - batch);
      if (p.iov_len == 0) break;
      liov[n++] = p;
      batch += p.iov_len;
    }
    if (batch == 0) return Status::error(EFAULT);
    iovec riov{reinterpret_cast<void*>(va), batch};
    ssize_t done = to_target ? process_vm_writev(pid_, liov, static_cast<unsigned long>(n), &riov, 1, 0)
                             : process_vm_readv(pid_, liov, static_cast<unsigned long>(n), &riov, 1, 0);
    if (done <= 0) return Status::error(done == 0 ? EFAULT : errno);
    cur.skip(static_cast<uint64_t>(done));
    va += static_cast<uint64_t>(done);
    length -= static_cast<uint64_t>(done);
  }
  return Status::ok();
}

Status PeerMemory::bounce(const shm::SharedMr& mr, uint64_t va, uint64_t length, const transport::IoList* local,
                          uint64_t local_offset, shm::BounceOp op, uint64_t a, uint64_t b, uint64_t* original) {
  note(Path::kBounce);
  shm::ProcessSlot& proc = seg_.process(target_.slot);
  const uint32_t mr_slot = static_cast<uint32_t>(&mr - &seg_.mr(0));
  transport::IoCursor cur(local != nullptr ? *local : transport::IoList{}, local_offset);
  uint64_t done = 0;
  do {
    const uint64_t chunk = std::min<uint64_t>(length - done, shm::kBounceBytes);
    // Claim a free slot; they are few, so wait politely when all are busy.
    shm::BounceSlot* slot = nullptr;
    for (int spins = 0; slot == nullptr; ++spins) {
      for (auto& s : proc.bounce) {
        uint32_t expected = static_cast<uint32_t>(shm::BounceState::kFree);
        if (s.state.compare_exchange_strong(expected, static_cast<uint32_t>(shm::BounceState::kClaimed))) {
          slot = &s;
          break;
        }
      }
      if (slot == nullptr) {
        if (!shm::process_alive(seg_, target_)) return Status::error(EPIPE);
        usleep(spins < 100 ? 10 : 1000);
      }
    }
    slot->op = static_cast<uint32_t>(op);
    slot->mr_slot = mr_slot;
    slot->rkey = mr.rkey.load(std::memory_order_relaxed);
    slot->addr = va + done;
    slot->length = static_cast<uint32_t>(chunk);
    slot->operand1 = a;
    slot->operand2 = b;
    slot->result = 0;
    char* buf = seg_.ptr<char>(slot->buffer);
    if (op == shm::BounceOp::kWrite) transport::gather_into(buf, cur, chunk);
    slot->state.store(static_cast<uint32_t>(shm::BounceState::kRequested), std::memory_order_release);
    proc.doorbell.fetch_add(1, std::memory_order_seq_cst);
    if (proc.sleeping.load(std::memory_order_seq_cst) != 0) futex_wake(&proc.doorbell, 1);
    while (slot->state.load(std::memory_order_acquire) == static_cast<uint32_t>(shm::BounceState::kRequested)) {
      if (!futex_wait(&slot->state, static_cast<uint32_t>(shm::BounceState::kRequested), 50'000'000ull) &&
          !shm::process_alive(seg_, target_))
        return Status::error(EPIPE);  // the slot dies with its process
    }
    const int rc = slot->result;
    if (rc == 0 && op == shm::BounceOp::kRead) transport::scatter_from(cur, buf, chunk);
    if (original != nullptr) *original = slot->original;
    slot->state.store(static_cast<uint32_t>(shm::BounceState::kFree), std::memory_order_release);
    if (rc != 0) return Status::error(rc);
    done += chunk;
  } while (done < length);
  return Status::ok();
}

// SOFTVERBS_HOST_PATH_STRICT: the capped path could not carry this transfer.
Status PeerMemory::refuse_fallback(const char* why) {
  SV_LOG_RATELIMITED(kWarn, "SOFTVERBS_HOST_PATH_STRICT: %s path unavailable to pid %d (%s); request refused",
                     path_name(path_cap()), pid_, why);
  return Status::error(EPERM);
}

// One path choice for both directions: map, then CMA, then bounce.
Status PeerMemory::transfer(const shm::SharedMr& mr, uint64_t va, uint64_t length, const transport::IoList& local,
                            uint64_t local_offset, bool to_target) {
  if (length == 0) return Status::ok();
  if (char* p = mapped(mr, va, length)) {
    note(Path::kMap);
    if (to_target)
      transport::gather_list(p, local, local_offset, length);
    else
      transport::scatter_list(local, local_offset, p, length);
    return Status::ok();
  }
  if (path_cap() == Path::kMap && path_strict()) return refuse_fallback("the region is not mapped here");
  MapCache& cache = MapCache::get();
  if (path_cap() <= Path::kCma && !(cache.refused(target_) & kCmaRefused)) {
    Status s = cma(mr, va, length, local, local_offset, to_target);
    if (s.is_ok()) {
      note(Path::kCma);
      return s;
    }
    if (s.code() != EPERM && s.code() != EACCES && s.code() != ENOSYS) return s;
    if (path_strict()) return refuse_fallback(std::strerror(s.code()));
    cache.refuse(target_, kCmaRefused);
  }
  return bounce(mr, va, length, &local, local_offset, to_target ? shm::BounceOp::kWrite : shm::BounceOp::kRead, 0, 0,
                nullptr);
}

Status PeerMemory::write(const shm::SharedMr& mr, uint64_t va, const transport::IoList& src, uint64_t src_offset,
                         uint64_t length) {
  return transfer(mr, va, length, src, src_offset, true);
}

Status PeerMemory::read(const shm::SharedMr& mr, uint64_t va, uint64_t length, const transport::IoList& dst,
                        uint64_t dst_offset) {
  return transfer(mr, va, length, dst, dst_offset, false);
}

Status PeerMemory::atomic(const shm::SharedMr& mr, uint64_t va, transport::AtomicOp op, uint64_t compare_add,
                          uint64_t swap, uint64_t* original) {
  // Every path ends in a CPU atomic on the same physical page, so atomics
  // through different paths are atomic with respect to each other.
  if (char* p = mapped(mr, va, 8)) {
    note(Path::kMap);
    *original = transport::LocalMemory::do_atomic(reinterpret_cast<uint64_t*>(p), op, compare_add, swap);
    return Status::ok();
  }
  if (path_cap() == Path::kMap && path_strict()) return refuse_fallback("the region is not mapped here");
  const shm::BounceOp bop = op == transport::AtomicOp::kCmpSwap    ? shm::BounceOp::kCmpSwap
                            : op == transport::AtomicOp::kFetchAdd ? shm::BounceOp::kFetchAdd
                                                                   : shm::BounceOp::kAtomicStore;
  return bounce(mr, va, 8, nullptr, 0, bop, compare_add, swap, original);
}

}  // namespace softverbs::fabric::host
