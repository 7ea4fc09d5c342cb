#include "fabric/udp/ack_hold.h"

#include <time.h>

namespace softverbs::fabric::udp {

AckHold::AckHold() : last_tx_ms_(new std::atomic<uint32_t>[shm::kMaxQpSlots]()) {}

uint64_t AckHold::now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(t.tv_nsec);
}

uint32_t AckHold::coarse_ms() {
  // The coarse clock is a load from the vDSO page: cheap enough for every post.
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return static_cast<uint32_t>(static_cast<uint64_t>(t.tv_sec) * 1000u + static_cast<uint64_t>(t.tv_nsec) / 1'000'000u);
}

bool AckHold::hold(uint32_t slot, size_t endpoint, const wire::Gid& to, std::span<const uint8_t> ack, uint64_t now_ns) {
  if (ack.size() > kMaxAck) return false;
  std::lock_guard lock(mu_);
  size_t free = kEntries;
  for (size_t i = 0; i < kEntries; ++i) {
    if (used_[i] && entries_[i].slot == slot) {
      free = i;  // the newer ACK covers the older one's PSNs too
      break;
    }
    if (!used_[i] && free == kEntries) free = i;
  }
  if (free == kEntries) return false;
  Held& h = entries_[free];
  const bool replaced = used_[free];
  h.slot = slot;
  h.endpoint = endpoint;
  h.to = to;
  if (!replaced) h.since_ns = now_ns;  // the bound counts from the first ACK it stands for
  h.len = ack.size();
  std::memcpy(h.packet, ack.data(), ack.size());
  used_[free] = true;
  if (!replaced) held_.fetch_add(1, std::memory_order_seq_cst);
  return true;
}

bool AckHold::take(uint32_t slot, Held* out) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < kEntries; ++i) {
    if (used_[i] && entries_[i].slot == slot) {
      *out = entries_[i];
      used_[i] = false;
      held_.fetch_sub(1, std::memory_order_seq_cst);
      return true;
    }
  }
  return false;
}

size_t AckHold::take_due(uint64_t due_ns, Held (&out)[kEntries]) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (size_t i = 0; i < kEntries; ++i) {
    if (used_[i] && entries_[i].since_ns <= due_ns) {
      out[n++] = entries_[i];
      used_[i] = false;
      held_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
  return n;
}

uint64_t AckHold::oldest() const {
  std::lock_guard lock(mu_);
  uint64_t t = 0;
  for (size_t i = 0; i < kEntries; ++i)
    if (used_[i] && (t == 0 || entries_[i].since_ns < t)) t = entries_[i].since_ns;
  return t;
}

}  // namespace softverbs::fabric::udp
