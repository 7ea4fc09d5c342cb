#include "verbs/device.h"

#include <unistd.h>

#include "verbs/port_config.h"
#include "shm/process_registry.h"
#include "verbs/cq.h"
#include "verbs/qp.h"
#include "verbs/srq.h"

namespace softverbs::verbs {
namespace {

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
  const PortConfig& port = port_config();
  if (!port.error.empty()) return Status::error(EINVAL);
  fabric::configure(port);
  Result<std::unique_ptr<shm::Segment>> seg = shm::Segment::open(device_segment_path());
  if (!seg.is_ok()) return seg.status();
  seg_ = std::move(seg.value());
  shm::sweep(*seg_);
  return service_.start(*this);
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

void Device::deliver_cq_events(uint32_t first_slot, uint64_t bits) {
  std::lock_guard lock(registry_mu_);
  for (; bits != 0; bits &= bits - 1)
    if (Cq* cq = cq_at(first_slot + static_cast<uint32_t>(__builtin_ctzll(bits)))) cq->deliver_event();
}

Cq* Device::claim_cq_event(uint64_t token) {
  const uint32_t slot = static_cast<uint32_t>(token & ((1u << Cq::kTokenSlotBits) - 1));
  std::lock_guard lock(registry_mu_);
  Cq* cq = slot < shm::kMaxCqs ? cq_at(slot) : nullptr;
  if (cq == nullptr || cq->event_token() != token) return nullptr;
  cq->note_event_fetched();
  return cq;
}

Cq* Device::claim_cq_async_event(uint64_t token) {
  const uint32_t slot = static_cast<uint32_t>(token & ((1u << Cq::kTokenSlotBits) - 1));
  std::lock_guard lock(registry_mu_);
  Cq* cq = slot < shm::kMaxCqs ? cq_at(slot) : nullptr;
  if (cq == nullptr || cq->event_token() != token) return nullptr;
  cq->note_async_event_fetched();
  return cq;
}

Srq* Device::claim_srq_event(uint64_t token) {
  const uint32_t slot = static_cast<uint32_t>(token & ((1u << Srq::kTokenSlotBits) - 1));
  std::lock_guard lock(registry_mu_);
  Srq* srq = slot < shm::kMaxSrqs ? srqs_[slot] : nullptr;
  if (srq == nullptr || srq->event_token() != token) return nullptr;
  srq->note_event_fetched();
  return srq;
}

Qp* Device::claim_qp_event(uint64_t token) {
  const uint32_t slot = static_cast<uint32_t>(token & (shm::kMaxQpSlots - 1));
  std::lock_guard lock(registry_mu_);
  Qp* qp = qps_[slot];
  if (qp == nullptr || qp->event_token() != token) return nullptr;
  qp->note_event_fetched();
  return qp;
}

void Device::deliver_qp_event(uint32_t slot, uint64_t bits) {
  if (bits == 0) return;
  std::lock_guard lock(registry_mu_);
  if (Qp* qp = qps_[slot]) qp->on_remote_event(bits);
}

void Device::deliver_srq_event(uint32_t slot) {
  std::lock_guard lock(registry_mu_);
  if (Srq* srq = srqs_[slot]) srq->raise_limit_event();
}

void Device::qp_timer(uint32_t slot, const transport::SendSide* side) {
  std::lock_guard lock(registry_mu_);
  Qp* qp = qps_[slot];
  if (qp != nullptr && &qp->side() == side) qp->on_timer();
}

}  // namespace softverbs::verbs
