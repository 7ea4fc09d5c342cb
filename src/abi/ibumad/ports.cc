// Open ports, agents, and MADs to and from them.
//
// An open port is a SOCK_SEQPACKET socket pair: the fd umad_open_port
// returns is one end, so poll/epoll/read on it behave as on the kernel's
// umad device: readable while answers are queued, a blocking read returns
// one whole ib_user_mad. (A pipe would do the same, but a write after the
// program closed its end would raise SIGPIPE; send() can refuse quietly.) umad_send answers a MAD for this port's own
// agents at once, in the caller's thread (mad/agent.h); a MAD that gets no
// answer (another port, a directed route out of the port, a class with no
// agent in the device, a path off the topology's fabric, an SMP that VL15's
// buffer had no room for) comes back after timeout_ms x (retries + 1) with
// status ETIMEDOUT, queued by one timer thread per process.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "abi/ibumad/umad_abi.h"
#include "mad/agent.h"
#include "mad/mad_layout.h"
#include "verbs/device_attrs.h"

namespace softverbs::umad {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kUmadHeader = sizeof(ib_user_mad);
constexpr size_t kRecordBytes = kUmadHeader + mad::kMadBytes;
// Answers a port holds before it drops more, as a full receive queue would
// (the kernel caps it at net.core.wmem_max).
constexpr int kQueueBytes = 1 << 20;
constexpr uint32_t kQp1QKey = 0x80010000;

struct Agent {
  bool used = false;
  uint8_t mgmt_class = 0;  // what unsolicited MADs will be routed by (QP1 demux, later)
};

struct OpenPort {
  int read_fd = -1;
  int write_fd = -1;
  std::mutex mu;
  bool closed = false;
  Agent agents[UMAD_CA_MAX_AGENTS];
  ~OpenPort() {
    if (write_fd >= 0) close(write_fd);
  }
};

std::mutex ports_mu;
std::map<int, std::shared_ptr<OpenPort>>& ports() {
  static auto* m = new std::map<int, std::shared_ptr<OpenPort>>;  // outlives exit-time destructors
  return *m;
}

std::shared_ptr<OpenPort> port_of(int fd) {
  std::lock_guard<std::mutex> lock(ports_mu);
  auto it = ports().find(fd);
  return it == ports().end() ? nullptr : it->second;
}

// One whole record to the port; a full queue drops it (the sender then sees
// its own timeout, as on an overrun receive queue).
void deliver(OpenPort& port, const uint8_t* record) {
  std::lock_guard<std::mutex> lock(port.mu);
  if (port.closed) return;
  (void)!send(port.write_fd, record, kRecordBytes, MSG_DONTWAIT | MSG_NOSIGNAL);
}

// The timer thread: sends that expect an answer that will not come.
struct Timeouts {
  struct Entry {
    Clock::time_point due;
    std::shared_ptr<OpenPort> port;
    std::vector<uint8_t> record;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Entry> pending;
  pid_t thread_pid = 0;  // the process whose thread runs: a forked child starts its own

  void add(Entry e) {
    std::lock_guard<std::mutex> lock(mu);
    pending.push_back(std::move(e));
    if (thread_pid != getpid()) {
      thread_pid = getpid();
      std::thread([this] { run(); }).detach();
    }
    cv.notify_one();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (pending.empty()) {
        cv.wait(lock);
        continue;
      }
      auto first = std::min_element(pending.begin(), pending.end(),
                                    [](const Entry& a, const Entry& b) { return a.due < b.due; });
      if (Clock::now() < first->due) {
        cv.wait_until(lock, first->due);
        continue;
      }
      Entry e = std::move(*first);
      pending.erase(first);
      lock.unlock();
      deliver(*e.port, e.record.data());
      lock.lock();
    }
  }
};

Timeouts& timeouts() {
  static auto* t = new Timeouts;  // its thread runs until exit
  return *t;
}

// Whether a LID-routed MAD's destination is this port.
bool for_this_port(const ib_mad_addr_t& addr) {
  const shm::Segment* seg = segment();
  if (seg == nullptr) return false;
  ibv_port_attr a;
  verbs::fill_port_attr(*seg, &a);
  const uint16_t dlid = be16toh(addr.lid);
  if (dlid == mad::kPermissiveLid) return true;
  // An Ethernet port has no LID: a GMP for LID 0 (what perfquery resolves
  // the local port to) is for its own agents, as a RoCE NIC answers its PMA.
  if (a.link_layer == IBV_LINK_LAYER_ETHERNET) return dlid == 0;
  const uint32_t span = 1u << a.lmc;
  return a.lid != 0 && dlid >= a.lid && dlid < a.lid + span;
}

}  // namespace
}  // namespace softverbs::umad

