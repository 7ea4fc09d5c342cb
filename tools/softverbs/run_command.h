// `softverbs run`: start a program on softverbs' libibverbs.so.1.
//
// The contract: `softverbs run [--device-path F] [--host-path P] -- PROG ARGS`
// is exactly `LD_LIBRARY_PATH=<lib>[:$LD_LIBRARY_PATH] SOFTVERBS_DEVICE_PATH=F
// SOFTVERBS_HOST_PATH=P PROG ARGS`, where <lib> is `<dir of this executable>/../lib`.
// With --dev-nodes the program also runs where the /dev/infiniband stand-in
// nodes exist (dev_nodes.h). Nothing else is changed, so running a program by hand with that environment
// behaves the same. This file never loads libibverbs: `run` works even when the
// library is missing or broken.
//
// Thread-safety: these functions change the process environment (setenv) and
// are meant for a single-threaded CLI before exec.
#pragma once

#include <string>
#include <vector>

namespace softverbs::cli {

// What `run` and `demo` put into the environment. Empty = leave unset/as is.
struct LibraryEnv {
  std::string device_path;  // SOFTVERBS_DEVICE_PATH: the device segment file
  std::string host_path;    // SOFTVERBS_HOST_PATH: auto|map|cma|bounce
  bool dev_nodes = false;   // run only: enter_dev_nodes_namespace() before exec
};

// The values --host-path accepts.
inline const std::vector<std::string> kHostPaths = {"auto", "map", "cma", "bounce"};

// The directory holding this executable (from /proc/self/exe); empty on failure.
std::string executable_dir();

// `<executable_dir()>/../lib`, normalised; empty on failure.
std::string library_dir();

// Prepends library_dir() to LD_LIBRARY_PATH and sets the SOFTVERBS_* variables
// named in `env`. Warns on stderr (prefixed by `who`) when the directory holds
// no libibverbs.so.1. Returns false with a message in *error when the
// executable's directory cannot be found.
[[nodiscard]] bool apply_library_env(const LibraryEnv& env, const char* who, std::string* error);

// execvp(argv[0], argv). Returns only on failure, with the exit code to use:
// 127 when the program is not found, 126 when it cannot be executed; the
// reason has been printed on stderr, prefixed by `who`.
[[nodiscard]] int exec_program(const std::vector<std::string>& argv, const char* who);

// The whole `run` subcommand: apply_library_env, then exec_program.
// REQUIRES: !argv.empty(). Returns only on failure (exit code).
[[nodiscard]] int run_command(const LibraryEnv& env, const std::vector<std::string>& argv);

}  // namespace softverbs::cli
