#include "verbs/device.h"

#include <unistd.h>

#include "util/log.h"
#include "verbs/port_config.h"
#include "shm/process_registry.h"
#include "verbs/context.h"
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
  const shm::LinkConfig link = shm::claim_link(seg_->header(), port.link);
  if (port.link_set && !(link == port.link))
    SV_LOG(kWarn, "the device's link was set by the process that created it: SOFTVERBS_LINK* ignored");
  shm::sweep(*seg_);
  // Before any context can open: every event from here on is theirs.
  port_events_.start(*seg_);
  return service_.start(*this);
}

void Device::add_context(Context* ctx) {
  std::lock_guard lock(contexts_mu_);
  contexts_.push_back(ctx);
}

void Device::remove_context(Context* ctx) {
  std::lock_guard lock(contexts_mu_);
  std::erase(contexts_, ctx);
}

bool Device::deliver_port_events() {
  return port_events_.read(*seg_, [this](ibv_event_type type, uint8_t ca) {
    std::lock_guard lock(contexts_mu_);
    // Each event is one port's: the contexts of that CA's device hear it.
    for (Context* ctx : contexts_)
      if (ctx->ca() == ca) ctx->raise_async(type, AsyncObject::kPort, reinterpret_cast<void*>(intptr_t{1}));
  });
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

namespace {

// The object `token` names (its slot in the low `slot_bits`), if it is still
// the one the token was made for; then `note` counts the event as fetched.
// REQUIRES: the registry lock (`at` reads the registry).
template <class Obj, class At, class Note>
Obj* claim(uint64_t token, unsigned slot_bits, uint32_t slots, At at, Note note) {
  const uint32_t slot = static_cast<uint32_t>(token & ((uint64_t{1} << slot_bits) - 1));
  Obj* obj = slot < slots ? at(slot) : nullptr;
  if (obj == nullptr || obj->event_token() != token) return nullptr;
  note(*obj);
  return obj;
}

}  // namespace

Cq* Device::claim_cq_event(uint64_t token) {
  std::lock_guard lock(registry_mu_);
  return claim<Cq>(token, Cq::kTokenSlotBits, shm::kMaxCqs, [this](uint32_t s) { return cq_at(s); },
                   [](Cq& cq) { cq.note_event_fetched(); });
}

Cq* Device::claim_cq_async_event(uint64_t token) {
  std::lock_guard lock(registry_mu_);
  return claim<Cq>(token, Cq::kTokenSlotBits, shm::kMaxCqs, [this](uint32_t s) { return cq_at(s); },
                   [](Cq& cq) { cq.note_async_event_fetched(); });
}

Srq* Device::claim_srq_event(uint64_t token) {
  std::lock_guard lock(registry_mu_);
  return claim<Srq>(token, Srq::kTokenSlotBits, shm::kMaxSrqs, [this](uint32_t s) { return srqs_[s]; },
                    [](Srq& srq) { srq.note_event_fetched(); });
}

Qp* Device::claim_qp_event(uint64_t token) {
  std::lock_guard lock(registry_mu_);
  return claim<Qp>(token, shm::kQpSlotBits, shm::kMaxQpSlots, [this](uint32_t s) { return qps_[s]; },
                   [](Qp& qp) { qp.note_event_fetched(); });
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
