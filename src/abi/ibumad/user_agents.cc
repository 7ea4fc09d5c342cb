#include "abi/ibumad/user_agents.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abi/ibumad/process_files.h"
#include "abi/ibumad/umad_abi.h"
#include "util/log.h"
#include "util/raw_socket.h"

namespace softverbs::umad {
namespace {

constexpr size_t kUmadHeader = sizeof(ib_user_mad);

// What precedes a record on an inbox socket.
struct Envelope {
  uint32_t kind;  // kRequest or kResponse
  int32_t port_fd;
  uint64_t port_serial;
  uint32_t agent;  // a request's receiving agent; a response's hi TID
  uint32_t length;  // RmppSend::length
  uint8_t active;
  uint8_t reserved[7];
};
constexpr uint32_t kRequest = 1;
constexpr uint32_t kResponse = 2;
// A full inbox (the datagram queue is short) is waited for this long.
constexpr int kSendWaitMs = 200;

struct Published {
  AgentAddress at;
  mad::AgentRegistration reg;
};

struct Process {
  std::mutex mu;
  pid_t pid = 0;        // the process the state belongs to (a forked child starts over)
  int inbox = -1;
  int file = -1;        // this process's registry file, flock(LOCK_SH) held
  std::vector<Published> published;
};

Process& self() {
  static auto* p = new Process;  // its thread and file live until exit
  return *p;
}

std::string registry_dir() {
  const shm::Segment* seg = segment();
  return seg == nullptr ? std::string() : seg->path() + ".agents";
}

socklen_t inbox_address(pid_t pid, sockaddr_un* sa) {
  const shm::Segment* seg = segment();
  const std::string name = "softverbs-umad-" + std::to_string(std::hash<std::string>{}(seg ? seg->path() : "")) +
                           "-" + std::to_string(pid);
  std::memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof sa->sun_path - 1);
  std::memcpy(sa->sun_path + 1, name.data(), n);  // sun_path[0] == 0: the abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

std::string encode(const std::vector<Published>& list) {
  std::string s;
  char line[160];
  for (const Published& p : list) {
    std::snprintf(line, sizeof line, "%d %" PRIu64 " %u %u %u %u %u %" PRIx64 " %" PRIx64 "\n", p.at.port_fd,
                  p.at.port_serial, p.at.agent, p.reg.mgmt_class, p.reg.class_version, p.reg.rmpp_version,
                  p.reg.oui, p.reg.method_mask[0], p.reg.method_mask[1]);
    s += line;
  }
  return s;
}

std::vector<Published> decode(pid_t pid, const std::string& text) {
  std::vector<Published> list;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    Published p;
    unsigned agent, klass, version, rmpp, oui;
    if (std::sscanf(line.c_str(), "%d %" SCNu64 " %u %u %u %u %u %" SCNx64 " %" SCNx64, &p.at.port_fd,
                    &p.at.port_serial, &agent, &klass, &version, &rmpp, &oui, &p.reg.method_mask[0],
                    &p.reg.method_mask[1]) != 9)
      continue;
    p.at.pid = pid;
    p.at.agent = agent;
    p.reg.mgmt_class = static_cast<uint8_t>(klass);
    p.reg.class_version = static_cast<uint8_t>(version);
    p.reg.rmpp_version = static_cast<uint8_t>(rmpp);
    p.reg.oui = oui;
    list.push_back(p);
  }
  return list;
}

// Every live process's published agents; removes the files of dead ones.
// REQUIRES: the directory's lock (either mode).
std::vector<Published> scan(const std::string& dir) {
  std::vector<Published> all;
  for (const auto& [pid, text] : read_live_files(dir))
    for (const Published& p : decode(pid, text)) all.push_back(p);
  return all;
}

// REQUIRES: self().mu and the directory's exclusive lock.
void rewrite_own_file(Process& me, const std::string& dir) { write_own_file(dir, me.pid, &me.file, encode(me.published)); }

// At exit the file goes with the process (a crash leaves it to the next scan).
void remove_own_file() {
  Process& me = self();
  std::lock_guard<std::mutex> lock(me.mu);
  if (me.pid != getpid() || me.file < 0) return;
  unlink((registry_dir() + "/" + std::to_string(me.pid)).c_str());
}

void serve_inbox(int fd) {
  std::vector<uint8_t> buf(sizeof(Envelope) + kUmadHeader + kMaxMessageBytes);
  for (;;) {
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    Envelope e;
    if (static_cast<size_t>(n) < sizeof e + kUmadHeader + mad::kMadBytes) continue;
    std::memcpy(&e, buf.data(), sizeof e);
    if (e.length > kMaxMessageBytes || static_cast<size_t>(n) != sizeof e + kUmadHeader + std::max<size_t>(e.length, mad::kMadBytes))
      continue;
    mad::RmppSend send;
    send.active = e.active != 0;
    send.length = e.length;
    uint8_t* record = buf.data() + sizeof e;
    if (e.kind == kRequest) deliver_request(e.port_fd, e.port_serial, e.agent, record, send);
    else if (e.kind == kResponse) deliver_response(e.agent, record, send);
  }
}

bool post(pid_t to, const Envelope& e, const uint8_t* record) {
  if (!ensure_inbox()) return false;
  sockaddr_un sa;
  const socklen_t len = inbox_address(to, &sa);
  iovec iov[2] = {{const_cast<Envelope*>(&e), sizeof e},
                  {const_cast<uint8_t*>(record), kUmadHeader + std::max<size_t>(e.length, mad::kMadBytes)}};
  msghdr m{};
  m.msg_name = &sa;
  m.msg_namelen = len;
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  // Blocking, bounded by SO_SNDTIMEO: an inbox's queue is short but drained
  // at once; a process that is gone refuses at once (ECONNREFUSED).
  return sendmsg(self().inbox, &m, MSG_NOSIGNAL) >= 0;
}

// A forked child owns none of the parent's agents, and must not keep the
// parent's inbox bound or its registry file locked after the parent dies.
void before_fork() { self().mu.lock(); }
void after_fork_in_parent() { self().mu.unlock(); }
void after_fork_in_child() {
  Process& me = self();
  if (me.inbox >= 0) close(me.inbox);
  if (me.file >= 0) close(me.file);
  me.inbox = me.file = -1;
  me.published.clear();
  me.pid = 0;
  me.mu.unlock();
}

}  // namespace

