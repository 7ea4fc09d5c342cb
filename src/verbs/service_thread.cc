#include "verbs/service_thread.h"

#include <sys/prctl.h>

#include <thread>

#include "fabric/fabrics.h"
#include "shm/process_registry.h"
#include "util/futex.h"
#include "util/time.h"
#include "verbs/device.h"

namespace softverbs::verbs {
namespace {

constexpr uint64_t kSweepPeriodNs = 2'000'000'000ull;

}  // namespace

Status ServiceThread::start(Device& device) {
  device_ = &device;
  std::promise<Status> started;
  std::future<Status> ready = started.get_future();
  std::thread thread([this, &device, &started] { main(device, &started); });
  Status s = ready.get();
  if (!s.is_ok()) {
    thread.join();
    return s;
  }
  thread.detach();  // lives as long as the process: it holds our liveness mutex
  return Status::ok();
}

void ServiceThread::main(Device& device, std::promise<Status>* started) {
  prctl(PR_SET_NAME, "softverbs-svc");
  shm::Segment& seg = device.seg();
  Result<shm::OwnerId> me = shm::attach_process(seg);
  if (!me.is_ok()) {
    started->set_value(me.status());
    return;
  }
  device.self_ = me.value();
  Status s = fabric::attach(seg, device.self_);
  if (!s.is_ok()) {
    shm::detach_process(seg, device.self_);
    started->set_value(s);
    return;
  }
  started->set_value(Status::ok());

  shm::ProcessSlot& proc = seg.process(device.self_.slot);
  uint64_t next_sweep = now_ns() + kSweepPeriodNs;
  for (;;) {
    proc.sleeping.store(1, std::memory_order_seq_cst);
    const uint32_t seen = proc.doorbell.load(std::memory_order_seq_cst);
    bool worked = device.notifier().drain();
    worked |= fabric::serve(seg, device.self_);
    uint64_t now = now_ns();
    uint64_t next_deadline = next_sweep;
    worked |= run_timers(device, now, &next_deadline);
    if (now >= next_sweep) {
      shm::sweep(seg);
      fabric::sweep();
      next_sweep = now + kSweepPeriodNs;
      next_deadline = std::min(next_deadline, next_sweep);
    }
    if (!worked) {
      now = now_ns();
      futex_wait(&proc.doorbell, seen, next_deadline > now ? next_deadline - now : 0);
    }
    proc.sleeping.store(0, std::memory_order_relaxed);
  }
}

void ServiceThread::arm(transport::SendSide& side, uint64_t deadline_ns) {
  bool earliest;
  {
    std::lock_guard lock(timers_mu_);
    earliest = timers_.empty() || deadline_ns < timers_.begin()->first;
    timers_.emplace(deadline_ns, Timer{side.qp.qp_slot, &side});
    if (earliest) earliest_.store(deadline_ns, std::memory_order_relaxed);
  }
  if (earliest) device_->notifier().ring(device_->self());
}

bool ServiceThread::run_timers(Device& device, uint64_t now, uint64_t* next_deadline) {
  bool any = false;
  for (;;) {
    Timer t;
    {
      std::lock_guard lock(timers_mu_);
      if (timers_.empty()) {
        earliest_.store(~0ull, std::memory_order_relaxed);
        return any;
      }
      auto it = timers_.begin();
      if (it->first > now) {
        earliest_.store(it->first, std::memory_order_relaxed);
        *next_deadline = std::min(*next_deadline, it->first);
        return any;
      }
      t = it->second;
      timers_.erase(it);
    }
    any = true;
    device.qp_timer(t.qp_slot, t.side);
  }
}

bool ServiceThread::run_due_timers() {
  const uint64_t now = now_ns();
  if (earliest_.load(std::memory_order_relaxed) > now || device_ == nullptr) return false;
  uint64_t next = ~0ull;
  return run_timers(*device_, now, &next);
}

}  // namespace softverbs::verbs
