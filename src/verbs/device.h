// The device as one process sees it: the attached segment, this process's
// slot, the objects it owns, and its service thread.
//
// The service thread sleeps on the process's doorbell (a futex in the
// segment) and wakes only for work: completion events and QP errors that
// peers raised for our objects, bounce requests, due retry timers, and a
// sweep for dead processes every couple of seconds. It also holds the
// process's liveness mutex (shm/process_registry.h).
//
// Lock order: Device::registry_mu_ → SendSide::lock → Device::timers_mu_.
// Code holding a SendSide::lock never takes registry_mu_ (cq_event reads
// the CQ registry without it; QP events are always deferred to the service
// thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "fabric/device_host.h"
#include "shm/segment.h"
#include "transport/notifier.h"
#include "transport/send_side.h"
#include "util/status.h"

namespace softverbs::verbs {

class Cq;
class Qp;
class Srq;

class Device final : public transport::Notifier, public transport::TimerService, public fabric::DeviceHost {
 public:
  // The process's device, attached on first use. Thread-safe.
  static Result<Device*> get();

  shm::Segment& seg() override { return *seg_; }
  shm::OwnerId self() const override { return self_; }
  uint32_t new_pd_id() { return seg_->header().next_pd_id.fetch_add(1, std::memory_order_relaxed); }

  // Registries of this process's objects by slot.
  void add_cq(uint32_t slot, Cq* cq) { cqs_[slot].store(cq, std::memory_order_release); }
  void remove_cq(uint32_t slot);
  void add_qp(uint32_t slot, Qp* qp);
  void remove_qp(uint32_t slot);
  void add_srq(uint32_t slot, Srq* srq);
  void remove_srq(uint32_t slot);
  Qp* find_qp_locked(uint32_t slot);  // REQUIRES: registry_mu_

  // transport::Notifier
  void cq_event(uint32_t cq_slot, shm::OwnerId owner) override;
  void qp_event(uint32_t qp_slot, shm::OwnerId owner, uint64_t bits) override;
  shm::PortCounters& port_counters() override { return seg_->process(self_.slot).port; }
  // transport::TimerService
  void arm(transport::SendSide& side, uint64_t deadline_ns) override;

  // fabric::DeviceHost
  transport::Notifier& notifier() override { return *this; }
  bool with_send_side(uint32_t qp_slot, uint32_t qpn, void (*fn)(transport::SendSide&, void*), void* arg) override;

  void ring(shm::OwnerId who);  // wakes a process's service thread

 private:
  Device() = default;
  Status start();
  void service_main(std::promise<Status>* started);
  bool drain_events();
  bool run_timers(uint64_t now, uint64_t* next_deadline);
  void handle_qp_event(uint32_t slot, uint64_t bits);

  std::unique_ptr<shm::Segment> seg_;
  shm::OwnerId self_;
  std::thread service_;

  std::atomic<Cq*> cqs_[shm::kMaxCqs] = {};
  std::mutex registry_mu_;
  Qp* qps_[shm::kMaxQpSlots] = {};
  Srq* srqs_[shm::kMaxSrqs] = {};

  struct Timer {
    uint32_t qp_slot;
    transport::SendSide* side;
  };
  std::mutex timers_mu_;
  std::multimap<uint64_t, Timer> timers_;
};

}  // namespace softverbs::verbs
