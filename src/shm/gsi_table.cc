#include "shm/gsi_table.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace softverbs::shm {

namespace {

constexpr uint64_t kMagic = 0x736f66746d63'0001;  // "softcm", layout 1
constexpr uint16_t kEphemeralFirst = 32768;
constexpr uint16_t kEphemeralLast = 60999;  // Linux's ip_local_port_range

// A zombie has exited: its peers must not wait for its parent to reap it.
bool zombie(int32_t pid) {
  char path[32], buf[256];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');  // the command name may hold anything
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

bool alive(int32_t pid) {
  if (pid <= 0) return false;
  if (pid == getpid()) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  return !zombie(pid);
}

}  // namespace

bool TableAddr::wildcard() const {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

struct GsiTable::Layout {
  uint64_t magic;
  uint32_t next_ephemeral;
  uint32_t pad;
  struct Slot {
    int32_t pid;
    uint32_t agent_qpn;
  } slots[kSlots];
  struct Binding {
    int32_t pid;  // 0: free
    int16_t slot;
    uint16_t ps;
    uint16_t port;
    uint8_t listening;
    uint8_t reuse;
    TableAddr addr;
    uint8_t pad[3];
  } bindings[kBindings];
};

class GsiTable::Lock {
 public:
  explicit Lock(int fd) : fd_(fd) { while (flock(fd_, LOCK_EX) < 0 && errno == EINTR) {} }
  ~Lock() { flock(fd_, LOCK_UN); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  int fd_;
};

std::optional<GsiTable> GsiTable::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return std::nullopt;
  {
    Lock lock(fd);
    struct stat st{};
    if (fstat(fd, &st) < 0 || (static_cast<size_t>(st.st_size) < sizeof(Layout) &&
                               ftruncate(fd, sizeof(Layout)) < 0)) {
      const int e = errno;
      close(fd);
      errno = e;
      return std::nullopt;
    }
  }
  void* p = mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    close(fd);
    errno = e;
    return std::nullopt;
  }
  auto* layout = static_cast<Layout*>(p);
  {
    Lock lock(fd);
    if (layout->magic != kMagic) {
      std::memset(static_cast<void*>(layout), 0, sizeof(Layout));
      layout->magic = kMagic;
      layout->next_ephemeral = kEphemeralFirst + static_cast<uint32_t>(getpid()) % 1000;
    }
  }
  return GsiTable(fd, layout);
}

GsiTable::GsiTable(GsiTable&& o) noexcept : fd_(o.fd_), layout_(o.layout_) {
  o.fd_ = -1;
  o.layout_ = nullptr;
}

GsiTable::~GsiTable() {
  if (layout_ != nullptr) munmap(layout_, sizeof(Layout));
  if (fd_ >= 0) close(fd_);
}

int GsiTable::claim_slot(uint32_t agent_qpn) {
  Lock lock(fd_);
  for (int i = 0; i < kSlots; ++i) {
    auto& s = layout_->slots[i];
    if (!alive(s.pid)) {
      s.pid = getpid();
      s.agent_qpn = agent_qpn;
      return i;
    }
  }
  errno = ENOSPC;
  return -1;
}

void GsiTable::release_slot(int slot) {
  Lock lock(fd_);
  auto& s = layout_->slots[slot];
  if (s.pid == getpid()) s = {};
  for (auto& b : layout_->bindings) {
    if (b.pid == getpid() && b.slot == slot) b = {};
  }
}

uint32_t GsiTable::agent_of_slot(int slot) {
  if (slot < 0 || slot >= kSlots) return 0;
  Lock lock(fd_);
  const auto& s = layout_->slots[slot];
  return alive(s.pid) ? s.agent_qpn : 0;
}

uint32_t GsiTable::any_agent() {
  Lock lock(fd_);
  for (const auto& s : layout_->slots) {
    if (alive(s.pid)) return s.agent_qpn;
  }
  return 0;
}

int GsiTable::bind(int slot, uint16_t ps, const TableAddr& addr, uint16_t* port, bool reuse) {
  Lock lock(fd_);
  auto conflicts = [&](uint16_t p) {
    for (auto& b : layout_->bindings) {
      // Liveness costs system calls: only for a binding that would conflict.
      if (b.pid == 0 || b.ps != ps || b.port != p || b.addr.family != addr.family) continue;
      if (!alive(b.pid)) {
        b = {};
        continue;
      }
      if (reuse && b.reuse && !b.listening) continue;
      if (b.addr.wildcard() || addr.wildcard() || b.addr == addr) return true;
    }
    return false;
  };
  uint16_t chosen = *port;
  if (chosen == 0) {
    const uint32_t range = kEphemeralLast - kEphemeralFirst + 1;
    bool found = false;
    for (uint32_t n = 0; n < range && !found; ++n) {
      const uint32_t candidate = kEphemeralFirst + (layout_->next_ephemeral - kEphemeralFirst + n) % range;
      if (!conflicts(static_cast<uint16_t>(candidate))) {
        chosen = static_cast<uint16_t>(candidate);
        layout_->next_ephemeral = candidate + 1;
        found = true;
      }
    }
    if (!found) {
      errno = EADDRINUSE;
      return -1;
    }
  } else if (conflicts(chosen)) {
    errno = EADDRINUSE;
    return -1;
  }
  for (int i = 0; i < kBindings; ++i) {
    auto& b = layout_->bindings[i];
    if (b.pid != 0 && (b.pid == getpid() || alive(b.pid))) continue;
    b = {};
    b.pid = getpid();
    b.slot = static_cast<int16_t>(slot);
    b.ps = ps;
    b.port = chosen;
    b.reuse = reuse;
    b.addr = addr;
    *port = chosen;
    return i;
  }
  errno = ENOSPC;
  return -1;
}

void GsiTable::set_listening(int binding, bool listening) {
  Lock lock(fd_);
  layout_->bindings[binding].listening = listening;
}

void GsiTable::unbind(int binding) {
  Lock lock(fd_);
  auto& b = layout_->bindings[binding];
  if (b.pid == getpid()) b = {};
}

int GsiTable::listener_slot(uint16_t ps, uint16_t port, const TableAddr& addr) {
  Lock lock(fd_);
  int wildcard = -1;
  for (const auto& b : layout_->bindings) {
    if (b.pid == 0 || !b.listening || b.ps != ps || b.port != port || !alive(b.pid)) continue;
    if (b.addr == addr) return b.slot;
    // An IB address (AF_IB) listens for every request to its service ID,
    // as the kernel's cma matches it: a REQ from an AF_IB id has no CMA
    // header to name an address.
    if (b.addr.wildcard() || b.addr.family == kFamilyIb) wildcard = b.slot;
  }
  return wildcard;
}

}  // namespace softverbs::shm
