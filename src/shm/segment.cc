#include "shm/segment.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "shm/port_pkeys.h"
#include "shm/port_qos.h"
#include "util/log.h"

namespace softverbs::shm {

void init_shared_mutex(pthread_mutex_t* m) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
}

std::string Segment::default_path() {
  if (const char* p = std::getenv("SOFTVERBS_DEVICE_PATH"); p != nullptr && *p != '\0') return p;
  return "/dev/shm/softverbs-" + std::to_string(geteuid()) + "-v" + std::to_string(kLayoutVersion);
}

bool Segment::external_sm_configured() {
  // An Ethernet (RoCE) port has no SM: it is ACTIVE from the start, and the
  // data path, which obeys the port's state, must find it so.
  if (const char* roce = std::getenv("SOFTVERBS_ROCE_ADDR"); roce != nullptr && *roce != '\0') return false;
  const char* sm = std::getenv("SOFTVERBS_SM");
  if (sm != nullptr && std::strcmp(sm, "none") == 0) return true;
  if (sm != nullptr && std::strcmp(sm, "builtin") == 0) return false;
  const char* topology = std::getenv("SOFTVERBS_TOPOLOGY");
  return topology != nullptr && *topology != '\0';
}

Result<std::unique_ptr<Segment>> Segment::open(const std::string& path, bool create) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
  if (fd < 0 && !create && errno == ENOENT) return Status::error(ENOENT);
  if (fd < 0) {
    SV_LOG(kError, "cannot open device segment %s: %s", path.c_str(), std::strerror(errno));
    return Status::error(errno);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    SV_LOG(kError, "device segment %s must belong to uid %u with mode 0600", path.c_str(),
           static_cast<unsigned>(geteuid()));
    ::close(fd);
    return Status::error(EACCES);
  }
  // flock serialises creation; the kernel drops it if the creator dies.
  while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  std::unique_ptr<Segment> seg(new (std::nothrow) Segment());
  if (!seg) {
    ::close(fd);
    return Status::error(ENOMEM);
  }
  seg->path_ = path;
  seg->fd_ = fd;
  Status s = seg->map(fd, fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) < Layout::kTotal);
  flock(fd, LOCK_UN);
  if (!s.is_ok()) return s;
  return seg;
}

Status Segment::map(int fd, bool create) {
  if (create) {
    if (ftruncate(fd, 0) != 0 || ftruncate(fd, static_cast<off_t>(Layout::kTotal)) != 0) {
      SV_LOG(kError, "cannot size device segment %s: %s", path_.c_str(), std::strerror(errno));
      return Status::error(errno);
    }
    // Reserve the tables now so that touching them can never raise SIGBUS.
    if (int rc = posix_fallocate(fd, 0, static_cast<off_t>(Layout::kArena)); rc != 0) {
      SV_LOG(kError, "cannot reserve %llu bytes for %s (is /dev/shm too small?): %s",
             static_cast<unsigned long long>(Layout::kArena), path_.c_str(), std::strerror(rc));
      ftruncate(fd, 0);
      return Status::error(rc == ENOSPC ? ENOMEM : rc);
    }
  }
  void* p = mmap(nullptr, Layout::kTotal, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::error(errno);
  base_ = static_cast<char*>(p);
  SegmentHeader& h = header();
  if (create || h.magic.load(std::memory_order_acquire) != kMagic) {
    // Fresh file (or one whose creator died half way): lay it out. A file
    // just truncated and extended reads as zeros already; writing them again
    // would fault in every page of the tables at once (tens of megabytes,
    // four times that in a TSan build's shadow).
    if (!create) std::memset(base_, 0, Layout::kArena);
    new (&h) SegmentHeader();
    h.layout_version = kLayoutVersion;
    h.segment_bytes = Layout::kTotal;
    uint64_t guid = 0;
    if (getrandom(&guid, sizeof guid, 0) != sizeof guid) guid = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull;
    // A locally administered EUI-64: bit 1 of the first byte set, multicast bit clear.
    guid = (guid & ~0xff00000000000000ull) | 0x0200000000000000ull;
    h.node_guid = __builtin_bswap64(guid);
    h.port_guid = __builtin_bswap64(guid + 1);
    h.external_sm = external_sm_configured() ? 1 : 0;
    // The built-in subnet manager's only end port is LID 1 and ACTIVE; an
    // external SM finds the port INIT with LID 0 (IBA 14.2.5.6) and sets it.
    h.lid = h.external_sm ? 0 : 1;
    h.sm_lid = h.external_sm ? 0 : 1;
    h.port_state = h.external_sm ? 2 : 4;
    store_qos(h, default_qos());
    store_pkeys(h, default_pkeys());
    init_shared_mutex(&h.control);
    h.next_pd_id.store(1);
    h.next_reg_seq.store(1);
    for (uint32_t i = 0; i < kMaxProcesses; ++i) init_shared_mutex(&process(i).liveness);
    h.magic.store(kMagic, std::memory_order_release);
  } else if (h.layout_version != kLayoutVersion || h.segment_bytes != Layout::kTotal) {
    SV_LOG(kError, "device segment %s has another layout; remove it", path_.c_str());
    return Status::error(EPROTO);
  }
  return Status::ok();
}

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, Layout::kTotal);
  if (fd_ >= 0) ::close(fd_);
}

