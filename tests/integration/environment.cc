// environment.cc — the global gtest environment of the integration binary.
//
// SetUp (in the parent, before any test):
//  1. fixes the device instance: SOFTVERBS_DEVICE_PATH, or a private
//     /dev/shm/softverbs-itest-manual-<pid> when unset, and removes a stale
//     file left there by an earlier crashed run;
//  2. checks which libibverbs.so.1 the binary loaded (ours, from the build tree,
//     when CMake told us where it is);
//  3. probes the device in a forked child (with rank 0's host_env()):
//     ibv_get_device_list must list device_name(), which must open, and port 1
//     must be ACTIVE (and Ethernet under SOFTVERBS_ITEST_ROCE_LOOPBACK=1).
//     Otherwise it fails with "no <device> device: ..." and gtest runs no test;
//  4. with SOFTVERBS_HOST_PATH_STRICT=1 and SOFTVERBS_HOST_PATH=map or cma,
//     checks that this machine allows that path between two processes (map:
//     a memfd opened through /proc/<pid>/fd and mapped by another process;
//     cma: process_vm_readv/writev of another process). If not, it prints
//     "[itest] skipped: ..." with the reason and skips every test (the ctest
//     entry reports SKIPPED), since the library would refuse every request.
// TearDown removes the device file (and the hosts' files of host_env()).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
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

