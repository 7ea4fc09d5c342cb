#include "harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#ifndef SOFTVERBS_ITEST_DEFAULT_TIME_SCALE
#define SOFTVERBS_ITEST_DEFAULT_TIME_SCALE 1
#endif

namespace softverbs::integration {
namespace {

// Frames on every Link: a 4-byte host-order length, then that many bytes.
constexpr uint32_t kMaxFrame = 64u << 20;

// Report frames from a child to the parent: kind, line, file, message.
enum class ReportKind : uint8_t { kFailure = 1, kFatalFailure = 2, kSkip = 3 };

std::string g_child_name;  // empty in the parent

bool write_all(int fd, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// 1: read all; 0: EOF before the first byte; -1: error or EOF mid-way; -2: deadline.
int read_exact(int fd, void* data, size_t len, const Deadline* deadline) {
  auto* p = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < len) {
    if (deadline != nullptr) {
      pollfd pfd{fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, deadline->poll_ms(100));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -1;
      if (r == 0) {
        if (deadline->expired()) return -2;
        continue;
      }
    }
    ssize_t n = ::read(fd, p + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return done == 0 ? 0 : -1;
    done += static_cast<size_t>(n);
  }
  return 1;
}

std::string describe_wait_status(int status) {
  std::ostringstream out;
  if (WIFEXITED(status)) {
    out << "exited with status " << WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    out << "killed by signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status)) << ")";
  } else {
    out << "ended with wait status " << status;
  }
  return out.str();
}

// In a child: forwards every failed or skipped assertion to the parent.
class ForwardingListener : public testing::EmptyTestEventListener {
 public:
  explicit ForwardingListener(int fd) : fd_(fd) {}

  void OnTestPartResult(const testing::TestPartResult& result) override {
    ReportKind kind;
    if (result.fatally_failed()) {
      kind = ReportKind::kFatalFailure;
    } else if (result.nonfatally_failed()) {
      kind = ReportKind::kFailure;
    } else if (result.skipped()) {
      kind = ReportKind::kSkip;
    } else {
      return;
    }
    std::string file = result.file_name() != nullptr ? result.file_name() : "";
    std::string message = result.message();
    if (message.size() > 8000) message = message.substr(0, 8000) + "...(truncated)";
    const int32_t line = result.line_number();
    const auto file_len = static_cast<uint32_t>(file.size());
    std::string frame;
    frame.push_back(static_cast<char>(kind));
    frame.append(reinterpret_cast<const char*>(&line), sizeof line);
    frame.append(reinterpret_cast<const char*>(&file_len), sizeof file_len);
    frame += file;
    frame += message;
    std::lock_guard<std::mutex> lock(mu_);
    if (kind != ReportKind::kSkip) ++failures_;
    const auto len = static_cast<uint32_t>(frame.size());
    // If the parent is gone there is nobody to tell; PDEATHSIG ends us anyway.
    if (write_all(fd_, &len, sizeof len)) (void)write_all(fd_, frame.data(), frame.size());
  }

  int failures() {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }

 private:
  std::mutex mu_;
  int fd_;
  int failures_ = 0;
};

struct Report {
  ReportKind kind;
  int line;
  std::string file;
  std::string message;
};

bool parse_report(const std::vector<uint8_t>& frame, Report* out) {
  if (frame.size() < 9) return false;
  out->kind = static_cast<ReportKind>(frame[0]);
  int32_t line;
  uint32_t file_len;
  std::memcpy(&line, &frame[1], sizeof line);
  std::memcpy(&file_len, &frame[5], sizeof file_len);
  if (9 + static_cast<size_t>(file_len) > frame.size()) return false;
  out->line = line;
  out->file.assign(reinterpret_cast<const char*>(&frame[9]), file_len);
  out->message.assign(reinterpret_cast<const char*>(&frame[9 + file_len]),
                      frame.size() - 9 - file_len);
  return true;
}

// Kills (SIGKILL) and reaps every registered child that is still unreaped.
class ChildGuard {
 public:
  ~ChildGuard() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  void add(pid_t pid) { pids_.push_back(pid); }
  void reaped(pid_t pid) { pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end()); }

