#include "util/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

#include "util/time.h"

namespace softverbs {

bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns) {
  timespec ts;
  timespec* tsp = nullptr;
  if (timeout_ns != kForever) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000ull);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000ull);
    tsp = &ts;
  }
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, tsp, nullptr, 0);
  return !(rc == -1 && errno == ETIMEDOUT);
}

void futex_wake(std::atomic<uint32_t>* word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

}  // namespace softverbs
