// This test binary re-executed to run one of its tests as another process
// (a fork alone would not do: TSan refuses threads after a multi-threaded
// fork). The child is killed by its PID when the object goes, whatever the
// test did meanwhile.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

extern char** environ;

class TestChild {
 public:
  // Runs the tests `filter` selects, with `env_var` (NAME=VALUE) added to the
  // environment; pid() < 0 when the fork failed.
  TestChild(const char* filter, std::string env_var) {
    // Everything exec needs is made before the fork (the child only execs).
    std::vector<char*> env;
    for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
    env.push_back(env_var.data());
    env.push_back(nullptr);
    std::string filter_arg = std::string("--gtest_filter=") + filter;
    char name[] = "softverbs_umad_tests";
    char* argv[] = {name, filter_arg.data(), nullptr};
    pid_ = fork();
    if (pid_ == 0) {
      execve("/proc/self/exe", argv, env.data());
      _exit(127);
    }
  }
  ~TestChild() { kill_and_reap(); }
  TestChild(const TestChild&) = delete;
  TestChild& operator=(const TestChild&) = delete;

  pid_t pid() const { return pid_; }
  // True when the child was alive to kill and is reaped now.
  bool kill_and_reap() {
    const bool killed = pid_ > 0 && kill(pid_, SIGKILL) == 0 && waitpid(pid_, nullptr, 0) == pid_;
    pid_ = -1;
    return killed;
  }

 private:
  pid_t pid_ = -1;
};
