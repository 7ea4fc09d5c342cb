#include "run_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "dev_nodes.h"

namespace softverbs::cli {

namespace fs = std::filesystem;

std::string executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return {};
  return exe.parent_path().string();
}

std::string library_dir() {
  std::string dir = executable_dir();
  if (dir.empty()) return {};
  std::error_code ec;
  fs::path lib = fs::weakly_canonical(fs::path(dir) / ".." / "lib", ec);
  if (ec) lib = (fs::path(dir) / ".." / "lib").lexically_normal();
  return lib.string();
}

bool apply_library_env(const LibraryEnv& env, const char* who, std::string* error) {
  std::string lib = library_dir();
  if (lib.empty()) {
    *error = "cannot find this executable's directory (/proc/self/exe)";
    return false;
  }
  std::error_code ec;
  if (!fs::exists(fs::path(lib) / "libibverbs.so.1", ec)) {
    std::fprintf(stderr,
                 "%s: warning: %s/libibverbs.so.1 does not exist; the program will load the "
                 "system's libibverbs\n",
                 who, lib.c_str());
  }
  std::string value = lib;
  if (const char* old = std::getenv("LD_LIBRARY_PATH"); old != nullptr && *old != '\0') {
    value += ':';
    value += old;
  }
  // An empty LD_LIBRARY_PATH element means the current directory: never add one.
  if (setenv("LD_LIBRARY_PATH", value.c_str(), 1) != 0 ||
      (!env.device_path.empty() && setenv("SOFTVERBS_DEVICE_PATH", env.device_path.c_str(), 1) != 0) ||
      (!env.host_path.empty() && setenv("SOFTVERBS_HOST_PATH", env.host_path.c_str(), 1) != 0)) {
    *error = std::string("setenv: ") + std::strerror(errno);
    return false;
  }
  return true;
}

int exec_program(const std::vector<std::string>& argv, const char* who) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  execvp(args[0], args.data());
  int err = errno;
  // Shell and env(1) conventions: 127 = not found, 126 = found but not runnable.
  bool not_found = err == ENOENT || err == ENOTDIR;
  bool searched = argv[0].find('/') == std::string::npos;
  std::fprintf(stderr, "%s: cannot run '%s': %s\n", who, argv[0].c_str(),
               not_found && searched ? "command not found in PATH" : std::strerror(err));
  return not_found ? 127 : 126;
}

int run_command(const LibraryEnv& env, const std::vector<std::string>& argv) {
  std::string error;
  if (!apply_library_env(env, "softverbs run", &error)) {
    std::fprintf(stderr, "softverbs run: %s\n", error.c_str());
    return 126;
  }
  if (env.dev_nodes && !enter_dev_nodes_namespace(&error)) {
    std::fprintf(stderr, "softverbs run --dev-nodes: %s\n", error.c_str());
    return 126;
  }
  return exec_program(argv, "softverbs run");
}

}  // namespace softverbs::cli
