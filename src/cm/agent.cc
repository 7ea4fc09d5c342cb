#include "cm/agent.h"

#include <endian.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "cm/held_disconnect.h"
#include "cm/protocol.h"
#include "util/log.h"

namespace softverbs::cm {

namespace {

// The device's segment is named by its sysfs tree (`<segment>.sysfs/class/
// infiniband/<dev>`); the port table sits beside the segment.
std::string table_path(ibv_context* ctx) {
  const std::string ibdev = ctx->device->ibdev_path;
  const std::string tail = std::string(".sysfs/class/infiniband/") + ctx->device->name;
  if (ibdev.size() > tail.size() && ibdev.compare(ibdev.size() - tail.size(), tail.size(), tail) == 0) {
    return ibdev.substr(0, ibdev.size() - tail.size()) + ".cm";
  }
  return "/dev/shm/softverbs-cm-" + std::to_string(getuid()) + "-" + ctx->device->name;
}

}  // namespace

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

namespace {
std::atomic<Agent*> the_agent{nullptr};
}

Agent& Agent::get() {
  static Agent* agent = [] {
    auto* a = new Agent();  // never destroyed: its thread may outlive main
    the_agent.store(a, std::memory_order_release);
    return a;
  }();
  return *agent;
}

bool Agent::exists() { return the_agent.load(std::memory_order_acquire) != nullptr; }

const std::vector<ibv_context*>& Agent::contexts() {
  std::lock_guard<std::mutex> lock(mu);
  if (!devices_made_) {
    devices_made_ = true;
    int n = 0;
    if (ibv_device** list = ibv_get_device_list(&n)) {
      for (int i = 0; i < n; ++i) {
        ibv_context* ctx = ibv_open_device(list[i]);
        if (ctx == nullptr) continue;
        contexts_.push_back(ctx);
        auto d = std::make_unique<Device>();
        d->ctx = ctx;
        d->node_guid = be64toh(ibv_get_device_guid(list[i]));
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, 1, &pa) == 0) d->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        ibv_query_gid(ctx, 1, 0, &d->gid);
        d->pd = ibv_alloc_pd(ctx);
        devices_.push_back(std::move(d));
      }
      ibv_free_device_list(list);
    }
  }
  return contexts_;
}

Device* Agent::device(ibv_context* ctx) {
  for (auto& d : devices_) {
    if (d->ctx == ctx) return d.get();
  }
  return nullptr;
}

std::vector<Device*> Agent::devices() {
  std::vector<Device*> out;
  for (auto& d : devices_) out.push_back(d.get());
  return out;
}

int Agent::activate(Device* d) {
  if (d->ep) return 0;
  auto ep = GsiEndpoint::create(d->ctx, 1);
  if (!ep) return errno != 0 ? errno : EIO;
  auto table = shm::GsiTable::open(table_path(d->ctx));
  if (!table) return errno != 0 ? errno : EIO;
  const int slot = table->claim_slot(ep->qpn());
  if (slot < 0) return errno;
  d->ep = std::move(ep);
  d->table.emplace(std::move(*table));
  d->slot = slot;
  if (wake_fd_ < 0) {
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return errno;
    thread_ = std::thread([this] { run(); });
    thread_.detach();
  } else {
    wake();  // poll the new endpoint too
  }
  return 0;
}

void Agent::remove(CmId* id) {
  ids_.erase(id);
  if (id->local_comm_id != 0) {
    auto it = by_comm_.find(id->local_comm_id);
    if (it != by_comm_.end() && it->second == id) by_comm_.erase(it);
  }
}

CmId* Agent::by_comm_id(uint32_t comm_id) {
  auto it = by_comm_.find(comm_id);
  return it == by_comm_.end() ? nullptr : it->second;
}