void Segment::lock_control() const {
  int rc = pthread_mutex_lock(&header().control);
  if (rc == EOWNERDEAD) pthread_mutex_consistent(&header().control);
}

void Segment::unlock_control() const { pthread_mutex_unlock(&header().control); }

Result<Offset> Segment::arena_alloc(uint64_t bytes) {
  const uint64_t pages = (bytes + kPageSize - 1) / kPageSize;
  if (pages == 0 || pages > Layout::kArenaPages) return Status::error(EINVAL);
  auto* bits = at<uint64_t>(Layout::kArenaBitmap);
  auto test = [&](uint64_t p) { return (bits[p / 64] >> (p % 64)) & 1; };
  ControlLock lock(*this);
  const uint64_t start = header().arena_hint.load(std::memory_order_relaxed) % Layout::kArenaPages;
  uint64_t run = 0;
  for (uint64_t n = 0; n < Layout::kArenaPages + pages; ++n) {
    uint64_t p = (start + n) % Layout::kArenaPages;
    if (p == 0) run = 0;  // a run never wraps around the end
    if (p % 64 == 0 && run == 0 && bits[p / 64] == ~0ull) {
      n += 63;
      continue;
    }
    if (test(p)) {
      run = 0;
      continue;
    }
    if (++run < pages) continue;
    const uint64_t first = p + 1 - pages;
    const Offset off = Layout::kArena + first * kPageSize;
    if (int rc = posix_fallocate(fd_, static_cast<off_t>(off), static_cast<off_t>(pages * kPageSize)); rc != 0) {
      SV_LOG(kWarn, "cannot reserve %llu bytes of ring memory: %s", static_cast<unsigned long long>(bytes),
             std::strerror(rc));
      return Status::error(ENOMEM);
    }
    for (uint64_t q = first; q <= p; ++q) bits[q / 64] |= 1ull << (q % 64);
    header().arena_hint.store(static_cast<uint32_t>(p + 1), std::memory_order_relaxed);
    std::memset(base_ + off, 0, pages * kPageSize);
    return off;
  }
  return Status::error(ENOMEM);
}

void Segment::arena_free(Offset off, uint64_t bytes) {
  if (off < Layout::kArena || bytes == 0) return;
  const uint64_t pages = (bytes + kPageSize - 1) / kPageSize;
  const uint64_t first = (off - Layout::kArena) / kPageSize;
  auto* bits = at<uint64_t>(Layout::kArenaBitmap);
  // Give the memory back to the kernel; the range reads as zeros afterwards.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
            static_cast<off_t>(pages * kPageSize));
  ControlLock lock(*this);
  for (uint64_t q = first; q < first + pages && q < Layout::kArenaPages; ++q) bits[q / 64] &= ~(1ull << (q % 64));
}

}  // namespace softverbs::shm
