#include "abi/ibumad/sa_joins.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "abi/ibumad/umad_abi.h"
#include "mad/sa_mcmember.h"
#include "shm/segment.h"
#include "util/log.h"

namespace softverbs::umad {
namespace {

struct Membership {
  uint8_t mgid[16];
  uint8_t port_gid[16];
  uint8_t join_state;

  bool same_group(const Membership& o) const {
    return std::memcmp(mgid, o.mgid, 16) == 0 && std::memcmp(port_gid, o.port_gid, 16) == 0;
  }
};

Membership from_mad(const uint8_t* mad) {
  Membership m;
  std::memcpy(m.mgid, mad + mad::kMcmMgidOffset, 16);
  std::memcpy(m.port_gid, mad + mad::kMcmPortGidOffset, 16);
  m.join_state = static_cast<uint8_t>(mad::McmJoinState::get(mad));
  return m;
}

struct Own {
  std::mutex mu;
  pid_t pid = 0;  // a forked child starts with none of its parent's memberships
  int file = -1;  // flock(LOCK_SH) held while the process lives
  std::vector<Membership> held;
};

Own& own() {
  static auto* o = new Own;  // its file stays locked until exit
  return *o;
}

std::string registry_dir() {
  const shm::Segment* seg = segment();
  return seg == nullptr ? std::string() : seg->path() + ".sa-joins";
}

class DirLock {
 public:
  explicit DirLock(const std::string& dir) {
    mkdir(dir.c_str(), 0700);
    fd_ = open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~DirLock() {
    if (fd_ >= 0) close(fd_);
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

void hex(const uint8_t* b, char* out) {
  for (int i = 0; i < 16; ++i) std::snprintf(out + 2 * i, 3, "%02x", b[i]);
}

bool unhex(const char* s, uint8_t* b) {
  for (int i = 0; i < 16; ++i) {
    unsigned v;
    if (std::sscanf(s + 2 * i, "%2x", &v) != 1) return false;
    b[i] = static_cast<uint8_t>(v);
  }
  return true;
}

// The JoinState bits other live processes hold in `m`'s group; removes the
// files of dead ones. REQUIRES: the directory's lock.
uint8_t others_bits(const std::string& dir, pid_t self, const Membership& m) {
  uint8_t bits = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == self) continue;
    const std::string path = dir + "/" + e->d_name;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {  // its owner is gone
      unlink(path.c_str());
      close(fd);
      continue;
    }
    FILE* f = fdopen(fd, "r");
    if (f == nullptr) {
      close(fd);
      continue;
    }
    char mgid[40], port_gid[40];
    unsigned state;
    while (std::fscanf(f, "%32s %32s %x", mgid, port_gid, &state) == 3) {
      Membership o;
      if (unhex(mgid, o.mgid) && unhex(port_gid, o.port_gid) && o.same_group(m)) bits |= static_cast<uint8_t>(state);
    }
    std::fclose(f);
  }
  closedir(d);
  return bits;
}

// REQUIRES: me.mu and the directory's lock.
void rewrite(Own& me, const std::string& dir) {
  const std::string path = dir + "/" + std::to_string(me.pid);
  if (me.held.empty()) {
    if (me.file >= 0) {
      unlink(path.c_str());
      close(me.file);
      me.file = -1;
    }
    return;
  }
  if (me.file < 0) {
    me.file = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (me.file < 0) return;
    flock(me.file, LOCK_SH);
  }
  std::string text;
  for (const Membership& m : me.held) {
    char line[96], mgid[33], port_gid[33];
    hex(m.mgid, mgid);
    hex(m.port_gid, port_gid);
    std::snprintf(line, sizeof line, "%s %s %x\n", mgid, port_gid, m.join_state);
    text += line;
  }
  if (ftruncate(me.file, 0) != 0 || pwrite(me.file, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    SV_LOG(kWarn, "umad: cannot write %s: %s", path.c_str(), std::strerror(errno));
}

// REQUIRES: me.mu.
void adopt_pid(Own& me) {
  if (me.pid == getpid()) return;
  if (me.file >= 0) close(me.file);  // the parent's; its lock stays the parent's
  me.file = -1;
  me.held.clear();
  me.pid = getpid();
}

}  // namespace

void note_sa_join(const uint8_t* mad) {
  const std::string dir = registry_dir();
  if (dir.empty()) return;
  const Membership m = from_mad(mad);
  DirLock lock(dir);
  Own& me = own();
  std::lock_guard<std::mutex> guard(me.mu);
  adopt_pid(me);
  for (Membership& h : me.held) {
    if (!h.same_group(m)) continue;
    h.join_state |= m.join_state;
    rewrite(me, dir);
    return;
  }
  me.held.push_back(m);
  rewrite(me, dir);
}

uint8_t sa_leave_bits(const uint8_t* mad) {
  const Membership m = from_mad(mad);
  const std::string dir = registry_dir();
  if (dir.empty()) return m.join_state;
  DirLock lock(dir);
  Own& me = own();
  std::lock_guard<std::mutex> guard(me.mu);
  adopt_pid(me);
  for (Membership& h : me.held)
    if (h.same_group(m)) h.join_state = static_cast<uint8_t>(h.join_state & ~m.join_state);
  std::erase_if(me.held, [](const Membership& h) { return h.join_state == 0; });
  rewrite(me, dir);
  return static_cast<uint8_t>(m.join_state & ~others_bits(dir, me.pid, m));
}

}  // namespace softverbs::umad
