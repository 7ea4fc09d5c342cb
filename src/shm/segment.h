// The device segment: one shared-memory file per user holding the device's
// tables and ring memory (see objects.h for what lives there).
//
// Thread-safety: a Segment is immutable after open(); the objects it points
// at follow the invariants of docs/DESIGN.md. Allocation of slots and arena
// pages takes SegmentHeader::control, a robust process-shared mutex, so a
// process dying while holding it does not wedge the device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "shm/objects.h"
#include "util/status.h"

namespace softverbs::shm {

inline constexpr uint64_t kMagic = 0x5356'4445'5649'4345ull;  // "SVDEVICE"
inline constexpr uint32_t kLayoutVersion = 21;

constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct Layout {
  static constexpr uint64_t kHeader = 0;
  static constexpr uint64_t kProcesses = align_up(sizeof(SegmentHeader), kPageSize);
  static constexpr uint64_t kQps = align_up(kProcesses + kMaxProcesses * sizeof(ProcessSlot), kPageSize);
  static constexpr uint64_t kCqs = align_up(kQps + kMaxQpSlots * sizeof(SharedQp), kPageSize);
  static constexpr uint64_t kSrqs = align_up(kCqs + kMaxCqs * sizeof(SharedCq), kPageSize);
  static constexpr uint64_t kMrs = align_up(kSrqs + kMaxSrqs * sizeof(SharedSrq), kPageSize);
  static constexpr uint64_t kMcastGroups = align_up(kMrs + kMaxMrs * sizeof(SharedMr), kPageSize);
  static constexpr uint64_t kXrcds = align_up(kMcastGroups + kMaxMcastGroups * sizeof(SharedMcastGroup), kPageSize);
  static constexpr uint64_t kArenaBitmap = align_up(kXrcds + kMaxXrcds * sizeof(SharedXrcd), kPageSize);
  static constexpr uint64_t kArenaPages = kArenaBytes / kPageSize;
  static constexpr uint64_t kArena = align_up(kArenaBitmap + kArenaPages / 8, 1 << 21);
  static constexpr uint64_t kTotal = kArena + kArenaBytes;
};

class Segment {
 public:
  // Opens (creating on first use, unless `create` is false: ENOENT) the
  // segment at `path`. The file must be owned by this user with mode 0600.
  static Result<std::unique_ptr<Segment>> open(const std::string& path, bool create = true);
  // SOFTVERBS_DEVICE_PATH, or /dev/shm/softverbs-<uid>-v<layout>.
  static std::string default_path();
  // Whether a segment created now leaves the port to an external SM:
  // SOFTVERBS_SM=none, or a topology (SOFTVERBS_TOPOLOGY) without
  // SOFTVERBS_SM=builtin.
  static bool external_sm_configured();

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  ProcessSlot& process(uint32_t slot) const { return at<ProcessSlot>(Layout::kProcesses)[slot]; }
  SharedQp& qp(uint32_t slot) const { return at<SharedQp>(Layout::kQps)[slot]; }
  SharedCq& cq(uint32_t slot) const { return at<SharedCq>(Layout::kCqs)[slot]; }
  SharedSrq& srq(uint32_t slot) const { return at<SharedSrq>(Layout::kSrqs)[slot]; }
  SharedMr& mr(uint32_t slot) const { return at<SharedMr>(Layout::kMrs)[slot]; }
  SharedMcastGroup& mcast_group(uint32_t i) const { return at<SharedMcastGroup>(Layout::kMcastGroups)[i]; }
  SharedXrcd& xrcd(uint32_t slot) const { return at<SharedXrcd>(Layout::kXrcds)[slot]; }
  template <class T>
  T* ptr(Offset off) const { return reinterpret_cast<T*>(base_ + off); }
  const std::string& path() const { return path_; }

  // Arena: page-granular ring memory, reserved with fallocate so that a full
  // /dev/shm fails the allocation (ENOMEM) instead of faulting later.
  Result<Offset> arena_alloc(uint64_t bytes);
  void arena_free(Offset off, uint64_t bytes);

  // The control-path lock (robust). Lock returns once held, repairing it if
  // its previous holder died. Const: the lock lives in the shared memory,
  // not in this handle (a const Segment's SMA takes it for a Set).
  void lock_control() const;
  void unlock_control() const;

 private:
  Segment() = default;
  Status map(int fd, bool create);
  template <class T>
  T* at(uint64_t off) const { return reinterpret_cast<T*>(base_ + off); }

  std::string path_;
  int fd_ = -1;
  char* base_ = nullptr;
};

class ControlLock {
 public:
  explicit ControlLock(const Segment& s) : s_(s) { s_.lock_control(); }
  ~ControlLock() { s_.unlock_control(); }
  ControlLock(const ControlLock&) = delete;
  ControlLock& operator=(const ControlLock&) = delete;

 private:
  const Segment& s_;
};

// Initialises a robust, process-shared mutex in shared memory.
void init_shared_mutex(pthread_mutex_t* m);

}  // namespace softverbs::shm
