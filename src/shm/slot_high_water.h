// How far the walks over a table go (shm::SlotHighWater in the segment
// header): one past the highest slot ever claimed. A slot claimed while a
// walk that does not hold the control lock runs may be missed by it; the
// walks that must see every slot of a process (its death, under the lock)
// do, and the others (reclaiming after the grace period, counters) see it
// on their next pass.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace softverbs::shm {

// Called by whoever claims `slot`, before it is published.
inline void raise_high_water(std::atomic<uint32_t>& mark, uint32_t slot) {
  uint32_t now = mark.load(std::memory_order_relaxed);
  while (now <= slot && !mark.compare_exchange_weak(now, slot + 1, std::memory_order_release,
                                                    std::memory_order_relaxed)) {
  }
}

// The end of a walk over a table of `capacity` slots.
inline uint32_t walk_end(const std::atomic<uint32_t>& mark, uint32_t capacity) {
  return std::min(mark.load(std::memory_order_acquire), capacity);
}

}  // namespace softverbs::shm
