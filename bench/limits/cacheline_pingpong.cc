// Cross-core cache-line ping-pong: cacheline_pingpong [round trips] [cpu a] [cpu b]
// Two threads, pinned to two CPUs (0 and 1), hand a counter back and forth
// through one 64-byte line; prints the mean round trip in ns.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>

#include "common.h"

namespace {

struct alignas(64) Line {
  std::atomic<long> value{0};
};
Line line;

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
}

}  // namespace

int main(int argc, char** argv) {
  const long trips = argc > 1 ? std::atol(argv[1]) : 1000000;
  const int cpu_a = argc > 2 ? std::atoi(argv[2]) : 0;
  const int cpu_b = argc > 3 ? std::atoi(argv[3]) : 1;
  std::thread pong([&] {
    pin(cpu_b);
    for (long i = 0; i < trips; ++i) {
      while (line.value.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.value.store(2 * i + 2, std::memory_order_release);
    }
  });
  pin(cpu_a);
  // Warm-up trips are part of the count: the first ones carry the thread start.
  const long warm = trips / 10;
  double start = 0;
  for (long i = 0; i < trips; ++i) {
    if (i == warm) start = svbench::now_s();
    line.value.store(2 * i + 1, std::memory_order_release);
    while (line.value.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double elapsed = svbench::now_s() - start;
  pong.join();
  svbench::result(elapsed / double(trips - warm) * 1e9, "ns");
  return 0;
}
