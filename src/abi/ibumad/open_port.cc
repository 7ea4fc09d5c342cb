#include "abi/ibumad/open_port.h"

#include <sys/socket.h>
#include <unistd.h>

#include <map>

namespace softverbs::umad {
namespace {

struct Slot {
  std::weak_ptr<OpenPort> port;
  uint32_t agent = 0;
  bool used = false;
};

// Guards the port map, the serials and the agent table.
std::mutex mu;
uint64_t next_serial = 1;

std::map<int, std::shared_ptr<OpenPort>>& ports() {
  static auto* m = new std::map<int, std::shared_ptr<OpenPort>>;  // outlives exit-time destructors
  return *m;
}

Slot* slots() {
  static auto* s = new Slot[kSlots];
  return s;
}

}  // namespace

OpenPort::~OpenPort() {
  if (write_fd >= 0) close(write_fd);
}

std::shared_ptr<OpenPort> port_of(int fd) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = ports().find(fd);
  return it == ports().end() ? nullptr : it->second;
}

std::shared_ptr<OpenPort> add_port(int read_fd, int write_fd) {
  auto port = std::make_shared<OpenPort>();
  port->read_fd = read_fd;
  port->write_fd = write_fd;
  std::lock_guard<std::mutex> lock(mu);
  port->serial = next_serial++;
  ports()[read_fd] = port;
  return port;
}

std::shared_ptr<OpenPort> remove_port(int fd) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = ports().find(fd);
  if (it == ports().end()) return nullptr;
  std::shared_ptr<OpenPort> port = std::move(it->second);
  ports().erase(it);
  return port;
}

void deliver(OpenPort& port, const uint8_t* record, size_t bytes) {
  std::lock_guard<std::mutex> lock(port.mu);
  if (port.closed) return;
  (void)!send(port.write_fd, record, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
}

uint32_t claim_slot(const std::shared_ptr<OpenPort>& port, uint32_t agent) {
  std::lock_guard<std::mutex> lock(mu);
  for (uint32_t s = 0; s < kSlots; ++s) {
    if (slots()[s].used) continue;
    slots()[s] = {port, agent, true};
    return s;
  }
  return kSlots;
}

void release_slot(uint32_t slot) {
  if (slot >= kSlots) return;
  std::lock_guard<std::mutex> lock(mu);
  slots()[slot] = {};
}

bool agent_of_tag(uint32_t tag, std::shared_ptr<OpenPort>* port, uint32_t* agent) {
  if (pid_of_tag(tag) != getpid()) return false;
  std::lock_guard<std::mutex> lock(mu);
  const Slot& s = slots()[tag & (kSlots - 1)];
  if (!s.used) return false;
  *port = s.port.lock();
  *agent = s.agent;
  return *port != nullptr;
}

uint32_t tag_of_slot(uint32_t slot) { return static_cast<uint32_t>(getpid()) << kSlotBits | slot; }

}  // namespace softverbs::umad
