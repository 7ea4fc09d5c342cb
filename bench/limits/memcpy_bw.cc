// memcpy bandwidth of one thread: memcpy_bw <bytes> [seconds]
// Copies a <bytes> buffer into another, over and over, for about [seconds]
// (0.3); prints the bytes copied per second in GB/s (10^9).
#include <cstring>
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: memcpy_bw <bytes> [seconds]\n");
    return 2;
  }
  const size_t bytes = std::strtoull(argv[1], nullptr, 0);
  const double seconds = argc > 2 ? std::atof(argv[2]) : 0.3;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  // Warm up: fault the pages in and fill the caches as they will be.
  for (int i = 0; i < 4; ++i) std::memcpy(dst.data(), src.data(), bytes);
  size_t copies = 0;
  size_t batch = bytes >= (1u << 20) ? 4 : 64;
  const double start = svbench::now_s();
  double elapsed = 0;
  do {
    for (size_t i = 0; i < batch; ++i) {
      std::memcpy(dst.data(), src.data(), bytes);
      asm volatile("" : : "r"(dst.data()) : "memory");
    }
    copies += batch;
    elapsed = svbench::now_s() - start;
  } while (elapsed < seconds);
  svbench::result(double(copies) * double(bytes) / elapsed / 1e9, "GB/s");
  return 0;
}
