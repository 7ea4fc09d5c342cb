#include "verbs/device.h"
#include "fabric/port_config.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>

#include "fabric/fabrics.h"
#include "shm/process_registry.h"
#include "transport/completer.h"
#include "transport/requester.h"
#include "util/futex.h"
#include "util/log.h"
#include "util/time.h"
#include "verbs/cq.h"
#include "verbs/qp.h"

namespace softverbs::verbs {

using fabric::device_segment_path;
using fabric::local_gid_index;
using fabric::port_config;
using fabric::PortConfig;
namespace {

constexpr uint64_t kSweepPeriodNs = 2'000'000'000ull;

std::mutex g_device_mu;
Device* g_device = nullptr;
pid_t g_device_pid = 0;

}  // namespace

Result<Device*> Device::get() {
  std::lock_guard lock(g_device_mu);
  // After fork() the child has the parent's memory but none of its threads:
  // it attaches as a process of its own (the parent's objects are not its).
  if (g_device != nullptr && g_device_pid == getpid()) return g_device;
  auto* d = new (std::nothrow) Device();
  if (d == nullptr) return Status::error(ENOMEM);
  Status s = d->start();
  if (!s.is_ok()) {
    delete d;
    return s;
  }
  g_device = d;
  g_device_pid = getpid();
  return d;
}

Status Device::start() {
  if (!port_config().error.empty()) return Status::error(EINVAL);
  Result<std::unique_ptr<shm::Segment>> seg = shm::Segment::open(device_segment_path());
  if (!seg.is_ok()) return seg.status();
  seg_ = std::move(seg.value());
  shm::sweep(*seg_);
  std::promise<Status> started;
  std::future<Status> ready = started.get_future();
  service_ = std::thread([this, &started] { service_main(&started); });
  Status s = ready.get();
  if (!s.is_ok()) {
    service_.join();
    return s;
  }
  service_.detach();  // lives as long as the process: it holds our liveness mutex
  return Status::ok();
}

void Device::service_main(std::promise<Status>* started) {
  prctl(PR_SET_NAME, "softverbs-svc");
  Result<shm::OwnerId> me = shm::attach_process(*seg_);
  if (!me.is_ok()) {
    started->set_value(me.status());
    return;
  }
  self_ = me.value();
  Status s = fabric::attach(*seg_, self_);
  if (!s.is_ok()) {
    shm::detach_process(*seg_, self_);
    started->set_value(s);
    return;
  }
  started->set_value(Status::ok());

  shm::ProcessSlot& proc = seg_->process(self_.slot);
  uint64_t next_sweep = now_ns() + kSweepPeriodNs;
  for (;;) {
    proc.sleeping.store(1, std::memory_order_seq_cst);
    const uint32_t seen = proc.doorbell.load(std::memory_order_seq_cst);
    bool worked = drain_events();
    worked |= fabric::serve(*seg_, self_);
    uint64_t now = now_ns();
    uint64_t next_deadline = next_sweep;
    worked |= run_timers(now, &next_deadline);
    if (now >= next_sweep) {
      shm::sweep(*seg_);
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

void Device::ring(shm::OwnerId who) {
  shm::ProcessSlot& p = seg_->process(who.slot);
  p.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (p.sleeping.load(std::memory_order_seq_cst) != 0) futex_wake(&p.doorbell, 1);
}

void Device::remove_cq(uint32_t slot) {
  std::lock_guard lock(registry_mu_);
  cqs_[slot].store(nullptr, std::memory_order_release);
}

void Device::add_qp(uint32_t slot, Qp* qp) {
  std::lock_guard lock(registry_mu_);
  qps_[slot] = qp;
}

void Device::remove_qp(uint32_t slot) {
  std::lock_guard lock(registry_mu_);
  qps_[slot] = nullptr;
}

void Device::add_srq(uint32_t slot, Srq* srq) {
  std::lock_guard lock(registry_mu_);
  srqs_[slot] = srq;
}

void Device::remove_srq(uint32_t slot) {
  std::lock_guard lock(registry_mu_);
  srqs_[slot] = nullptr;
}

bool Device::with_send_side(uint32_t qp_slot, uint32_t qpn, void (*fn)(transport::SendSide&, void*), void* arg) {
  std::lock_guard lock(registry_mu_);
  Qp* qp = qp_slot < shm::kMaxQpSlots ? qps_[qp_slot] : nullptr;
  if (qp == nullptr || qp->side().qp.qpn != qpn) return false;
  std::lock_guard side_lock(qp->side().lock);
  fn(qp->side(), arg);
  return true;
}

Qp* Device::find_qp_locked(uint32_t slot) { return slot < shm::kMaxQpSlots ? qps_[slot] : nullptr; }

void Device::cq_event(uint32_t cq_slot, shm::OwnerId owner) {
  if (owner == self_) {
    // Our own CQ: deliver now. Whoever posts to a CQ holds a QP that uses it,
    // so the CQ cannot be destroyed under us.
    if (Cq* cq = cqs_[cq_slot].load(std::memory_order_acquire)) cq->deliver_event();
    return;
  }
  seg_->process(owner.slot).cq_event_bits[cq_slot / 64].fetch_or(1ull << (cq_slot % 64), std::memory_order_release);
  ring(owner);
}

void Device::qp_event(uint32_t qp_slot, shm::OwnerId owner, uint64_t bits) {
  // Always through the owner's service thread, even for our own QPs: the
  // caller may hold another QP's lock, and flushing needs this QP's.
  seg_->qp(qp_slot).pending_async.fetch_or(bits, std::memory_order_release);
  seg_->process(owner.slot).qp_event_bits[qp_slot / 64].fetch_or(1ull << (qp_slot % 64), std::memory_order_release);
  ring(owner);
}

void Device::arm(transport::SendSide& side, uint64_t deadline_ns) {
  bool earliest;
  {
    std::lock_guard lock(timers_mu_);
    earliest = timers_.empty() || deadline_ns < timers_.begin()->first;
    timers_.emplace(deadline_ns, Timer{side.qp.qp_slot, &side});
  }
  if (earliest) ring(self_);
}

bool Device::drain_events() {
  shm::ProcessSlot& proc = seg_->process(self_.slot);
  bool any = false;
  for (uint32_t w = 0; w < shm::kMaxCqs / 64; ++w) {
    if (proc.cq_event_bits[w].load(std::memory_order_relaxed) == 0) continue;
    uint64_t bits = proc.cq_event_bits[w].exchange(0, std::memory_order_acquire);
    std::lock_guard lock(registry_mu_);
    for (; bits != 0; bits &= bits - 1) {
      const uint32_t slot = w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
      if (Cq* cq = cqs_[slot].load(std::memory_order_acquire)) cq->deliver_event();
      any = true;
    }
  }
  for (uint32_t w = 0; w < shm::kMaxQpSlots / 64; ++w) {
    if (proc.qp_event_bits[w].load(std::memory_order_relaxed) == 0) continue;
    uint64_t bits = proc.qp_event_bits[w].exchange(0, std::memory_order_acquire);
    for (; bits != 0; bits &= bits - 1) {
      const uint32_t slot = w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
      // The QP was published (release) before any peer could raise its
      // events; acquire it, so its initialization happens-before (TSan sees
      // only this process's half of that ordering).
      (void)seg_->qp(slot).slot_state.load(std::memory_order_acquire);
      handle_qp_event(slot, seg_->qp(slot).pending_async.exchange(0, std::memory_order_acq_rel));
      any = true;
    }
  }
  return any;
}

void Device::handle_qp_event(uint32_t slot, uint64_t bits) {
  if (bits == 0) return;
  std::lock_guard lock(registry_mu_);
  if (Qp* qp = qps_[slot]) qp->on_remote_event(bits);
}

bool Device::run_timers(uint64_t now, uint64_t* next_deadline) {
  bool any = false;
  for (;;) {
    Timer t;
    {
      std::lock_guard lock(timers_mu_);
      if (timers_.empty()) return any;
      auto it = timers_.begin();
      if (it->first > now) {
        *next_deadline = std::min(*next_deadline, it->first);
        return any;
      }
      t = it->second;
      timers_.erase(it);
    }
    any = true;
    std::lock_guard lock(registry_mu_);
    Qp* qp = qps_[t.qp_slot];
    if (qp != nullptr && &qp->side() == t.side) qp->on_timer();
  }
}

}  // namespace softverbs::verbs