using namespace softverbs::umad;
namespace mad = softverbs::mad;

SV_UMAD_EXPORT int umad_open_port(const char* ca_name, int portnum) {
  if (resolve_ca(ca_name) == nullptr) return -ENODEV;
  // A topology file that cannot be used is refused here, where a tool
  // starts, not later as MADs that time out (the reason is logged).
  if (mad::topology_failed()) return -EINVAL;
  if (resolve_port(portnum) < 0) return -EINVAL;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return -errno;
  shutdown(fds[0], SHUT_WR);  // the program's end only reads
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &kQueueBytes, sizeof kQueueBytes);  // best effort
  auto port = std::make_shared<OpenPort>();
  port->read_fd = fds[0];
  port->write_fd = fds[1];
  std::lock_guard<std::mutex> lock(ports_mu);
  ports()[fds[0]] = std::move(port);
  return fds[0];
}

SV_UMAD_EXPORT int umad_close_port(int portid) {
  std::shared_ptr<OpenPort> port;
  {
    std::lock_guard<std::mutex> lock(ports_mu);
    auto it = ports().find(portid);
    if (it == ports().end()) return -EINVAL;
    port = std::move(it->second);
    ports().erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(port->mu);
    port->closed = true;
  }
  close(portid);
  return 0;
}

SV_UMAD_EXPORT int umad_get_fd(int portid) { return port_of(portid) ? portid : -EINVAL; }

namespace {

int register_agent(int portid, uint8_t mgmt_class, uint32_t* agent_id) {
  std::shared_ptr<OpenPort> port = port_of(portid);
  if (port == nullptr) return -EINVAL;
  std::lock_guard<std::mutex> lock(port->mu);
  for (uint32_t i = 0; i < UMAD_CA_MAX_AGENTS; ++i) {
    if (port->agents[i].used) continue;
    port->agents[i] = {true, mgmt_class};
    *agent_id = i;
    return 0;
  }
  return -ENOMEM;
}

}  // namespace

SV_UMAD_EXPORT int umad_register(int portid, int mgmt_class, int /*mgmt_version*/, uint8_t /*rmpp_version*/,
                                 long /*method_mask*/[16 / sizeof(long)]) {
  uint32_t id;
  const int rc = register_agent(portid, static_cast<uint8_t>(mgmt_class), &id);
  return rc < 0 ? rc : static_cast<int>(id);
}

SV_UMAD_EXPORT int umad_register_oui(int portid, int mgmt_class, uint8_t /*rmpp_version*/, uint8_t oui[3],
                                     long /*method_mask*/[16 / sizeof(long)]) {
  // IBA 13.4.9: OUI-qualified vendor classes are 0x30..0x4f.
  if (mgmt_class < 0x30 || mgmt_class > 0x4f || oui == nullptr) return -EINVAL;
  uint32_t id;
  const int rc = register_agent(portid, static_cast<uint8_t>(mgmt_class), &id);
  return rc < 0 ? rc : static_cast<int>(id);
}

SV_UMAD_EXPORT int umad_register2(int port_fd, struct umad_reg_attr* attr, uint32_t* agent_id) {
  if (attr == nullptr || agent_id == nullptr) return EINVAL;
  // Only the kernel's RMPP is offered; user RMPP needs what comes with issue 19's SA work.
  if ((attr->flags & ~static_cast<uint32_t>(UMAD_USER_RMPP)) != 0) return EINVAL;
  const int rc = register_agent(port_fd, attr->mgmt_class, agent_id);
  return rc < 0 ? -rc : 0;
}

SV_UMAD_EXPORT int umad_unregister(int portid, int agentid) {
  std::shared_ptr<OpenPort> port = port_of(portid);
  if (port == nullptr || agentid < 0 || agentid >= UMAD_CA_MAX_AGENTS) return -EINVAL;
  std::lock_guard<std::mutex> lock(port->mu);
  if (!port->agents[agentid].used) return -EINVAL;
  port->agents[agentid] = {};
  return 0;
}

