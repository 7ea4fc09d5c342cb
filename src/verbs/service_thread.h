// The service thread of this process's device: it holds the process's
// liveness mutex (shm/process_registry.h) and sleeps on the process's
// doorbell (a futex in the segment), waking only for work: events peers
// posted for our objects (DeviceNotifier::drain), the fabrics' own service
// (fabric::serve: bounce requests), due retry timers, and a sweep for dead
// processes every couple of seconds.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>

#include "transport/send_side.h"
#include "util/status.h"

namespace softverbs::verbs {

class Device;

class ServiceThread final : public transport::TimerService {
 public:
  // Attaches this process to the device's segment (setting device.self())
  // and starts the thread, which lives as long as the process.
  Status start(Device& device);

  // transport::TimerService: on_timer for the QP at `deadline_ns`.
  void arm(transport::SendSide& side, uint64_t deadline_ns) override;

  // Runs the timers that are due now, in the caller's thread: a thread that
  // polls an empty CQ of a packet fabric (verbs/cq.cc), so that a paced
  // request whose turn has come (transport/link_pacing.h) leaves without
  // waiting for this thread to be scheduled on busy cores. One load and a
  // clock read when none is due.
  bool run_due_timers();

 private:
  void main(Device& device, std::promise<Status>* started);
  // Runs the due timers; the next deadline lowers *next_deadline.
  bool run_timers(Device& device, uint64_t now, uint64_t* next_deadline);

  Device* device_ = nullptr;
  struct Timer {
    uint32_t qp_slot;
    transport::SendSide* side;
  };
  std::mutex timers_mu_;
  std::multimap<uint64_t, Timer> timers_;
  // The first deadline of timers_ (~0: none), read without timers_mu_.
  std::atomic<uint64_t> earliest_{~0ull};
};

}  // namespace softverbs::verbs
