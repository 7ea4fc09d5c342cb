// ACKs held back on ping-ponging QPs (issue 22). An RC responder may
// coalesce acknowledgements (IBA 9.7.5.1.1: an ACK acknowledges every request
// up to its PSN), so the ACK of a request to a QP whose own requester has
// just sent waits, for a bounded time, for that QP's next request and leaves
// in the same sendmmsg, ahead of it. Its peer then gets one datagram per
// direction, ACK and reply together, which the thread that polls its CQ for
// the ACK takes at once: no receive thread is woken for it.
//
// Process-local, small: a handful of QPs ping-pong at a time; when the table
// is full an ACK leaves at once, as before.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>

#include "shm/limits.h"
#include "wire/roce_udp.h"

namespace softverbs::fabric::udp {

class AckHold {
 public:
  static constexpr size_t kEntries = 8;
  static constexpr size_t kMaxAck = 32;  // BTH + AETH + ICRC, with room
  // How long an ACK may wait for its QP's next request; then the receive
  // thread sends it.
  static constexpr uint64_t kBoundNs = 200'000;
  // A QP whose requester sent this recently (in coarse milliseconds) ping-pongs.
  static constexpr uint32_t kRecentMs = 10;

  struct Held {
    uint32_t slot = 0;
    size_t endpoint = 0;
    wire::Gid to{};
    uint64_t since_ns = 0;
    size_t len = 0;
    uint8_t packet[kMaxAck];
  };

  AckHold();
  // The requester of `slot` sent a request now (any thread).
  // (The time is stored plus one: 0 is never.)
  void note_transmit(uint32_t slot) { last_tx_ms_[slot].store(coarse_ms() + 1, std::memory_order_relaxed); }
  bool recently_sent(uint32_t slot) const {
    const uint32_t t = last_tx_ms_[slot].load(std::memory_order_relaxed);
    return t != 0 && coarse_ms() + 1 - t < kRecentMs;
  }
  // Keeps `ack` (a whole ACKNOWLEDGE packet of `slot`, not yet sealed) in
  // place of any earlier one of the slot; false if there is no room or it
  // does not fit (the caller sends it now).
  bool hold(uint32_t slot, size_t endpoint, const wire::Gid& to, std::span<const uint8_t> ack, uint64_t now_ns);
  // Moves slot's held ACK into `out`; false if none.
  bool take(uint32_t slot, Held* out);
  // Moves every ACK held since `due_ns` or earlier into `out`; how many.
  size_t take_due(uint64_t due_ns, Held (&out)[kEntries]);
  // The oldest held ACK's time, or 0 if none.
  uint64_t oldest() const;
  bool any() const { return held_.load(std::memory_order_seq_cst) != 0; }

  static uint64_t now_ns();

 private:
  static uint32_t coarse_ms();

  mutable std::mutex mu_;
  Held entries_[kEntries];
  bool used_[kEntries] = {};
  std::atomic<uint32_t> held_{0};
  std::unique_ptr<std::atomic<uint32_t>[]> last_tx_ms_;
};

}  // namespace softverbs::fabric::udp
