// softverbs-demo: the verbs half of `softverbs demo`, a plain libibverbs
// application (standard <infiniband/verbs.h> API only). `softverbs demo` execs
// it with LD_LIBRARY_PATH set; its RUNPATH also finds build/lib when run by hand.
//
//   softverbs-demo [--size N] [--iters N] [--device NAME] [--ib-port N]
//
// It is the client; it starts its server as `softverbs-demo --serve-fd FD`.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdint>

#include "demo_protocol.h"
#include "demo_roles.h"

int main(int argc, char** argv) {
  softverbs::demo::DemoConfig config;
  int serve_fd = -1;
  CLI::App app{"softverbs-demo: every RC verb between two processes, then latency and bandwidth"};
  app.add_option("--size", config.size, "Bytes per RDMA WRITE in the bandwidth test")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(uint64_t{64}, uint64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--iters", config.iters, "Round trips (latency) and writes (bandwidth); 64 B rate: 100x")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}))
      ->capture_default_str();
  app.add_option("--device", config.device, "RDMA device")->capture_default_str();
  app.add_option("--ib-port", config.port, "Port number")->check(CLI::Range(1, 255))->capture_default_str();
  app.add_option("--serve-fd", serve_fd, "Internal: run as the server on this socket")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (serve_fd >= 0) {
    alarm(softverbs::demo::kWatchdogSeconds + 30);  // backstop; the client kills us first
    return softverbs::demo::run_server(config, serve_fd);
  }
  return softverbs::demo::run_client(config);
}
