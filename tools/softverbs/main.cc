// softverbs: the command-line tool. Subcommands:
//   run    [--device-path F] [--host-path auto|map|cma|bounce] [--dev-nodes] -- PROGRAM ARGS...
//   status [--json]
//   setup-dev [--remove]
//   demo   [--size N] [--iters N] [--device-path F] [--host-path P]
// Exit codes: the program's (run), 126/127 when it cannot be started, 2 on a
// usage error, otherwise 0 on success and 1 on failure.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "demo.h"
#include "dev_nodes.h"
#include "run_command.h"
#include "status.h"

namespace {

using softverbs::cli::DemoOptions;
using softverbs::cli::kHostPaths;
using softverbs::cli::LibraryEnv;

void add_env_options(CLI::App* cmd, LibraryEnv* env) {
  cmd->add_option("--device-path", env->device_path,
                  "Device segment file (sets SOFTVERBS_DEVICE_PATH; default "
                  "/dev/shm/softverbs-<uid>-v<N>)")
      ->type_name("FILE");
  cmd->add_option("--host-path", env->host_path,
                  "Fastest way to reach peer memory (sets SOFTVERBS_HOST_PATH)")
      ->check(CLI::IsMember(kHostPaths));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"softverbs: a software RDMA device (softverbs0) for unmodified verbs programs"};
  app.require_subcommand(1);

  LibraryEnv run_env;
  std::vector<std::string> program;
  CLI::App* run = app.add_subcommand(
      "run", "Run PROGRAM with softverbs' libibverbs.so.1 (sets LD_LIBRARY_PATH, then execs it)");
  add_env_options(run, &run_env);
  run->add_flag("--dev-nodes", run_env.dev_nodes,
                "Run PROGRAM where /dev/infiniband/uverbs_softverbs* exist (UCX lists no device without "
                "them): a private mount namespace, inside a user namespace when not root");
  run->add_option("program", program, "PROGRAM and its arguments (after --)")->required();
  run->positionals_at_end();

  bool json = false;
  CLI::App* status = app.add_subcommand("status", "Show the device: processes, objects, counters");
  status->add_flag("--json", json, "Print one JSON document");

  bool remove_nodes = false;
  CLI::App* setup_dev = app.add_subcommand(
      "setup-dev", "As root, once per boot: create the /dev/infiniband nodes UCX checks for (stand-ins)");
  setup_dev->add_flag("--remove", remove_nodes, "Remove them again");

  DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "Two processes: every RC verb checked, then latency and bandwidth");
  add_env_options(demo_cmd, &demo.env);
  demo_cmd->add_option("--size", demo.size, "Bytes per RDMA WRITE in the bandwidth test")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(uint64_t{64}, uint64_t{1} << 30))
      ->capture_default_str();
  demo_cmd->add_option("--iters", demo.iters,
                       "Round trips (latency) and writes (bandwidth); the 64 B rate uses 100x")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (run->parsed()) return softverbs::cli::run_command(run_env, program);
  if (demo_cmd->parsed()) return softverbs::cli::run_demo(demo);
  if (setup_dev->parsed()) return softverbs::cli::setup_dev_nodes(remove_nodes);
  if (status->parsed()) {
#if SOFTVERBS_HAVE_STATUS
    return softverbs::cli::run_status(json);
#else
    (void)json;
    std::fprintf(stderr, "softverbs status: not built in this tree (no tools/softverbs/status.cc)\n");
    return 1;
#endif
  }
  return 2;
}
