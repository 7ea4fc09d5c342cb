// Shared bits of the limit programs: a monotonic clock and the result line
// bench/run.py parses ("result <value> <unit>").
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace svbench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline void result(double value, const char* unit) {
  std::printf("result %.6g %s\n", value, unit);
  std::fflush(stdout);
}

[[noreturn]] inline void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

}  // namespace svbench