// The slot in the top byte routes every answer to this process's agent
// (shm/gsi_table.h); the low 24 bits tell this process's ids apart, from a
// random start: a slot is reused by the next process, whose first comm IDs
// must not be taken for its predecessor's by peers that still remember them.
uint32_t Agent::new_comm_id(Device* d, CmId* id) {
  if (d->next_comm_seq == 0) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r) r = static_cast<uint32_t>(now_ns());
    d->next_comm_seq = r | 1;
  }
  uint32_t comm;
  do {
    const uint32_t seq = d->next_comm_seq++ & 0xffffff;
    comm = uint32_t(d->slot) << 24 | seq;
  } while ((comm & 0xffffff) == 0 || by_comm_.count(comm) != 0);
  by_comm_[comm] = id;
  return comm;
}

// The kernel's CM disconnects a process's connections when it exits; at a
// normal exit ours sends their DREQs (answers are not awaited), so a peer on
// another host is told at once instead of through its QP's retries.
void Agent::goodbye() {
  std::lock_guard<std::mutex> lock(mu);
  // From here the agent thread touches no verbs: libibverbs.so.1 is torn
  // down after us, and answers to these DREQs may still arrive.
  exiting_ = true;
  for (CmId* id : ids_) {
    if (id->pub.qp_type == IBV_QPT_UD || id->dev == nullptr || !id->dev->ep) continue;
    if (id->state != IdState::kEstablished && id->state != IdState::kRepSent && id->state != IdState::kRepReceived) {
      continue;
    }
    say_goodbye(id);
  }
}

namespace {
[[gnu::destructor]] void at_exit() {
  if (Agent::exists()) Agent::get().goodbye();
}
}  // namespace

void Agent::watch() {
  if (watching_) return;
  watching_ = true;
  wake();
}

void Agent::arm(CmId* id, uint64_t timeout_ns, int retries) {
  id->timeout_ns = timeout_ns;
  id->retries_left = retries;
  id->deadline_ns = now_ns() + timeout_ns;
  wake();
}

void Agent::wake() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);
}

void Agent::on_timers(uint64_t now) {
  std::vector<CmId*> due;
  for (CmId* id : ids_) {
    if (id->deadline_ns != 0 && id->deadline_ns <= now) due.push_back(id);
  }
  for (CmId* id : due) {
    id->deadline_ns = 0;
    on_timeout(id);
  }
}

void Agent::run() {
  std::vector<pollfd> fds;
  std::vector<Device*> polled;
  for (;;) {
    int timeout_ms = -1;
    {
      std::lock_guard<std::mutex> lock(mu);
      fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
      polled.assign(1, nullptr);
      for (auto& d : devices_) {
        if (!d->ep) continue;
        fds.push_back(pollfd{d->ep->event_fd(), POLLIN, 0});
        polled.push_back(d.get());
      }
      const uint64_t now = now_ns();
      uint64_t next = 0;
      for (CmId* id : ids_) {
        if (id->deadline_ns != 0 && (next == 0 || id->deadline_ns < next)) next = id->deadline_ns;
      }
      if (next != 0) {
        const uint64_t ms = next <= now ? 0 : (next - now + 999999) / 1000000;
        timeout_ms = ms > INT_MAX ? INT_MAX : int(ms);
      }
      if (watching_ && (timeout_ms < 0 || timeout_ms > kWatchMs)) timeout_ms = kWatchMs;
      if (holding_ && (timeout_ms < 0 || timeout_ms > kHoldCheckMs)) timeout_ms = kHoldCheckMs;
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      SV_LOG(kError, "CM agent: poll failed: %s", std::strerror(errno));
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (exiting_) return;
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      (void)!read(wake_fd_, &v, sizeof v);
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      Device* d = polled[i];
      d->ep->drain([d](const uint8_t* mad, const MadSource& from) { on_mad(d, mad, from); });
    }
    const uint64_t now = now_ns();
    if (holding_) holding_ = release_held_disconnects(now);
    on_timers(now);
    if (now >= next_watch_ns_) {
      watching_ = check_peers();
      next_watch_ns_ = now + uint64_t(kWatchMs) * 1000000;
    }
  }
}

}  // namespace softverbs::cm
