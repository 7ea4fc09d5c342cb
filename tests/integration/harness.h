// harness.h — fork-based multi-process harness for the integration suites.
//
// The suites test libibverbs purely through <infiniband/verbs.h>. Each test
// body runs in child processes forked by run_procs(); the gtest process (the
// "parent") only coordinates.
//
// Contract
//  1. The parent never calls a verb. Every child opens the device itself, so no
//     library state (mappings, progress threads, fds) crosses fork(), and a
//     crash inside the library becomes a reported failure ("[responder] killed
//     by signal 11"), not a dead test binary.
//  2. Children use plain gtest assertions. A listener installed in each child
//     forwards every assertion failure (file, line, message) over a socket to
//     the parent, which re-raises it in the running test tagged with the
//     child's name. A child exits 0 iff it recorded no failure; any other exit
//     (status, signal, timeout) is a failure of the test, except a SIGKILL the
//     test announced with ProcSpec::expect_sigkill.
//     ASSERT_* returns from the current function only: helpers return bool and
//     callers write ASSERT_TRUE(helper(...)).
//  3. Every child is bounded. run_procs() SIGKILLs and reaps every child by pid
//     when its deadline passes, a few seconds after a sibling failed, and
//     before it returns. A child whose parent dies gets SIGKILL
//     (PR_SET_PDEATHSIG), so a ctest TIMEOUT leaves no orphans.
//  4. Every pair of children shares a Link (a stream socketpair carrying
//     length-prefixed frames). Every receive takes a deadline; a peer's exit
//     reads as end-of-file, so a child waiting for a dead sibling fails fast.
//  5. Deadlines (never lower bounds on elapsed time) are multiplied by
//     time_scale(): 1 normally, more under sanitizers or when
//     SOFTVERBS_ITEST_TIME_SCALE says so.
//  6. A child may get environment variables of its own (host_env(rank), then
//     ProcSpec::env), set before its body runs and so before the library reads
//     them when the device is first opened. With SOFTVERBS_ITEST_ROCE_LOOPBACK=1
//     every child is a host of its own: the RoCE device softverbs_roce0 on
//     127.0.0.<rank + 1> (SOFTVERBS_ROCE_PORT as the entry sets it) with a
//     device segment of its own, so that what moves between children goes
//     over UDP.
//
// Thread-safety: run_procs() is called from the gtest main thread only. A Link
// is used by one thread at a time. Assertions may be used from any thread of a
// child.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace softverbs::integration {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Multiplier for deadlines: SOFTVERBS_ITEST_TIME_SCALE if set, else the build's
// default (SOFTVERBS_ITEST_DEFAULT_TIME_SCALE, larger for sanitizer builds).
double time_scale();
Millis scaled(Millis base);