// The segment and the sysfs tree beside it (src/abi/ibverbs/sysfs_tree.h),
// and what an SM run against it leaves there (partition_test.cc's opensm):
// the issm FIFO (verbs/issm.h) and the user agents' directory.
void remove_device_file(const std::string& path) {
  if (!owned_device_file(path)) return;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    std::fprintf(stderr, "[itest] could not remove %s: %s\n", path.c_str(), std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::remove_all(path + ".sysfs", ec);
  std::filesystem::remove_all(path + ".agents", ec);
  std::filesystem::remove(path + ".issm1", ec);
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
    if (name != nullptr && std::strcmp(name, device_name()) == 0) found = list[i];
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
      // An external SM's port starts INIT (the PortState suite brings it up).
      const char* sm = std::getenv("SOFTVERBS_SM");
      const bool external_sm = sm != nullptr && std::strcmp(sm, "none") == 0;
      const int rc = ibv_query_port(ctx, kPort, &port);
      if (rc != 0) {
        problem = "ibv_query_port(1) failed: " + errno_name(rc);
      } else if (port.state != IBV_PORT_ACTIVE && !external_sm) {
        problem = "port 1 is not ACTIVE (state " + std::to_string(port.state) + ")";
      } else if (roce_loopback() && port.link_layer != IBV_LINK_LAYER_ETHERNET) {
        problem = "SOFTVERBS_ITEST_ROCE_LOOPBACK=1 but port 1 is not Ethernet (RoCE)";
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
    for (const auto& [name, value] : host_env(0)) ::setenv(name.c_str(), value.c_str(), 1);
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

// Runs `body` in a forked child (bounded by alarm) and returns what it wrote:
// "" when the child found nothing wrong.
std::string run_in_child(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(10);
    const std::string problem = body();
    if (!problem.empty()) (void)!::write(fds[1], problem.data(), problem.size());
    _exit(problem.empty() ? 0 : 1);
  }
  ::close(fds[1]);
  std::string problem;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    problem.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (problem.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    problem = "the check ended with wait status " + std::to_string(status);
  return problem;
}

// Whether another process may reach this one's memory by `path` the way the
// library does it (src/fabric/host/peer_memory.cc). The child reaches its
// parent: under Yama's ptrace_scope 1 that is refused just as between the
// sibling processes of a test. "" when it may, else why not.
std::string host_path_problem(const std::string& path) {
  const pid_t self = ::getpid();
  if (path == "map") {
    const int fd = ::memfd_create("softverbs-itest-probe", MFD_CLOEXEC);
    if (fd < 0) return std::string("memfd_create: ") + std::strerror(errno);
    std::string problem;
    void* p = MAP_FAILED;
    if (::ftruncate(fd, 4096) != 0) {
      problem = std::string("ftruncate: ") + std::strerror(errno);
    } else if ((p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
      problem = std::string("mmap: ") + std::strerror(errno);
    } else {
      problem = run_in_child([&]() -> std::string {
        const std::string name = "/proc/" + std::to_string(self) + "/fd/" + std::to_string(fd);
        const int theirs = ::open(name.c_str(), O_RDWR | O_CLOEXEC);
        if (theirs < 0) return "another process cannot open " + name + ": " + std::strerror(errno);
        void* q = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, theirs, 0);
        if (q == MAP_FAILED) return std::string("another process cannot map the memfd: ") + std::strerror(errno);
        static_cast<char*>(q)[0] = 'M';
        return "";
      });
      if (problem.empty() && static_cast<char*>(p)[0] != 'M') problem = "a store through the other mapping is not seen";
      ::munmap(p, 4096);
    }
    ::close(fd);
    return problem;
  }
  if (path == "cma") {
    static volatile uint64_t word = 0x1234;
    return run_in_child([&]() -> std::string {
      uint64_t got = 0;
      const uint64_t put = 0x5678;
      iovec local{&got, sizeof got};
      iovec remote{const_cast<uint64_t*>(&word), sizeof word};
      if (::process_vm_readv(::getppid(), &local, 1, &remote, 1, 0) != sizeof got)
        return std::string("process_vm_readv of another process: ") + std::strerror(errno);
      if (got != 0x1234) return "process_vm_readv read the wrong value";
      local = {const_cast<uint64_t*>(&put), sizeof put};
      if (::process_vm_writev(::getppid(), &local, 1, &remote, 1, 0) != sizeof put)
        return std::string("process_vm_writev of another process: ") + std::strerror(errno);
      return "";
    });
  }
  return "";
}

class DeviceEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    const std::string& path = device_path();
    remove_device_files();
    const std::string lib = loaded_libibverbs();
    auto env = [](const char* name) { return std::getenv(name) ? std::getenv(name) : "(unset)"; };
    std::fprintf(stderr,
                 "[itest] device %s, SOFTVERBS_HOST_PATH=%s (strict: %s), libibverbs %s, time scale %g%s\n",
                 path.c_str(), env("SOFTVERBS_HOST_PATH"), env("SOFTVERBS_HOST_PATH_STRICT"), lib.c_str(),
                 time_scale(),
                 roce_loopback() ? ", each child a RoCE host on 127.0.0.<rank+1> (SOFTVERBS_ITEST_ROCE_LOOPBACK)"
                                 : "");
#ifdef SOFTVERBS_ITEST_EXPECTED_LIBIBVERBS
    char want[PATH_MAX];
    if (::realpath(SOFTVERBS_ITEST_EXPECTED_LIBIBVERBS, want) != nullptr && lib != want) {
      FAIL() << "the test loaded " << lib << " instead of " << want
             << " (check the build RPATH and LD_LIBRARY_PATH)";
    }
#endif
    const char* strict = std::getenv("SOFTVERBS_HOST_PATH_STRICT");
    const char* host_path = std::getenv("SOFTVERBS_HOST_PATH");
    if (strict != nullptr && std::strcmp(strict, "1") == 0 && host_path != nullptr) {
      const std::string why = host_path_problem(host_path);
      if (!why.empty()) {
        std::fprintf(stderr, "[itest] skipped: SOFTVERBS_HOST_PATH=%s cannot run on this machine: %s\n",
                     host_path, why.c_str());
        GTEST_SKIP() << "SOFTVERBS_HOST_PATH=" << host_path << " cannot run on this machine: " << why;
      }
    }
    const std::string problem = run_probe();
    if (!problem.empty()) {
      FAIL() << "no " << device_name() << " device: " << problem << " (SOFTVERBS_DEVICE_PATH=" << path
             << ", libibverbs " << lib << ")";
    }
  }

  void TearDown() override { remove_device_files(); }

 private:
  static void remove_device_files() {
    remove_device_file(device_path());
    for (int rank = 0; rank < kMaxHosts; ++rank) {
      for (const auto& [name, value] : host_env(rank))
        if (name == "SOFTVERBS_DEVICE_PATH") remove_device_file(value);
    }
  }
};

[[maybe_unused]] testing::Environment* const kDeviceEnvironment =
    testing::AddGlobalTestEnvironment(new DeviceEnvironment);

}  // namespace
}  // namespace softverbs::integration
