// FaultInjector: loss, duplication, reordering, bit corruption and delay
// between a fabric's "send this datagram" and the wire, for tests and for
// running a real fabric under a lossy network on demand.
//
// A fabric calls submit() where it would send; the injector calls the Sink
// with the datagrams to really send now (none, one, or several). Datagrams it
// holds back come out of release_due(), which the fabric's progress loop calls
// by next_deadline(). There are no threads and no clocks inside: time is what
// the caller passes, so a test drives it with made-up time points.
//
// Thread safety: an injector is used by one thread at a time (the caller
// serialises submit/release_due/flush). counters() may be read from any
// thread at any time; each counter is exact, the set is not a snapshot.
//
// Invariants:
//   1. Deterministic: two injectors with the same FaultConfig, fed the same
//      datagrams with the same time points, make the same Sink calls with the
//      same bytes in the same order.
//   2. Inactive config (FaultConfig::active() false): submit() calls the Sink
//      once with the caller's own bytes, draws nothing, holds nothing, and the
//      injector allocated nothing.
//   3. No allocation after construction: held datagrams live in a pool of
//      `capacity` slots of `max_datagram` bytes. A datagram that finds no
//      free slot, or is larger than a slot, is sent at once unaltered and
//      counted in `overflow` (never silently lost).
//   4. Every submitted datagram is dropped, or sent at least once (twice if
//      duplicated): submitted + duplicated == dropped + sent + held().
//   5. Held datagrams with the same due time leave in the order they were held.
//   6. The bytes passed to the Sink are valid only during the call.
//
// Decisions per submitted datagram, in this order, each with its own draw:
// loss (stop), corruption (the copy that is sent, and its duplicate, carry the
// flipped bit), then for the datagram and again for its duplicate: reorder
// hold, else delay + jitter, else send now. A reordered datagram is not also
// delayed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fabric/fault/fault_config.h"

namespace softverbs::fabric::fault {

using Clock = std::chrono::steady_clock;

// Where datagrams go when they really leave (a socket send, a test vector).
// `tag` is what the caller submitted with the datagram (e.g. where it goes:
// the bytes may be corrupted, the tag never is).
// REQUIRES: send() does not call back into the injector that called it.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void send(std::span<const uint8_t> datagram, uint64_t tag) = 0;
};

// Plain atomics so a status tool can read them while the fabric runs. Only
// the injector's user thread writes them.
struct FaultCounters {
  std::atomic<uint64_t> submitted{0};
  std::atomic<uint64_t> sent{0};        // Sink calls, released datagrams included
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> duplicated{0};  // extra copies made
  std::atomic<uint64_t> reordered{0};   // held for reordering
  std::atomic<uint64_t> corrupted{0};
  std::atomic<uint64_t> delayed{0};     // held for delay (a non-zero one)
  std::atomic<uint64_t> overflow{0};    // sent at once for want of a slot
};

class FaultInjector {
 public:
  explicit FaultInjector(const FaultConfig& config);
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // One datagram the fabric wants sent at `now`. REQUIRES: `now` does not go
  // backwards from call to call.
  void submit(std::span<const uint8_t> datagram, Clock::time_point now, Sink& sink, uint64_t tag = 0) {
    if (!active_) {
      bump(counters_.submitted);
      bump(counters_.sent);
      sink.send(datagram, tag);
      return;
    }
    submit_faulty(datagram, now, sink, tag);
  }

  // When release_due() next has something to send; nullopt if nothing is held.
  [[nodiscard]] std::optional<Clock::time_point> next_deadline() const;

  // Sends every held datagram due at or before `now`, earliest first.
  void release_due(Clock::time_point now, Sink& sink);

  // Sends everything still held, earliest first (shutdown, or a test's end).
  void flush(Sink& sink);

  [[nodiscard]] size_t held() const { return used_; }
  [[nodiscard]] const FaultConfig& config() const { return config_; }
  [[nodiscard]] const FaultCounters& counters() const { return counters_; }

 private:
  struct Slot {
    Clock::time_point due;
    uint64_t order = 0;         // hold order: FIFO among equal due times
    uint64_t release_after = 0; // reorder: leave once `submits_` reaches it (0: timed only)
    uint32_t length = 0;
    uint64_t tag = 0;
    bool busy = false;
  };

  static void bump(std::atomic<uint64_t>& c) {
    // Single writer: a plain load and store, no locked read-modify-write.
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  void submit_faulty(std::span<const uint8_t> datagram, Clock::time_point now, Sink& sink, uint64_t tag);
  void place(std::span<const uint8_t> datagram, Clock::time_point now, Sink& sink, uint64_t tag);
  bool hold(std::span<const uint8_t> datagram, Clock::time_point due, uint64_t release_after, uint64_t tag);
  void release_slot(size_t i, Sink& sink);
  // Index of the held slot that leaves first among those `ready`, or npos.
  template <class Ready>
  size_t first_slot(Ready ready) const;
  void refresh_next();

  uint64_t next_u64();
  bool chance(double p) { return p > 0 && (p >= 1 || unit() < p); }
  double unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  uint64_t below(uint64_t n);  // uniform in [0, n); REQUIRES: n > 0

  const FaultConfig config_;  // constant after construction
  const bool active_;         // constant after construction
  uint64_t rng_;
  uint64_t submits_ = 0;      // submit() calls so far (the reorder clock)
  uint64_t orders_ = 0;
  size_t used_ = 0;
  // Cached minima over held slots, so an idle progress loop costs a compare.
  Clock::time_point next_due_ = Clock::time_point::max();
  uint64_t next_count_ = UINT64_MAX;
  std::vector<Slot> slots_;           // capacity entries when active, else none
  std::vector<uint8_t> storage_;      // capacity * max_datagram bytes
  std::vector<uint8_t> scratch_;      // one datagram: a corrupted copy sent at once
  FaultCounters counters_;
};

}  // namespace softverbs::fabric::fault
