#include "abi/ibumad/sa_joins.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "abi/ibumad/process_files.h"
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
  for (const auto& [pid, text] : read_live_files(dir, self)) {
    char mgid[40], port_gid[40];
    unsigned state;
    int used = 0;
    for (const char* at = text.c_str(); std::sscanf(at, "%32s %32s %x%n", mgid, port_gid, &state, &used) == 3; at += used) {
      Membership o;
      if (unhex(mgid, o.mgid) && unhex(port_gid, o.port_gid) && o.same_group(m)) bits |= static_cast<uint8_t>(state);
    }
  }
  return bits;
}

// REQUIRES: me.mu and the directory's lock.
void rewrite(Own& me, const std::string& dir) {
  std::string text;
  for (const Membership& m : me.held) {
    char line[96], mgid[33], port_gid[33];
    hex(m.mgid, mgid);
    hex(m.port_gid, port_gid);
    std::snprintf(line, sizeof line, "%s %s %x\n", mgid, port_gid, m.join_state);
    text += line;
  }
  write_own_file(dir, me.pid, &me.file, text);
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
