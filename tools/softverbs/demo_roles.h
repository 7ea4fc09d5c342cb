// softverbs-demo: the two processes. demo_main.cc parses the arguments and
// calls one of these; the client forks+execs the server (this same program
// with --serve-fd) and owns it until it has reaped it.
#pragma once

#include <cstdint>
#include <string>

namespace softverbs::demo {

struct DemoConfig {
  std::string device = "softverbs0";
  int port = 1;
  uint64_t size = 1 << 20;  // bytes per RDMA WRITE in the bandwidth test
  uint64_t iters = 1000;    // ping-pongs and bandwidth writes; 64 B rate: 100x
};

// Client: prints every step; 0 = all checks passed.
int run_client(const DemoConfig& config);

// Server: serves Commands on socket `fd` until kQuit or EOF.
int run_server(const DemoConfig& config, int fd);

// Functional checks and measurements wait at most this long for one completion.
inline constexpr int kOpTimeoutMs = 5000;
// The client's watchdog: the whole demo, server included, dies after this.
inline constexpr unsigned kWatchdogSeconds = 60;

}  // namespace softverbs::demo