 private:
  std::vector<pid_t> pids_;
};

struct Child {
  std::string name;
  bool expect_sigkill = false;
  pid_t pid = -1;
  int report_fd = -1;
  std::vector<uint8_t> inbox;  // bytes received on report_fd, not yet parsed
  std::vector<Report> reports;
  bool reaped = false;
  int status = 0;
  std::string killed_because;  // non-empty if the harness killed it
};

bool child_failed(const Child& c) {
  if (!c.reaped) return false;
  if (WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0) return false;
  if (c.expect_sigkill && WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL) return false;
  return true;
}

void drain_reports(Child& c, bool* eof) {
  uint8_t buf[4096];
  for (;;) {
    ssize_t n = ::read(c.report_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      *eof = true;
      break;
    }
    c.inbox.insert(c.inbox.end(), buf, buf + n);
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  for (;;) {
    if (c.inbox.size() < 4) break;
    uint32_t len;
    std::memcpy(&len, c.inbox.data(), sizeof len);
    if (c.inbox.size() < 4 + static_cast<size_t>(len)) break;
    std::vector<uint8_t> frame(c.inbox.begin() + 4, c.inbox.begin() + 4 + len);
    c.inbox.erase(c.inbox.begin(), c.inbox.begin() + 4 + len);
    Report r;
    if (parse_report(frame, &r)) c.reports.push_back(std::move(r));
  }
}

[[noreturn]] void child_main(int rank, std::vector<ProcSpec>& procs, pid_t parent,
                             std::vector<std::array<int, 2>>& report,
                             std::vector<std::vector<int>>& mesh) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(97);  // the parent died before prctl
  const int n = static_cast<int>(procs.size());
  for (int j = 0; j < n; ++j) {
    ::close(report[j][0]);
    if (j != rank) ::close(report[j][1]);
  }
  std::vector<Link> links(n);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (mesh[a][b] < 0) continue;
      if (a == rank) {
        links[b] = Link(mesh[a][b]);
      } else {
        ::close(mesh[a][b]);
      }
    }
  }
  g_child_name = procs[rank].name;

  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  delete listeners.Release(listeners.default_xml_generator());
  auto* forwarder = new ForwardingListener(report[rank][1]);
  listeners.Append(forwarder);  // owned by gtest
  // Before the body: the library reads these when the device is first opened.
  std::vector<std::pair<std::string, std::string>> env = host_env(rank);
  env.insert(env.end(), procs[rank].env.begin(), procs[rank].env.end());
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);

  {
    Proc proc(rank, n, procs[rank].name, std::move(links));
    procs[rank].body(proc);
  }
  const int code = forwarder->failures() == 0 ? 0 : 1;
  std::fflush(nullptr);
  // exit(), not _exit(): the library's and the sanitizers' exit hooks run too.
  std::exit(code);
}

}  // namespace

double time_scale() {
  static const double scale = [] {
    double s = SOFTVERBS_ITEST_DEFAULT_TIME_SCALE;
    if (const char* env = std::getenv("SOFTVERBS_ITEST_TIME_SCALE")) {
      double v = std::atof(env);
      if (v > 0) s = v;
    }
    return s;
  }();
  return scale;
}

Millis scaled(Millis base) {
  return Millis(static_cast<int64_t>(static_cast<double>(base.count()) * time_scale()));
}

