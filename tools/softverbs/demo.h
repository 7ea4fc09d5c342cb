// `softverbs demo`: the two-process walk through every RC verb, then latency
// and bandwidth, on the default device.
//
// The verbs code is not in the CLI: it is the separate program softverbs-demo
// (demo_main.cc), which links libibverbs. This launcher sets the environment
// exactly as `softverbs run` does and execs `<dir of softverbs>/softverbs-demo`,
// so the CLI itself never loads libibverbs and `run` keeps working when the
// library is broken.
#pragma once

#include <cstdint>

#include "run_command.h"

namespace softverbs::cli {

struct DemoOptions {
  LibraryEnv env;
  uint64_t size = 1 << 20;  // bytes per RDMA WRITE in the bandwidth test
  uint64_t iters = 1000;    // ping-pongs and bandwidth writes (the 64 B rate uses 100x)
};

// Returns only on failure (exit code).
[[nodiscard]] int run_demo(const DemoOptions& options);

}  // namespace softverbs::cli
