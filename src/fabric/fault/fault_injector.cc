// Datapath file: after construction nothing here allocates, locks or makes a
// system call; the slot scans are bounded by `capacity` and run only when a
// held datagram is due.
#include "fabric/fault/fault_injector.h"

#include <algorithm>
#include <cstring>

namespace softverbs::fabric::fault {
namespace {

constexpr size_t kNpos = ~size_t{0};

// SplitMix64 finaliser: spreads a small seed (1, 2, 42) over the whole state.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

FaultInjector::FaultInjector(const FaultConfig& config)
    : config_(config), active_(config.active()), rng_(mix(config.seed)) {
  if (!active_) return;
  slots_.resize(config_.capacity);
  storage_.resize(size_t{config_.capacity} * config_.max_datagram);
  scratch_.resize(config_.max_datagram);
}

uint64_t FaultInjector::next_u64() {
  // SplitMix64: a Weyl sequence through the finaliser; 2^64 period, and its
  // output is a pure function of the seed and the number of draws.
  rng_ += 0x9e3779b97f4a7c15ull;
  return mix(rng_);
}

uint64_t FaultInjector::below(uint64_t n) {
  // Lemire's multiply-shift; the bias (< n / 2^64) is irrelevant for faults.
  return static_cast<uint64_t>((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
}

void FaultInjector::submit_faulty(std::span<const uint8_t> datagram, Clock::time_point now,
                                  Sink& sink, uint64_t tag) {
  bump(counters_.submitted);
  ++submits_;
  if (chance(config_.loss)) {
    bump(counters_.dropped);
  } else {
    std::span<const uint8_t> out = datagram;
    if (chance(config_.corrupt) && !datagram.empty()) {
      if (datagram.size() <= scratch_.size()) {
        std::memcpy(scratch_.data(), datagram.data(), datagram.size());
        const uint64_t bit = below(uint64_t{datagram.size()} * 8);
        scratch_[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        out = {scratch_.data(), datagram.size()};
        bump(counters_.corrupted);
      } else {
        bump(counters_.overflow);
      }
    }
    const bool twice = chance(config_.duplicate);
    place(out, now, sink, tag);
    if (twice) {
      bump(counters_.duplicated);
      place(out, now, sink, tag);
    }
  }
  // Reorder holds count datagrams, not time: those whose window has passed
  // leave right after the datagram that closed it.
  if (next_count_ <= submits_) {
    for (;;) {
      const size_t i = first_slot(
          [this](const Slot& s) { return s.release_after != 0 && s.release_after <= submits_; });
      if (i == kNpos) break;
      release_slot(i, sink);
    }
    refresh_next();
  }
}

void FaultInjector::place(std::span<const uint8_t> datagram, Clock::time_point now, Sink& sink, uint64_t tag) {
  if (chance(config_.reorder)) {
    const uint64_t after = submits_ + 1 + below(config_.reorder_window);
    if (hold(datagram, now + config_.hold, after, tag)) {
      bump(counters_.reordered);
      return;
    }
  } else if (config_.delay.count() > 0 || config_.jitter.count() > 0) {
    int64_t d = config_.delay.count();
    const int64_t j = config_.jitter.count();
    if (j > 0) d += static_cast<int64_t>(below(2 * static_cast<uint64_t>(j) + 1)) - j;
    if (d > 0) {
      if (hold(datagram, now + std::chrono::nanoseconds(d), 0, tag)) {
        bump(counters_.delayed);
        return;
      }
    } else {
      bump(counters_.sent);
      sink.send(datagram, tag);
      return;
    }
  } else {
    bump(counters_.sent);
    sink.send(datagram, tag);
    return;
  }
  // hold() found no room: late is better than lost, and the count says so.
  bump(counters_.overflow);
  bump(counters_.sent);
  sink.send(datagram, tag);
}

bool FaultInjector::hold(std::span<const uint8_t> datagram, Clock::time_point due,
                         uint64_t release_after, uint64_t tag) {
  if (used_ == slots_.size() || datagram.size() > config_.max_datagram) return false;
  // Any free slot will do: the order of release comes from (due, order).
  size_t i = 0;
  while (slots_[i].busy) ++i;
  Slot& s = slots_[i];
  s.busy = true;
  s.due = due;
  s.order = orders_++;
  s.release_after = release_after;
  s.length = static_cast<uint32_t>(datagram.size());
  s.tag = tag;
  if (!datagram.empty())
    std::memcpy(storage_.data() + i * config_.max_datagram, datagram.data(), datagram.size());
  ++used_;
  next_due_ = std::min(next_due_, due);
  if (release_after != 0) next_count_ = std::min(next_count_, release_after);
  return true;
}

template <class Ready>
size_t FaultInjector::first_slot(Ready ready) const {
  size_t best = kNpos;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.busy || !ready(s)) continue;
    if (best == kNpos || s.due < slots_[best].due ||
        (s.due == slots_[best].due && s.order < slots_[best].order))
      best = i;
  }
  return best;
}

void FaultInjector::release_slot(size_t i, Sink& sink) {
  Slot& s = slots_[i];
  s.busy = false;
  --used_;
  bump(counters_.sent);
  sink.send({storage_.data() + i * config_.max_datagram, s.length}, s.tag);
}

void FaultInjector::refresh_next() {
  next_due_ = Clock::time_point::max();
  next_count_ = UINT64_MAX;
  for (const Slot& s : slots_) {
    if (!s.busy) continue;
    next_due_ = std::min(next_due_, s.due);
    if (s.release_after != 0) next_count_ = std::min(next_count_, s.release_after);
  }
}

std::optional<Clock::time_point> FaultInjector::next_deadline() const {
  if (used_ == 0) return std::nullopt;
  return next_due_;
}

void FaultInjector::release_due(Clock::time_point now, Sink& sink) {
  if (used_ == 0 || now < next_due_) return;
  for (;;) {
    const size_t i = first_slot([now](const Slot& s) { return s.due <= now; });
    if (i == kNpos) break;
    release_slot(i, sink);
  }
  refresh_next();
}

void FaultInjector::flush(Sink& sink) {
  while (used_ != 0) release_slot(first_slot([](const Slot&) { return true; }), sink);
  refresh_next();
}

}  // namespace softverbs::fabric::fault
