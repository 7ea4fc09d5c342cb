// lock_service launcher: forks the server and the clients, each with one end
// of a socketpair to exchange QP numbers and keys, waits for them within the
// time limit, and kills and reaps whatever is left when it runs out.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "roles.h"

namespace lock_service {
namespace {

struct Child {
  pid_t pid = -1;
  std::string name;
  int status = -1;  // exit status once reaped
};

// Each process of a --roce run is a RoCE host of its own: an address on lo
// (Linux answers all of 127/8) and a device instance of its own.
void become_host(const Options& o, const std::string& base, int rank) {
  if (!o.roce) {
    if (!base.empty()) ::setenv("SOFTVERBS_DEVICE_PATH", base.c_str(), 1);
    return;
  }
  ::setenv("SOFTVERBS_ROCE_ADDR", ("127.0.0." + std::to_string(rank + 1)).c_str(), 1);
  ::setenv("SOFTVERBS_DEVICE_PATH", (base + "-host" + std::to_string(rank)).c_str(), 1);
}

template <class Body>
pid_t spawn(Body body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
  std::_Exit(body());
}

}  // namespace

std::string device_name(const Options& o) {
  if (!o.device.empty()) return o.device;
  return o.roce ? "softverbs_roce0" : "softverbs0";
}

int launch(const Options& o) {
  // --roce needs one device file per process; it uses private ones.
  std::string base;
  const bool private_files = o.private_device || o.roce;
  if (private_files) base = "/dev/shm/softverbs-lock-" + std::to_string(::getpid());

  std::vector<int> server_ends, client_ends;
  for (int i = 0; i < o.clients; ++i) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      std::printf("verdict: FAIL socketpair: %s\n", std::strerror(errno));
      return 1;
    }
    server_ends.push_back(sv[0]);
    client_ends.push_back(sv[1]);
  }
  std::vector<Child> children;
  children.push_back({spawn([&] {
                        for (int fd : client_ends) ::close(fd);
                        become_host(o, base, 0);
                        return run_server(o, server_ends);
                      }),
                      "server"});
  for (int i = 0; i < o.clients; ++i) {
    children.push_back({spawn([&] {
                          for (int fd : server_ends) ::close(fd);
                          become_host(o, base, i + 1);
                          return run_client(o, static_cast<uint32_t>(i + 1), client_ends[static_cast<size_t>(i)]);
                        }),
                        "client " + std::to_string(i + 1)});
  }
  for (int fd : server_ends) ::close(fd);
  for (int fd : client_ends) ::close(fd);

  // The roles give up at --timeout-s themselves; a little more, then kill.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s + 10);
  size_t running = 0;
  for (const Child& c : children) running += c.pid > 0;
  bool killed = false;
  while (running > 0) {
    for (Child& c : children) {
      if (c.pid <= 0 || c.status != -1) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.status = status;
        --running;
      }
    }
    if (running == 0) break;
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      for (const Child& c : children)
        if (c.pid > 0 && c.status == -1) ::kill(c.pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (private_files) {
    for (int rank = 0; rank <= o.clients; ++rank) {
      const std::string path = o.roce ? base + "-host" + std::to_string(rank) : base;
      ::unlink(path.c_str());
    }
  }

  int rc = 0;
  for (const Child& c : children) {
    if (c.pid <= 0) {
      std::printf("verdict: FAIL could not start the %s: %s\n", c.name.c_str(), std::strerror(errno));
      rc = 1;
    } else if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
      if (WIFSIGNALED(c.status))
        std::printf("verdict: FAIL the %s was killed by signal %d%s\n", c.name.c_str(), WTERMSIG(c.status),
                    killed ? " (time limit)" : "");
      else
        std::fprintf(stderr, "lock_service: the %s exited with status %d\n", c.name.c_str(), WEXITSTATUS(c.status));
      rc = 1;
    }
  }
  return rc;
}

}  // namespace lock_service