bool ensure_inbox() {
  Process& me = self();
  std::lock_guard<std::mutex> lock(me.mu);
  if (me.pid == getpid() && me.inbox >= 0) return true;
  me.pid = getpid();
  if (segment() == nullptr) return false;
  const int fd = raw_socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un sa;
  const socklen_t len = inbox_address(me.pid, &sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    SV_LOG(kWarn, "umad: cannot bind the MAD inbox: %s", std::strerror(errno));
    close(fd);
    return false;
  }
  int buf = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  timeval wait{0, kSendWaitMs * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
  me.inbox = fd;
  static bool hooks_set = false;
  if (!hooks_set) {
    hooks_set = true;
    std::atexit(remove_own_file);
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  }
  std::thread([fd] { serve_inbox(fd); }).detach();  // lives as long as the process
  return true;
}

int publish_agent(const AgentAddress& at, const mad::AgentRegistration& reg) {
  if (!reg.any_method()) return 0;
  if (!ensure_inbox()) return EIO;
  const std::string dir = registry_dir();
  Process& me = self();
  DirLock dir_lock(dir, LOCK_EX);
  std::lock_guard<std::mutex> lock(me.mu);
  for (const Published& p : scan(dir))
    if (mad::conflicts(p.reg, reg)) return EINVAL;
  Published p{at, reg};
  p.at.pid = me.pid;
  me.published.push_back(p);
  rewrite_own_file(me, dir);
  return 0;
}

void withdraw_agents(int port_fd, uint64_t port_serial, int agent) {
  Process& me = self();
  {
    std::lock_guard<std::mutex> lock(me.mu);
    if (me.pid != getpid() || me.published.empty()) return;
  }
  const std::string dir = registry_dir();
  DirLock dir_lock(dir, LOCK_EX);
  std::lock_guard<std::mutex> lock(me.mu);
  std::erase_if(me.published, [&](const Published& p) {
    return p.at.port_fd == port_fd && p.at.port_serial == port_serial &&
           (agent < 0 || p.at.agent == static_cast<uint32_t>(agent));
  });
  rewrite_own_file(me, dir);
}

bool find_agent(const uint8_t* mad, AgentAddress* at, mad::AgentRegistration* reg) {
  const std::string dir = registry_dir();
  if (dir.empty()) return false;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return false;  // nobody ever published one
  DirLock dir_lock(dir, LOCK_SH);
  for (const Published& p : scan(dir)) {
    if (!mad::wants(p.reg, mad)) continue;
    *at = p.at;
    *reg = p.reg;
    return true;
  }
  return false;
}

bool post_request(const AgentAddress& to, const uint8_t* record, const mad::RmppSend& send) {
  Envelope e{};
  e.kind = kRequest;
  e.port_fd = to.port_fd;
  e.port_serial = to.port_serial;
  e.agent = to.agent;
  e.length = static_cast<uint32_t>(send.length);
  e.active = send.active ? 1 : 0;
  return post(to.pid, e, record);
}

bool post_response(pid_t to, uint32_t hi_tid, const uint8_t* record, const mad::RmppSend& send) {
  Envelope e{};
  e.kind = kResponse;
  e.agent = hi_tid;
  e.length = static_cast<uint32_t>(send.length);
  e.active = send.active ? 1 : 0;
  return post(to, e, record);
}

}  // namespace softverbs::umad
