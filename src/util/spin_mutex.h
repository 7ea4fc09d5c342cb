// A process-local mutex for the datapath: a tiny test-and-set lock that
// falls back to yielding. Guards one QP's send queue or one CQ's consumer
// side; never lives in shared memory and is never held across a call-out
// to another process.
#pragma once

#include <sched.h>

#include <atomic>

namespace softverbs {

class SpinMutex {
 public:
  void lock() {
    for (int spins = 0; flag_.exchange(true, std::memory_order_acquire); ++spins) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          sched_yield();
          spins = 0;
        }
      }
    }
  }
  bool try_lock() { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace softverbs
