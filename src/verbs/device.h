// The device as one process sees it: the attached segment, this process's
// slot and the objects it owns, by slot. Its two helpers live beside it: the
// notifier (verbs/device_notifier.h: completion and QP events to their
// owners, here or in another process) and the service thread
// (verbs/service_thread.h: the doorbell loop, timers, the dead-process sweep).
//
// Lock order: Device::registry_mu_ → SendSide::lock → ServiceThread's timer
// lock. Code holding a SendSide::lock never takes registry_mu_ (cq_event reads
// the CQ registry without it; QP events are always deferred to the service
// thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "fabric/device_host.h"
#include "shm/port_events.h"
#include "shm/segment.h"
#include "util/status.h"
#include "verbs/device_notifier.h"
#include "verbs/service_thread.h"

namespace softverbs::verbs {

class Context;
class Cq;
class Qp;
class Srq;

class Device final : public fabric::DeviceHost {
 public:
  // The process's device, attached on first use. Thread-safe.
  static Result<Device*> get();

  shm::Segment& seg() override { return *seg_; }
  shm::OwnerId self() const override { return self_; }
  DeviceNotifier& notifier() override { return notifier_; }
  ServiceThread& service() { return service_; }
  shm::PortCounters& port_counters() { return notifier_.port_counters(); }
  uint32_t new_pd_id() { return seg_->header().next_pd_id.fetch_add(1, std::memory_order_relaxed); }

  // Registries of this process's objects by slot.
  void add_cq(uint32_t slot, Cq* cq) { cqs_[slot].store(cq, std::memory_order_release); }
  void remove_cq(uint32_t slot);
  // Without the registry lock: whoever posts to a CQ holds a QP that uses it.
  Cq* cq_at(uint32_t slot) { return cqs_[slot].load(std::memory_order_acquire); }
  void add_qp(uint32_t slot, Qp* qp);
  void remove_qp(uint32_t slot);
  void add_srq(uint32_t slot, Srq* srq);
  void remove_srq(uint32_t slot);

  // ibv_get_cq_event read `token` from a channel: the CQ it names, with
  // the event counted as fetched; nullptr when that CQ is gone.
  Cq* claim_cq_event(uint64_t token);
  // Likewise for a QP's asynchronous event (ibv_get_async_event).
  Qp* claim_qp_event(uint64_t token);
  // ... for a CQ's (IBV_EVENT_CQ_ERR) and an SRQ's asynchronous events.
  Cq* claim_cq_async_event(uint64_t token);
  Srq* claim_srq_event(uint64_t token);

  // The contexts open in this process, which hear of the port's events.
  void add_context(Context* ctx);
  void remove_context(Context* ctx);
  // Service thread: raises the port's new events (shm/port_events.h) on
  // every open context. Whether there were any.
  bool deliver_port_events();

  // Service thread: events and timers for our own objects.
  void deliver_cq_events(uint32_t first_slot, uint64_t bits);
  void deliver_qp_event(uint32_t slot, uint64_t bits);
  void deliver_srq_event(uint32_t slot);
  void qp_timer(uint32_t slot, const transport::SendSide* side);

  // fabric::DeviceHost
  bool with_send_side(uint32_t qp_slot, uint32_t qpn, void (*fn)(transport::SendSide&, void*), void* arg) override;

 private:
  friend class ServiceThread;  // sets self_ once attached
  Device() : notifier_(*this) {}
  Status start();

  std::unique_ptr<shm::Segment> seg_;
  shm::OwnerId self_;
  DeviceNotifier notifier_;
  ServiceThread service_;

  std::atomic<Cq*> cqs_[shm::kMaxCqs] = {};
  std::mutex registry_mu_;
  Qp* qps_[shm::kMaxQpSlots] = {};
  Srq* srqs_[shm::kMaxSrqs] = {};

  shm::PortEventReader port_events_;  // the service thread's
  std::mutex contexts_mu_;            // a leaf: held only to add, remove, raise
  std::vector<Context*> contexts_;
};

}  // namespace softverbs::verbs