int Deadline::poll_ms(int cap_ms) const {
  auto left = std::chrono::duration_cast<Millis>(end_ - Clock::now()).count();
  if (left < 0) left = 0;
  // Round up so that a poll never returns just before the deadline forever.
  return static_cast<int>(std::min<int64_t>(left + 1, cap_ms));
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---- Link ------------------------------------------------------------------

Link::~Link() { close(); }

Link& Link::operator=(Link&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Link::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Link::send_frame(const void* data, size_t len) {
  if (fd_ < 0 || len > kMaxFrame) {
    ADD_FAILURE() << "link: cannot send a frame of " << len << " bytes";
    return false;
  }
  const auto len32 = static_cast<uint32_t>(len);
  if (!write_all(fd_, &len32, sizeof len32) || (len > 0 && !write_all(fd_, data, len))) {
    ADD_FAILURE() << "link: send failed (" << std::strerror(errno) << "); the peer is gone";
    return false;
  }
  return true;
}

int Link::try_recv_frame(std::vector<uint8_t>* out, Deadline deadline) {
  uint32_t len = 0;
  int r = read_exact(fd_, &len, sizeof len, &deadline);
  if (r != 1) return r;
  if (len > kMaxFrame) return -1;
  out->resize(len);
  if (len == 0) return 1;
  r = read_exact(fd_, out->data(), len, &deadline);
  return r == 1 ? 1 : (r == -2 ? -2 : -1);
}

bool Link::recv_frame(std::vector<uint8_t>* out, Deadline deadline, std::string_view what) {
  if (fd_ < 0) {
    ADD_FAILURE() << "link: no link to receive " << what << " on";
    return false;
  }
  const int r = try_recv_frame(out, deadline);
  switch (r) {
    case 1:
      return true;
    case 0:
      ADD_FAILURE() << "link: the peer exited while we waited for " << what;
      return false;
    case -2:
      ADD_FAILURE() << "link: timed out waiting for " << what;
      return false;
    default:
      ADD_FAILURE() << "link: receive failed while waiting for " << what;
      return false;
  }
}

bool Link::size_mismatch(std::string_view what, size_t got, size_t want) {
  ADD_FAILURE() << "link: " << what << " arrived with " << got << " bytes, expected " << want
                << " (the peers disagree about the protocol)";
  return false;
}

bool Link::signal(std::string_view tag) { return send_frame(tag.data(), tag.size()); }

bool Link::wait(std::string_view tag, Deadline deadline) {
  std::vector<uint8_t> frame;
  std::string what = "'" + std::string(tag) + "'";
  if (!recv_frame(&frame, deadline, what)) return false;
  std::string got(frame.begin(), frame.end());
  if (got != tag) {
    ADD_FAILURE() << "link: expected " << what << ", got a " << frame.size() << "-byte frame '"
                  << got.substr(0, 40) << "'";
    return false;
  }
  return true;
}

bool Link::wait_blocking(std::string_view tag) {
  uint32_t len = 0;
  if (read_exact(fd_, &len, sizeof len, nullptr) != 1 || len != tag.size()) {
    ADD_FAILURE() << "link: expected '" << tag << "' while blocked in read()";
    return false;
  }
  std::string got(len, '\0');
  if (len > 0 && read_exact(fd_, got.data(), len, nullptr) != 1) return false;
  EXPECT_EQ(got, tag);
  return got == tag;
}

bool Link::wait_closed(Deadline deadline) {
  uint8_t buf[256];
  for (;;) {
    pollfd pfd{fd_, POLLIN, 0};
    int r = ::poll(&pfd, 1, deadline.poll_ms(100));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (deadline.expired()) {
        ADD_FAILURE() << "link: the peer did not exit in time";
        return false;
      }
      continue;
    }
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // EOF (or ECONNRESET): the peer is gone
  }
}

// ---- Proc ------------------------------------------------------------------

Proc::Proc(int rank, int size, std::string name, std::vector<Link> links)
    : rank_(rank), size_(size), name_(std::move(name)), links_(std::move(links)) {}

Link& Proc::link(int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    ADD_FAILURE() << "no link from rank " << rank_ << " to rank " << peer;
    static Link none;
    return none;
  }
  return links_[peer];
}

