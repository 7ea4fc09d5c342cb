// environment.cc — the global gtest environment of the integration binary.
//
// SetUp (in the parent, before any test):
//  1. fixes the device instance: SOFTVERBS_DEVICE_PATH, or a private
//     /dev/shm/softverbs-itest-manual-<pid> when unset, and removes a stale
//     file left there by an earlier crashed run;
//  2. checks which libibverbs.so.1 the binary loaded (ours, from the build tree,
//     when CMake told us where it is);
//  3. probes the device in a forked child: ibv_get_device_list must list
//     softverbs0, which must open, and port 1 must be ACTIVE. Otherwise it fails
//     with "no softverbs0 device: ..." and gtest runs no test.
// TearDown removes the device file.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include "harness.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

std::string loaded_libibverbs() {
  void* sym = ::dlsym(RTLD_DEFAULT, "ibv_open_device");
  Dl_info info{};
  if (sym == nullptr || ::dladdr(sym, &info) == 0 || info.dli_fname == nullptr) return "(unknown)";
  char real[PATH_MAX];
  if (::realpath(info.dli_fname, real) != nullptr) return real;
  return info.dli_fname;
}

// Only files this harness names are removed.
bool owned_device_file(const std::string& path) {
  return path.rfind("/dev/shm/softverbs-itest-", 0) == 0;
}

void remove_device_file(const std::string& path) {
  if (owned_device_file(path) && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
    std::fprintf(stderr, "[itest] could not remove %s: %s\n", path.c_str(), std::strerror(errno));
  }
}

// Runs in the probe child; returns "" when the device is usable.
std::string probe_device() {
  int num = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (list == nullptr) return "ibv_get_device_list failed: " + errno_name(errno);
  std::string problem;
  std::string names;
  ibv_device* found = nullptr;
  for (int i = 0; i < num && list[i] != nullptr; ++i) {
    const char* name = ibv_get_device_name(list[i]);
    names += std::string(names.empty() ? "" : ", ") + (name != nullptr ? name : "(null)");
    if (name != nullptr && std::strcmp(name, kDeviceName) == 0) found = list[i];
  }
  if (found == nullptr) {
    problem = "ibv_get_device_list returned " + std::to_string(num) + " device(s) [" + names + "]";
  } else {
    errno = 0;
    ibv_context* ctx = ibv_open_device(found);
    if (ctx == nullptr) {
      problem = "ibv_open_device failed: " + errno_name(errno);
    } else {
      ibv_port_attr port{};
      const int rc = ibv_query_port(ctx, kPort, &port);
      if (rc != 0) {
        problem = "ibv_query_port(1) failed: " + errno_name(rc);
      } else if (port.state != IBV_PORT_ACTIVE) {
        problem = "port 1 is not ACTIVE (state " + std::to_string(port.state) + ")";
      }
      ibv_close_device(ctx);
    }
  }
  ibv_free_device_list(list);
  return problem;
}

// Forks the probe; returns "" when usable, else why not.
std::string run_probe() {
  int fds[2];
  if (::pipe(fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(97);
    ::close(fds[0]);
    const std::string problem = probe_device();
    if (!problem.empty()) (void)!::write(fds[1], problem.data(), problem.size());
    _exit(problem.empty() ? 0 : 1);
  }
  ::close(fds[1]);
  std::string problem;
  const Deadline deadline(scaled(Millis(30'000)));
  bool timed_out = false;
  for (;;) {
    pollfd pfd{fds[0], POLLIN, 0};
    const int r = ::poll(&pfd, 1, deadline.poll_ms(200));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (deadline.expired()) {
        timed_out = true;
        break;
      }
      continue;
    }
    char buf[512];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    problem.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return "the probe hung for 30 s (killed)";
  if (WIFSIGNALED(status)) {
    return "the probe was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")" + (problem.empty() ? "" : ": " + problem);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return problem.empty() ? "the probe exited with status " + std::to_string(WEXITSTATUS(status))
                         : problem;
}

class DeviceEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    const std::string& path = device_path();
    remove_device_file(path);
    const std::string lib = loaded_libibverbs();
    std::fprintf(stderr, "[itest] device %s, SOFTVERBS_HOST_PATH=%s, libibverbs %s, time scale %g\n",
                 path.c_str(), std::getenv("SOFTVERBS_HOST_PATH") ? std::getenv("SOFTVERBS_HOST_PATH") : "(unset)",
                 lib.c_str(), time_scale());
#ifdef SOFTVERBS_ITEST_EXPECTED_LIBIBVERBS
    char want[PATH_MAX];
    if (::realpath(SOFTVERBS_ITEST_EXPECTED_LIBIBVERBS, want) != nullptr && lib != want) {
      FAIL() << "the test loaded " << lib << " instead of " << want
             << " (check the build RPATH and LD_LIBRARY_PATH)";
    }
#endif
    const std::string problem = run_probe();
    if (!problem.empty()) {
      FAIL() << "no " << kDeviceName << " device: " << problem << " (SOFTVERBS_DEVICE_PATH=" << path
             << ", libibverbs " << lib << ")";
    }
  }

  void TearDown() override { remove_device_file(device_path()); }
};

[[maybe_unused]] testing::Environment* const kDeviceEnvironment =
    testing::AddGlobalTestEnvironment(new DeviceEnvironment);

}  // namespace
}  // namespace softverbs::integration
