// The process's CM: its ids, its devices (each with a CM agent endpoint and
// the device's port table), and the agent thread that receives MADs and runs
// the CM timers.
//
// Contract:
//   1. One Agent per process, made on first use; `mu` guards every CmId and
//      Device. Lock order: Agent::mu, then an EventChannel's own lock.
//   2. The agent thread sleeps in poll(2) on the endpoints' completion fds
//      and a wake-up eventfd, with the nearest CM deadline as its timeout:
//      it never spins. It starts with the first endpoint.
//   3. Devices are the process's open contexts (rdma_get_devices), opened
//      once and kept; an endpoint and a port-table slot are made for a
//      device the first time an id needs it.
#pragma once

#include <infiniband/verbs.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cm/gsi_endpoint.h"
#include "cm/id.h"
#include "shm/gsi_table.h"

namespace softverbs::cm {

struct Device {
  ibv_context* ctx = nullptr;
  uint64_t node_guid = 0;  // host order
  bool roce = false;
  ibv_gid gid{};           // port 1's GID 0
  ibv_pd* pd = nullptr;    // the PD ids of this device offer (id->pd), as librdmacm's
  std::unique_ptr<GsiEndpoint> ep;
  std::optional<shm::GsiTable> table;
  int slot = -1;
  uint32_t next_comm_seq = 0;  // 0: not yet drawn
};

class Agent {
 public:
  static Agent& get();
  // Whether get() has made it (the library's exit hook must not).
  static bool exists();
  // At exit: a DREQ for every connection still up.
  void goodbye();

  std::mutex mu;
  std::condition_variable acked;  // an id's outstanding events went down

  const std::vector<ibv_context*>& contexts();
  // The device of a context (nullptr if not one of ours).
  Device* device(ibv_context* ctx);
  std::vector<Device*> devices();
  // Makes the device's endpoint, port-table slot and the agent thread as
  // needed; 0 or an errno value. REQUIRES: mu held.
  int activate(Device* d);

  void add(CmId* id) { ids_.insert(id); }
  void remove(CmId* id);
  const std::set<CmId*>& ids() const { return ids_; }
  CmId* by_comm_id(uint32_t comm_id);
  uint32_t new_comm_id(Device* d, CmId* id);

  // Arms the id's timer and wakes the thread to see it. REQUIRES: mu held.
  void arm(CmId* id, uint64_t timeout_ns, int retries);
  void disarm(CmId* id) { id->deadline_ns = 0; }
  // Some connection's peer shares our port: look every kWatchMs whether its
  // process still lives (check_peers). REQUIRES: mu held.
  void watch();
  // Some id's DISCONNECTED is held (held_disconnect.h): look every
  // kHoldCheckMs until none is. REQUIRES: mu held.
  void hold() {
    holding_ = true;
    wake();
  }

 private:
  Agent() = default;
  void run();
  void wake();
  void on_timers(uint64_t now);

  std::vector<ibv_context*> contexts_;
  std::vector<std::unique_ptr<Device>> devices_;
  bool devices_made_ = false;
  std::set<CmId*> ids_;
  std::map<uint32_t, CmId*> by_comm_;
  std::thread thread_;
  int wake_fd_ = -1;
  static constexpr int kWatchMs = 500;
  bool watching_ = false;
  bool holding_ = false;
  bool exiting_ = false;  // the process exits: the thread stops (goodbye)
  uint64_t next_watch_ns_ = 0;
};

}  // namespace softverbs::cm