bool Proc::barrier(std::string_view tag, Deadline deadline) {
  bool ok = true;
  for (int j = 0; j < size_; ++j) {
    if (j != rank_) ok = links_[j].signal(tag) && ok;
  }
  for (int j = 0; j < size_; ++j) {
    if (j != rank_) ok = links_[j].wait(tag, deadline) && ok;
  }
  return ok;
}

// ---- run_procs ---------------------------------------------------------------

void run_procs(std::vector<ProcSpec> procs, const RunOptions& options) {
  const int n = static_cast<int>(procs.size());
  std::vector<std::array<int, 2>> report(n, {-1, -1});
  std::vector<std::vector<int>> mesh(n, std::vector<int>(n, -1));
  auto close_all = [&] {
    for (auto& r : report)
      for (int& fd : r)
        if (fd >= 0) ::close(std::exchange(fd, -1));
    for (auto& row : mesh)
      for (int& fd : row)
        if (fd >= 0) ::close(std::exchange(fd, -1));
  };
  for (int i = 0; i < n; ++i) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, report[i].data()) != 0) {
      ADD_FAILURE() << "socketpair: " << std::strerror(errno);
      close_all();
      return;
    }
    for (int j = i + 1; j < n; ++j) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        ADD_FAILURE() << "socketpair: " << std::strerror(errno);
        close_all();
        return;
      }
      mesh[i][j] = sv[0];
      mesh[j][i] = sv[1];
    }
  }

  std::vector<Child> children(n);
  ChildGuard guard;
  const pid_t parent = ::getpid();
  std::fflush(nullptr);  // no buffered output duplicated into children
  for (int i = 0; i < n; ++i) {
    children[i].name = procs[i].name;
    children[i].expect_sigkill = procs[i].expect_sigkill;
    pid_t pid = ::fork();
    if (pid == 0) child_main(i, procs, parent, report, mesh);
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      break;
    }
    children[i].pid = pid;
    guard.add(pid);
  }
  for (int fd : options.close_in_parent) ::close(fd);
  for (int i = 0; i < n; ++i) {
    children[i].report_fd = std::exchange(report[i][0], -1);
    if (children[i].report_fd >= 0) {
      ::fcntl(children[i].report_fd, F_SETFL, O_NONBLOCK);
    }
  }
  close_all();

  const Millis budget = scaled(options.timeout);
  const Deadline deadline(budget);
  std::optional<Clock::time_point> grace_end;
  std::optional<Clock::time_point> drain_end;
  std::string first_failed;
  auto kill_rest = [&](const std::string& why) {
    for (auto& c : children) {
      if (c.pid > 0 && !c.reaped) {
        ::kill(c.pid, SIGKILL);
        if (c.killed_because.empty()) c.killed_because = why;
      }
    }
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    for (auto& c : children) {
      if (c.report_fd >= 0) {
        fds.push_back({c.report_fd, POLLIN, 0});
        owners.push_back(&c);
      }
    }
    bool all_reaped = true;
    for (auto& c : children) all_reaped = all_reaped && (c.pid < 0 || c.reaped);
    if (all_reaped && fds.empty()) break;

    if (!fds.empty()) {
      int r = ::poll(fds.data(), fds.size(), 20);
      if (r > 0) {
        for (size_t k = 0; k < fds.size(); ++k) {
          if (fds[k].revents == 0) continue;
          bool eof = false;
          drain_reports(*owners[k], &eof);
          if (eof) ::close(std::exchange(owners[k]->report_fd, -1));
        }
      }
    } else {
      ::usleep(5000);
    }

    for (auto& c : children) {
      if (c.pid < 0 || c.reaped) continue;
      int status = 0;
      pid_t r = ::waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid) {
        c.reaped = true;
        c.status = status;
        guard.reaped(c.pid);
        if (child_failed(c) && !grace_end) {
          first_failed = c.name;
          grace_end = Clock::now() + scaled(Millis(3000));
        }
      }
    }
    if (all_reaped && !drain_end) drain_end = Clock::now() + Millis(2000);
    if (drain_end && Clock::now() > *drain_end) {
      // Every child is gone; a report socket still open would be held by a
      // grandchild. Stop listening.
      for (auto& c : children)
        if (c.report_fd >= 0) ::close(std::exchange(c.report_fd, -1));
    }
    if (deadline.expired()) {
      std::ostringstream why;
      why << "still running when the test's " << budget.count() << " ms bound expired";
      kill_rest(why.str());
    } else if (grace_end && Clock::now() > *grace_end) {
      kill_rest("still running 3 s after '" + first_failed + "' failed");
    }
  }

  bool any_failure = false;
  std::string skip_message;
  for (auto& c : children) {
    if (c.pid < 0) continue;
    for (const Report& r : c.reports) {
      if (r.kind == ReportKind::kSkip) {
        if (skip_message.empty()) skip_message = "[" + c.name + "] " + r.message;
        continue;
      }
      any_failure = true;
      const char* file = r.file.empty() ? __FILE__ : r.file.c_str();
      ADD_FAILURE_AT(file, r.line) << "[" << c.name << "] " << r.message;
    }
    if (!c.killed_because.empty()) {
      any_failure = true;
      ADD_FAILURE() << "[" << c.name << "] pid " << c.pid << " killed by the harness: "
                    << c.killed_because;
    } else if (child_failed(c)) {
      any_failure = true;
      ADD_FAILURE() << "[" << c.name << "] pid " << c.pid << " " << describe_wait_status(c.status)
                    << (c.reports.empty() ? " without reporting a failure" : "");
    } else if (c.expect_sigkill && WIFEXITED(c.status)) {
      any_failure = true;
      ADD_FAILURE() << "[" << c.name << "] was expected to be killed with SIGKILL but "
                    << describe_wait_status(c.status);
    }
  }
  if (!any_failure && !skip_message.empty()) {
    GTEST_SKIP() << skip_message;
  }
}