// Default wait for one completion or one message from a peer (before scaling).
inline constexpr Millis kOpTimeout{10'000};
// Default bound for one whole test, all its processes together (before scaling).
inline constexpr Millis kTestTimeout{30'000};

class Deadline {
 public:
  explicit Deadline(Millis budget) : end_(Clock::now() + budget) {}
  // A deadline kOpTimeout (scaled) from now.
  static Deadline op() { return Deadline(scaled(kOpTimeout)); }

  bool expired() const { return Clock::now() >= end_; }
  // Remaining time for poll(2): at least 0, at most `cap_ms`.
  int poll_ms(int cap_ms = 1 << 30) const;
  Clock::time_point end() const { return end_; }

 private:
  Clock::time_point end_;
};

// Milliseconds elapsed since `start`, as a double.
double ms_since(Clock::time_point start);

// One end of a framed byte stream to another process. Move-only; closes its fd.
// Failures are reported with ADD_FAILURE (with what was being waited for) and
// returned as false.
class Link {
 public:
  Link() = default;
  explicit Link(int fd) : fd_(fd) {}
  ~Link();
  Link(Link&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Link& operator=(Link&& other) noexcept;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

  [[nodiscard]] bool send_frame(const void* data, size_t len);
  // Receives one frame. On EOF, error or deadline: ADD_FAILURE naming `what`.
  [[nodiscard]] bool recv_frame(std::vector<uint8_t>* out, Deadline deadline,
                                std::string_view what = "a message");
  // Like recv_frame but silent: returns 1 frame, 0 EOF, -1 error, -2 deadline.
  int try_recv_frame(std::vector<uint8_t>* out, Deadline deadline);

  template <typename T>
  [[nodiscard]] bool send(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    return send_frame(&value, sizeof value);
  }
  template <typename T>
  [[nodiscard]] bool recv(T* value, Deadline deadline = Deadline::op(),
                          std::string_view what = "a value") {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<uint8_t> frame;
    if (!recv_frame(&frame, deadline, what)) return false;
    if (frame.size() != sizeof(T)) return size_mismatch(what, frame.size(), sizeof(T));
    std::memcpy(value, frame.data(), sizeof(T));
    return true;
  }
  template <typename T>
  [[nodiscard]] bool send_vector(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    return send_frame(values.data(), values.size() * sizeof(T));
  }
  template <typename T>
  [[nodiscard]] bool recv_vector(std::vector<T>* values, Deadline deadline = Deadline::op(),
                                 std::string_view what = "a vector") {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<uint8_t> frame;
    if (!recv_frame(&frame, deadline, what)) return false;
    if (frame.size() % sizeof(T) != 0) return size_mismatch(what, frame.size(), sizeof(T));
    values->resize(frame.size() / sizeof(T));
    if (!frame.empty()) std::memcpy(values->data(), frame.data(), frame.size());
    return true;
  }

  // Synchronisation points: signal() sends a tag, wait() expects exactly it.
  [[nodiscard]] bool signal(std::string_view tag);
  [[nodiscard]] bool wait(std::string_view tag, Deadline deadline = Deadline::op());
  // Waits for `tag` with a plain blocking read(2): no poll, no timeout (the
  // harness deadline still bounds the process). For "the target sits in read()".
  [[nodiscard]] bool wait_blocking(std::string_view tag);
  // Waits until the peer closed its end (it exited or was killed).
  [[nodiscard]] bool wait_closed(Deadline deadline);

 private:
  bool size_mismatch(std::string_view what, size_t got, size_t want);
  int fd_ = -1;
};

// What a child's body receives.
class Proc {
 public:
  Proc(int rank, int size, std::string name, std::vector<Link> links);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  // The link to sibling `peer` (peer != rank()).
  Link& link(int peer);
  // In a two-process group: the link to the other process.
  Link& peer() { return link(1 - rank_); }
  // Every process of the group reaches this point before any continues.
  [[nodiscard]] bool barrier(std::string_view tag, Deadline deadline = Deadline::op());

 private:
  int rank_;
  int size_;
  std::string name_;
  std::vector<Link> links_;  // indexed by rank; links_[rank_] is invalid
};

struct ProcSpec {
  std::string name;
  std::function<void(Proc&)> body;
  // The test SIGKILLs this child on purpose (it may also exit cleanly).
  bool expect_sigkill = false;
  // Set in the child (after host_env) before its body runs.
  std::vector<std::pair<std::string, std::string>> env;
};

struct RunOptions {
  Millis timeout = kTestTimeout;  // scaled by run_procs
  // Descriptors the parent closes right after forking (e.g. both ends of a
  // pipe the children share), so EOF reaches the children.
  std::vector<int> close_in_parent;
};

// Forks one child per spec (rank = index), runs them, waits for all (bounded),
// reaps them and re-raises their failures in the current test. Never returns
// with a child alive.
void run_procs(std::vector<ProcSpec> procs, const RunOptions& options = {});

// Two children, ranks 0 and 1.
void run_pair(std::string name0, std::function<void(Proc&)> body0, std::string name1,
              std::function<void(Proc&)> body1, const RunOptions& options = {});

// One child; for single-process tests (crash isolation and a bound).
void run_solo(std::string name, std::function<void(Proc&)> body, const RunOptions& options = {});

// Prints a progress line to stderr, prefixed with the child's name and pid.
void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// The device instance for this binary (SOFTVERBS_DEVICE_PATH; set by the
// harness to a private /dev/shm path when unset).
const std::string& device_path();

// Whether SOFTVERBS_ITEST_ROCE_LOOPBACK=1: each child is a RoCE host of its own.
bool roce_loopback();
// The environment that makes the child of rank `rank` its own host (see the
// contract, 6.): empty unless roce_loopback(). Ranks 0 .. kMaxHosts-1.
inline constexpr int kMaxHosts = 16;
std::vector<std::pair<std::string, std::string>> host_env(int rank);

}  // namespace softverbs::integration
