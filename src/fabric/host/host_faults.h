// SOFTVERBS_FAULTS on the host fabric, where it applies: a request has no
// wire to be reordered or delayed on, but it can be lost on the way (never
// executed), lose its response (executed, the requester hears nothing and
// retries: a duplicate), arrive twice, or arrive corrupted (the receiver's
// ICRC check fails and it is dropped, as a bad symbol on a link ends).
// Loss draws both ways with the configured rate; `dup` duplicates;
// `corrupt` corrupts requests. Seeded, under one mutex (only
// when faults are on; otherwise draw() is a load and a branch).
#pragma once

#include <cstdint>
#include <mutex>

#include "fabric/fault/fault_config.h"

namespace softverbs::fabric::host {

struct HostFaultDraw {
  bool lose_request = false;
  bool lose_response = false;
  bool duplicate = false;
  bool corrupt_request = false;
};

class HostFaults {
 public:
  explicit HostFaults(const fault::FaultConfig& c) : config_(c), active_(c.loss > 0 || c.duplicate > 0 || c.corrupt > 0), rng_(c.seed) {}

  bool active() const { return active_; }

  HostFaultDraw draw() {
    if (!active_) return {};
    std::lock_guard lock(mu_);
    HostFaultDraw d;
    d.lose_request = chance(config_.loss);
    d.lose_response = !d.lose_request && chance(config_.loss);
    d.duplicate = !d.lose_request && chance(config_.duplicate);
    d.corrupt_request = !d.lose_request && !d.duplicate && chance(config_.corrupt);
    return d;
  }

 private:
  bool chance(double p) {
    if (p <= 0) return false;
    rng_ += 0x9e3779b97f4a7c15ull;  // splitmix64
    uint64_t x = rng_;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return static_cast<double>(x >> 11) * 0x1.0p-53 < p;
  }

  const fault::FaultConfig config_;
  const bool active_;
  std::mutex mu_;
  uint64_t rng_;
};

}  // namespace softverbs::fabric::host