void run_pair(std::string name0, std::function<void(Proc&)> body0, std::string name1,
              std::function<void(Proc&)> body1, const RunOptions& options) {
  std::vector<ProcSpec> procs;
  procs.push_back({std::move(name0), std::move(body0)});
  procs.push_back({std::move(name1), std::move(body1)});
  run_procs(std::move(procs), options);
}

void run_solo(std::string name, std::function<void(Proc&)> body, const RunOptions& options) {
  std::vector<ProcSpec> procs;
  procs.push_back({std::move(name), std::move(body)});
  run_procs(std::move(procs), options);
}

void note(const char* fmt, ...) {
  char line[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  std::fprintf(stderr, "[itest %s:%d] %s\n", g_child_name.empty() ? "parent" : g_child_name.c_str(),
               static_cast<int>(::getpid()), line);
}

const std::string& device_path() {
  static const std::string path = [] {
    if (const char* env = std::getenv("SOFTVERBS_DEVICE_PATH"); env != nullptr && *env != '\0') {
      return std::string(env);
    }
    std::string p = "/dev/shm/softverbs-itest-manual-" + std::to_string(::getpid());
    ::setenv("SOFTVERBS_DEVICE_PATH", p.c_str(), 1);
    return p;
  }();
  return path;
}

bool roce_loopback() {
  const char* v = std::getenv("SOFTVERBS_ITEST_ROCE_LOOPBACK");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

std::vector<std::pair<std::string, std::string>> host_env(int rank) {
  if (!roce_loopback()) return {};
  if (rank < 0 || rank >= kMaxHosts) {
    ADD_FAILURE() << "SOFTVERBS_ITEST_ROCE_LOOPBACK: no host for rank " << rank;
    return {};
  }
  // Linux answers all of 127.0.0.0/8 on lo; nothing leaves the machine.
  return {{"SOFTVERBS_ROCE_ADDR", "127.0.0." + std::to_string(rank + 1)},
          {"SOFTVERBS_DEVICE_PATH", device_path() + "-host" + std::to_string(rank)}};
}

}  // namespace softverbs::integration