SV_UMAD_EXPORT int umad_send(int portid, int agentid, void* umad, int length, int timeout_ms, int retries) {
  std::shared_ptr<OpenPort> port = port_of(portid);
  if (port == nullptr || umad == nullptr || agentid < 0 || agentid >= UMAD_CA_MAX_AGENTS) return -EINVAL;
  {
    std::lock_guard<std::mutex> lock(port->mu);
    if (!port->agents[agentid].used) return -EINVAL;
  }
  // A MAD is at least its common header and at most one MAD (no RMPP yet).
  if (length < 24 || static_cast<size_t>(length) > mad::kMadBytes) return -EINVAL;
  auto* in_umad = static_cast<ib_user_mad*>(umad);
  uint8_t in[mad::kMadBytes] = {};
  std::memcpy(in, in_umad->data, static_cast<size_t>(length));

  const uint8_t klass = mad::MgmtClass::get(in);
  const bool directed = klass == static_cast<uint8_t>(mad::MgmtClassId::kSubnDirectedRoute);
  uint8_t record[kRecordBytes] = {};
  auto* out_umad = reinterpret_cast<ib_user_mad*>(record);
  const softverbs::shm::Segment* seg = segment();
  const bool smp = klass == static_cast<uint8_t>(mad::MgmtClassId::kSubnLidRouted) || directed;
  const uint16_t dlid = be16toh(in_umad->addr.lid);
  // SMPs for other LIDs go into the subnet, if the device has one, and so
  // do GMPs for the subnet's PMAs (mad/agent.h).
  const bool ours = seg != nullptr && (smp || for_this_port(in_umad->addr));
  const bool answered =
      seg != nullptr &&
      (ours ? mad::answer_mad(*seg, in, sizeof in, dlid, out_umad->data)
            : mad::answer_remote_gmp(*seg, in, sizeof in, dlid, out_umad->data)) == mad::Disposition::kRespond;
  if (answered) {
    out_umad->agent_id = static_cast<uint32_t>(agentid);
    out_umad->length = mad::kMadBytes;
    out_umad->addr.qpn = htobe32(smp ? 0 : 1);
    out_umad->addr.qkey = smp ? 0 : htobe32(kQp1QKey);
    ibv_port_attr a;
    softverbs::verbs::fill_port_attr(*seg, &a);
    out_umad->addr.lid = htobe16(directed ? mad::kPermissiveLid : for_this_port(in_umad->addr) ? a.lid : dlid);
    out_umad->addr.sl = in_umad->addr.sl;
    out_umad->addr.pkey_index = in_umad->addr.pkey_index;
    deliver(*port, record);
    return 0;
  }
  // No answer will come. A request that waits for one learns so after its
  // timeouts, with the MAD it sent (as the kernel returns it).
  if (timeout_ms <= 0) return 0;
  std::memcpy(record, in_umad, kUmadHeader);
  std::memcpy(out_umad->data, in, sizeof in);
  out_umad->agent_id = static_cast<uint32_t>(agentid);
  out_umad->status = ETIMEDOUT;
  out_umad->length = mad::kMadBytes;
  const auto wait = std::chrono::milliseconds(static_cast<int64_t>(timeout_ms) * (std::max(retries, 0) + 1));
  timeouts().add({Clock::now() + wait, port, std::vector<uint8_t>(record, record + kRecordBytes)});
  return 0;
}

SV_UMAD_EXPORT int umad_poll(int portid, int timeout_ms) {
  pollfd p{portid, POLLIN, 0};
  const int n = poll(&p, 1, timeout_ms);
  if (n < 0) return -errno;
  if (n == 0) return -ETIMEDOUT;
  return (p.revents & POLLIN) != 0 ? 0 : -EIO;
}

SV_UMAD_EXPORT int umad_recv(int portid, void* umad, int* length, int timeout_ms) {
  if (umad == nullptr || length == nullptr || *length < 0) return -EINVAL;
  if (port_of(portid) == nullptr) return -EINVAL;
  const int rc = umad_poll(portid, timeout_ms);
  if (rc < 0) return rc;
  // Every record carries one whole MAD; a buffer too small for it leaves it
  // queued and says how much is needed.
  if (static_cast<size_t>(*length) < mad::kMadBytes) {
    *length = static_cast<int>(mad::kMadBytes);
    return -ENOSPC;
  }
  const ssize_t n = read(portid, umad, kRecordBytes);
  if (n < 0) return -errno;
  if (static_cast<size_t>(n) != kRecordBytes) return -EIO;
  auto* got = static_cast<ib_user_mad*>(umad);
  *length = static_cast<int>(got->length);
  return static_cast<int>(got->agent_id);
}
