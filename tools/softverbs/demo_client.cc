// softverbs-demo, client process: starts the server, connects an RC QP pair,
// walks through SEND/RECV, RDMA WRITE, READ and atomics with the data checked
// on the side that receives it, then measures latency and bandwidth.
//
// Every exit path kills and reaps the server by PID: ServerProcess's
// destructor on returns, the signal handler on SIGALRM (the 60 s watchdog),
// SIGINT, SIGTERM and SIGHUP; PR_SET_PDEATHSIG covers a crash of the client.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "demo_endpoint.h"
#include "demo_protocol.h"
#include "demo_roles.h"

namespace softverbs::demo {

namespace {

constexpr int kHandshakeTimeoutMs = 10'000;
constexpr int64_t kMeasureCapNs = 2'000'000'000;  // each measurement stops early after 2 s

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// One output line: "LABEL         WHAT                      RESULT".
void row(const char* label, const std::string& what, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void row(const char* label, const std::string& what, const char* fmt, ...) {
  std::printf("%-14s%-28s", label, what.c_str());
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::printf("\n");
}

std::string size_text(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) {
    std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>(bytes >> 20));
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    std::snprintf(buf, sizeof buf, "%llu KiB", static_cast<unsigned long long>(bytes >> 10));
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

std::string sized(uint32_t len, uint32_t imm, bool with_imm) {
  char buf[48];
  if (with_imm) {
    std::snprintf(buf, sizeof buf, "%u B, imm 0x%08x", len, imm);
  } else {
    std::snprintf(buf, sizeof buf, "%u B", len);
  }
  return buf;
}

Status in_step(const char* step, const Status& s) {
  return s.is_ok() ? s : Status::fail("%s: %s", step, s.message().c_str());
}

// --- The server process --------------------------------------------------------

// The PID the signal handler kills; 0 when there is none (or it is reaped).
std::atomic<pid_t> g_server_pid{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "used from a signal handler");

void kill_server_and_exit(int sig) {
  const char* msg = sig == SIGALRM
                        ? "\ndemo: FAILED: watchdog: the demo ran past its time limit; killing the server\n"
                        : "\ndemo: interrupted; killing the server\n";
  ssize_t ignored = write(STDERR_FILENO, msg, std::strlen(msg));
  (void)ignored;
  pid_t pid = g_server_pid.load();
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  _exit(sig == SIGALRM ? 124 : 128 + sig);
}

void install_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = kill_server_and_exit;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGALRM, SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// Blocks the handled signals while a reap and its bookkeeping happen, so the
// handler never kills a PID that was already reaped (and maybe reused).
class SignalBlock {
 public:
  SignalBlock() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGALRM, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    sigprocmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalBlock() { sigprocmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

class ServerProcess {
 public:
  ServerProcess() = default;
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() {
    if (pid_ > 0) (void)reap(/*kill_first=*/true);
    if (fd_ >= 0) close(fd_);
  }

  // fork + exec of this program as `--serve-fd N`; *fd is the client's end.
  Status spawn(const DemoConfig& config) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return Status::fail("socketpair: %s", std::strerror(errno));
    }
    // Everything exec needs is built before fork: the child only calls async-signal-safe functions.
    std::vector<std::string> args = {"softverbs-demo",    "--serve-fd", std::to_string(sv[1]),
                                     "--device",          config.device, "--ib-port",
                                     std::to_string(config.port), "--size", std::to_string(config.size)};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = '\0';
    } else {
      std::snprintf(self, sizeof self, "/proc/self/exe");
    }
    pid_t parent = getpid();
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
      int err = errno;
      close(sv[0]);
      close(sv[1]);
      return Status::fail("fork: %s", std::strerror(err));
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // the server never outlives the client
      if (getppid() != parent) _exit(1);
      fcntl(sv[1], F_SETFD, 0);          // keep the server's end across exec
      execv(self, argv.data());
      _exit(127);
    }
    g_server_pid.store(pid);
    pid_ = pid;
    close(sv[1]);
    fd_ = sv[0];
    return Status::ok();
  }

  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }

  // Waits up to timeout_ms for the server to exit by itself (then kills it);
  // fails unless it exited with status 0.
  Status finish(int timeout_ms) {
    int64_t deadline = now_ns() + int64_t{timeout_ms} * 1'000'000;
    while (now_ns() < deadline) {
      int status = 0;
      {
        SignalBlock block;
        pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_ || (r < 0 && errno == ECHILD)) {
          g_server_pid.store(0);
          pid_ = 0;
          if (r < 0) return Status::fail("server process vanished");
          if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::ok();
          if (WIFEXITED(status)) return Status::fail("server exited with status %d", WEXITSTATUS(status));
          return Status::fail("server was killed by signal %d", WTERMSIG(status));
        }
      }
      usleep(5000);
    }
    (void)reap(/*kill_first=*/true);
    return Status::fail("server did not exit within %d ms; killed it", timeout_ms);
  }

 private:
  Status reap(bool kill_first) {
    SignalBlock block;
    if (kill_first) kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    g_server_pid.store(0);
    pid_ = 0;
    return Status::ok();
  }

  pid_t pid_ = 0;
  int fd_ = -1;
};

// --- The steps -------------------------------------------------------------------

struct Session {
  const DemoConfig& config;
  Endpoint& ep;
  Channel& ch;
};

Command make(Op op, uint64_t offset = 0, uint32_t len = 0, uint64_t seed = 0, uint64_t value = 0,
             uint32_t flags = 0) {
  Command c;
  c.flags = flags;
  c.op = op;
  c.offset = offset;
  c.len = len;
  c.seed = seed;
  c.value = value;
  return c;
}

Status call(Session& s, const Command& cmd, Reply* reply = nullptr) {
  Reply local;
  return s.ch.call(cmd, reply != nullptr ? reply : &local, kOpTimeoutMs + 2000);
}

// Posts one signaled WR and waits for its completion, checking the opcode.
Status post_and_wait(Session& s, const SendRequest& req, ibv_wc_opcode want, const char* what) {
  DEMO_TRY(s.ep.post_send(req));
  ibv_wc wc;
  DEMO_TRY(s.ep.wait_send(&wc, kOpTimeoutMs, what));
  if (wc.opcode != want || wc.wr_id != req.wr_id) {
    return Status::fail("%s: completion has opcode %d wr_id %llu, expected opcode %d wr_id %llu", what,
                        static_cast<int>(wc.opcode), static_cast<unsigned long long>(wc.wr_id),
                        static_cast<int>(want), static_cast<unsigned long long>(req.wr_id));
  }
  return Status::ok();
}

Status step_send(Session& s, bool with_imm) {
  const char* name = with_imm ? "SEND+IMM" : "SEND";
  size_t area = with_imm ? kSendImmArea : kSendArea;
  uint64_t seed = with_imm ? 2 : 1;
  uint32_t imm = 0x5eedf00d;
  DEMO_TRY(call(s, make(Op::kPostRecv, area, kArea, 0, /*wr_id=*/area)));
  fill_pattern(s.ep.buffer() + area, kCheckLen, seed);
  SendRequest req;
  req.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  req.local_offset = area;
  req.length = kCheckLen;
  req.imm = imm;
  req.wr_id = 100 + area;
  DEMO_TRY(post_and_wait(s, req, IBV_WC_SEND, name));
  Command expect = make(Op::kExpectRecv, area, kCheckLen, seed, /*wr_id=*/area, kCheckGuard);
  if (with_imm) {
    expect.flags |= kExpectImm;
    expect.imm = imm;
  }
  Reply r;
  DEMO_TRY(call(s, expect, &r));
  if (with_imm) {
    row(name, sized(kCheckLen, imm, true), "-> server: RECV completion, %llu B, imm 0x%08llx, data verified",
        static_cast<unsigned long long>(r.v1), static_cast<unsigned long long>(r.v2));
  } else {
    row(name, sized(kCheckLen, 0, false), "-> server: RECV completion, %llu B, data verified",
        static_cast<unsigned long long>(r.v1));
  }
  return Status::ok();
}

Status step_write(Session& s, bool with_imm) {
  const char* name = with_imm ? "WRITE+IMM" : "RDMA WRITE";
  size_t area = with_imm ? kWriteImmArea : kWriteArea;
  uint64_t seed = with_imm ? 4 : 3;
  uint32_t imm = 0xfeedbeef;
  // WRITE_WITH_IMM consumes a receive WQE at the target; its buffer stays untouched.
  if (with_imm) DEMO_TRY(call(s, make(Op::kPostRecv, kSendImmArea, kArea, 0, /*wr_id=*/area)));
  fill_pattern(s.ep.buffer() + area, kCheckLen, seed);
  SendRequest req;
  req.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  req.local_offset = area;
  req.remote_offset = area;
  req.length = kCheckLen;
  req.imm = imm;
  req.wr_id = 100 + area;
  DEMO_TRY(post_and_wait(s, req, IBV_WC_RDMA_WRITE, name));
  if (with_imm) {
    Command expect = make(Op::kExpectRecv, area, kCheckLen, seed, /*wr_id=*/area, kCheckGuard);
    expect.flags |= kExpectImm | kExpectWriteImm;
    expect.imm = imm;
    Reply r;
    DEMO_TRY(call(s, expect, &r));
    row(name, sized(kCheckLen, imm, true),
        "-> server: RECV_RDMA_WITH_IMM completion, imm 0x%08llx, memory verified",
        static_cast<unsigned long long>(r.v2));
  } else {
    DEMO_TRY(call(s, make(Op::kCheckMem, area, kCheckLen, seed, 0, kCheckGuard)));
    row(name, sized(kCheckLen, 0, false), "-> server memory 0x%llx: verified by the server",
        static_cast<unsigned long long>(s.ep.peer().addr + area));
  }
  return Status::ok();
}

Status step_read(Session& s) {
  uint64_t seed = 5;
  DEMO_TRY(call(s, make(Op::kFill, kReadArea, kCheckLen, seed)));
  std::memset(s.ep.buffer() + kReadArea, kPoison, kArea);
  SendRequest req;
  req.opcode = IBV_WR_RDMA_READ;
  req.local_offset = kReadArea;
  req.remote_offset = kReadArea;
  req.length = kCheckLen;
  req.wr_id = 100 + kReadArea;
  DEMO_TRY(post_and_wait(s, req, IBV_WC_RDMA_READ, "RDMA READ"));
  DEMO_TRY(check_pattern(s.ep.buffer() + kReadArea, kCheckLen, seed, kGuard, "client read buffer"));
  row("RDMA READ", sized(kCheckLen, 0, false), "<- server memory 0x%llx: data verified",
      static_cast<unsigned long long>(s.ep.peer().addr + kReadArea));
  return Status::ok();
}

// One atomic on the server's word; *old gets the value it returned.
Status atomic_op(Session& s, ibv_wr_opcode op, uint64_t compare_add, uint64_t swap, uint64_t* old) {
  bool fadd = op == IBV_WR_ATOMIC_FETCH_AND_ADD;
  std::memset(s.ep.buffer() + kAtomicArea, kPoison, 8);
  SendRequest req;
  req.opcode = op;
  req.local_offset = kAtomicArea;
  req.remote_offset = kAtomicArea;
  req.length = 8;
  req.compare_add = compare_add;
  req.swap = swap;
  req.wr_id = 100 + kAtomicArea;
  DEMO_TRY(post_and_wait(s, req, fadd ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP,
                         fadd ? "FETCH_AND_ADD" : "CMP_AND_SWP"));
  std::memcpy(old, s.ep.buffer() + kAtomicArea, 8);
  return Status::ok();
}

Status server_word(Session& s, uint64_t* value) {
  Reply r;
  DEMO_TRY(call(s, make(Op::kGetU64, kAtomicArea), &r));
  *value = r.v1;
  return Status::ok();
}

Status step_atomics(Session& s) {
  if (s.ep.device_attr().atomic_cap == IBV_ATOMIC_NONE) {
    return Status::fail("the device reports atomic_cap IBV_ATOMIC_NONE");
  }
  struct Case {
    ibv_wr_opcode op;
    uint64_t compare_add, swap, want_old, want_new;
  };
  const Case cases[] = {
      {IBV_WR_ATOMIC_FETCH_AND_ADD, 23, 0, 100, 123},
      {IBV_WR_ATOMIC_CMP_AND_SWP, 123, 999, 123, 999},  // compare matches: swapped
      {IBV_WR_ATOMIC_CMP_AND_SWP, 5, 7, 999, 999},      // compare differs: unchanged
  };
  DEMO_TRY(call(s, make(Op::kSetU64, kAtomicArea, 0, 0, /*value=*/100)));
  for (const Case& c : cases) {
    uint64_t old = 0, now = 0;
    DEMO_TRY(atomic_op(s, c.op, c.compare_add, c.swap, &old));
    DEMO_TRY(server_word(s, &now));
    bool fadd = c.op == IBV_WR_ATOMIC_FETCH_AND_ADD;
    char what[64];
    if (fadd) {
      std::snprintf(what, sizeof what, "FETCH_AND_ADD +%llu", static_cast<unsigned long long>(c.compare_add));
    } else {
      std::snprintf(what, sizeof what, "CMP_AND_SWP %llu->%llu", static_cast<unsigned long long>(c.compare_add),
                    static_cast<unsigned long long>(c.swap));
    }
    if (old != c.want_old || now != c.want_new) {
      return Status::fail("%s: returned old %llu and left %llu in server memory; expected old %llu, new %llu",
                          what, static_cast<unsigned long long>(old), static_cast<unsigned long long>(now),
                          static_cast<unsigned long long>(c.want_old), static_cast<unsigned long long>(c.want_new));
    }
    const char* note = fadd ? "" : (old == c.compare_add ? "  (equal: swapped)" : "  (not equal: unchanged)");
    row(fadd ? "ATOMIC" : "", what, "old %llu, server memory now %llu%s", static_cast<unsigned long long>(old),
        static_cast<unsigned long long>(now), note);
  }
  return Status::ok();
}

// 8-byte SEND ping-pong; one-way latency = round trip / 2.
Status measure_latency(Session& s) {
  Endpoint& ep = s.ep;
  for (int slot = 0; slot < kPingDepth; ++slot) {
    DEMO_TRY(ep.post_recv(kPingRecvArea + slot * kPingSlot, kPingSlot, static_cast<uint64_t>(slot)));
  }
  DEMO_TRY(call(s, make(Op::kPingPong)));  // the server's receives are posted once it answers
  uint64_t warmup = std::min<uint64_t>(100, s.config.iters);
  uint64_t total = warmup + s.config.iters;
  std::vector<int64_t> rtt;
  rtt.reserve(s.config.iters);
  uint32_t outstanding = 0;
  ibv_wc wc[16];
  auto send_value = [&](uint64_t i, uint64_t value) -> Status {
    while (outstanding >= static_cast<uint32_t>(kPingDepth)) {
      ibv_wc swc;
      DEMO_TRY(ep.wait_send(&swc, kOpTimeoutMs, "ping send"));
      --outstanding;
    }
    size_t off = kPingSendArea + (i % kPingDepth) * kPingSlot;
    std::memcpy(ep.buffer() + off, &value, sizeof value);
    SendRequest req;
    req.opcode = IBV_WR_SEND;
    req.local_offset = off;
    req.length = sizeof value;
    req.wr_id = i;
    DEMO_TRY(ep.post_send(req));
    ++outstanding;
    return Status::ok();
  };
  int64_t start = now_ns();
  uint64_t i = 0;
  for (; i < total; ++i) {
    if (!rtt.empty() && now_ns() - start > kMeasureCapNs) break;
    int64_t t0 = now_ns();
    DEMO_TRY(send_value(i, i));
    ibv_wc rwc;
    DEMO_TRY(ep.wait_recv(&rwc, kOpTimeoutMs, "pong receive"));
    int64_t t1 = now_ns();
    uint64_t got;
    std::memcpy(&got, ep.buffer() + kPingRecvArea + rwc.wr_id * kPingSlot, sizeof got);
    if (rwc.byte_len != sizeof got || got != i) {
      return Status::fail("pong %llu: received %u bytes holding %llu", static_cast<unsigned long long>(i),
                          rwc.byte_len, static_cast<unsigned long long>(got));
    }
    DEMO_TRY(ep.post_recv(kPingRecvArea + rwc.wr_id * kPingSlot, kPingSlot, rwc.wr_id));
    int n = ep.poll_send(wc, 16);
    if (n < 0) return Status::fail("ibv_poll_cq: %d", n);
    for (int k = 0; k < n; ++k) {
      if (wc[k].status != IBV_WC_SUCCESS) return Status::fail("ping send: %s", describe(wc[k]).c_str());
    }
    outstanding -= static_cast<uint32_t>(n);
    if (i >= warmup) rtt.push_back(t1 - t0);
  }
  DEMO_TRY(send_value(i, kPingStop));
  while (outstanding > 0) {
    ibv_wc swc;
    DEMO_TRY(ep.wait_send(&swc, kOpTimeoutMs, "ping send"));
    --outstanding;
  }
  Reply done;
  DEMO_TRY(s.ch.recv(&done, kOpTimeoutMs));
  if (done.ok == 0) return Status::fail("server: %s", done.message);
  if (done.v1 != i) {
    return Status::fail("the server echoed %llu pings, the client sent %llu",
                        static_cast<unsigned long long>(done.v1), static_cast<unsigned long long>(i));
  }
  std::sort(rtt.begin(), rtt.end());
  size_t n = rtt.size();
  double median_us = rtt[n / 2] / 2.0 / 1000.0;
  size_t p99_index = std::min(n - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(n))) - 1);
  double p99_us = rtt[p99_index] / 2.0 / 1000.0;
  row("latency", "8 B SEND ping-pong", "one-way (RTT/2) median %.2f us, p99 %.2f us over %zu round trips%s",
      median_us, p99_us, n, n < s.config.iters ? " (time-capped)" : "");
  return Status::ok();
}

// Keeps up to `window` RDMA WRITEs of `len` bytes in flight, every `interval`-th
// signaled, until `target` have completed or the time cap; *done, *ns report.
Status stream_writes(Session& s, uint32_t len, uint64_t target, uint32_t window, uint32_t interval,
                     bool spread, uint64_t* done, int64_t* ns) {
  Endpoint& ep = s.ep;
  uint64_t posted = 0, completed = 0;
  bool capped = false;
  ibv_wc wc[16];
  int64_t start = now_ns(), last_progress = start;
  while (completed < posted || (!capped && posted < target)) {
    while (!capped && posted < target && posted - completed < window) {
      SendRequest req;
      req.opcode = IBV_WR_RDMA_WRITE;
      req.length = len;
      if (spread) req.local_offset = req.remote_offset = (posted % 64) * len;
      req.wr_id = posted;
      req.signaled = (posted + 1) % interval == 0;
      DEMO_TRY(ep.post_send(req));
      ++posted;
    }
    int n = ep.poll_send(wc, 16);
    if (n < 0) return Status::fail("ibv_poll_cq: %d", n);
    int64_t t = now_ns();
    for (int k = 0; k < n; ++k) {
      if (wc[k].status != IBV_WC_SUCCESS) return Status::fail("RDMA WRITE: %s", describe(wc[k]).c_str());
      completed += interval;
    }
    if (n > 0) {
      last_progress = t;
    } else if (t - last_progress > int64_t{kOpTimeoutMs} * 1'000'000) {
      return Status::fail("no completion within %d ms (%llu of %llu done)", kOpTimeoutMs,
                          static_cast<unsigned long long>(completed), static_cast<unsigned long long>(posted));
    }
    // Stop posting after the cap, at a signaled boundary (posted is a multiple of interval).
    if (!capped && t - start > kMeasureCapNs && posted % interval == 0) capped = true;
  }
  *done = completed;
  *ns = now_ns() - start;
  return Status::ok();
}

Status measure_bandwidth(Session& s) {
  uint32_t len = static_cast<uint32_t>(s.config.size);
  fill_pattern(s.ep.buffer(), len, 7);
  uint32_t window = std::min<uint32_t>(16, s.ep.max_send_wr());
  uint64_t done = 0;
  int64_t ns = 1;
  DEMO_TRY(stream_writes(s, len, s.config.iters, window, 1, false, &done, &ns));
  DEMO_TRY(call(s, make(Op::kCheckMem, 0, len, 7)));
  double gbps = static_cast<double>(done) * len / static_cast<double>(ns);  // bytes/ns = GB/s
  row("bandwidth", "RDMA WRITE " + size_text(len), "%.2f GB/s: %llu writes in %.2f ms%s, data verified",
      gbps, static_cast<unsigned long long>(done), ns / 1e6, done < s.config.iters ? " (time-capped)" : "");
  return Status::ok();
}

Status measure_message_rate(Session& s) {
  uint32_t max_wr = s.ep.max_send_wr();
  uint32_t interval = std::min<uint32_t>(16, max_wr);
  uint32_t window = std::max(interval, std::min<uint32_t>(128, max_wr) / interval * interval);
  uint64_t target = (s.config.iters * 100 + interval - 1) / interval * interval;
  uint64_t done = 0;
  int64_t ns = 1;
  DEMO_TRY(stream_writes(s, 64, target, window, interval, true, &done, &ns));
  double mmps = static_cast<double>(done) / static_cast<double>(ns) * 1e3;
  row("message rate", "RDMA WRITE 64 B", "%.2f Mmsg/s: %llu writes, %u in flight, 1 in %u signaled%s", mmps,
      static_cast<unsigned long long>(done), window, interval, done < target ? " (time-capped)" : "");
  return Status::ok();
}

Status client_main(const DemoConfig& config) {
  std::printf("softverbs demo: two processes, one RC QP each, on %s port %d\n", config.device.c_str(),
              config.port);
  std::printf("  libibverbs   %s\n", loaded_libibverbs().c_str());
  DEMO_TRY(find_device(config.device));

  ServerProcess server;
  DEMO_TRY(in_step("start server", server.spawn(config)));
  Channel ch(server.fd());
  std::unique_ptr<Endpoint> ep;
  DEMO_TRY(in_step("client setup", Endpoint::open(config.device, config.port, config.size, &ep)));
  ep->watch_peer(server.fd());
  const ibv_port_attr& port = ep->port_attr();
  std::printf("  device       %s: port %d ACTIVE, LID %u, MTU %d, %s link, atomic_cap %s\n",
              config.device.c_str(), config.port, port.lid, 128 << port.active_mtu,
              port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
              ep->device_attr().atomic_cap == IBV_ATOMIC_HCA    ? "HCA"
              : ep->device_attr().atomic_cap == IBV_ATOMIC_GLOB ? "GLOB"
                                                                : "NONE");
  std::printf("  processes    client pid %d, server pid %d\n", getpid(), server.pid());

  Hello hello;
  DEMO_TRY(in_step("server setup", ch.recv(&hello, kHandshakeTimeoutMs)));
  hello.status.message[sizeof hello.status.message - 1] = '\0';
  if (hello.status.ok == 0) return Status::fail("server setup: %s", hello.status.message);
  DEMO_TRY(in_step("connect", ch.send(ep->info())));
  DEMO_TRY(in_step("connect", ep->connect(hello.info)));
  Reply connected;
  DEMO_TRY(in_step("connect", ch.recv(&connected, kHandshakeTimeoutMs)));
  connected.message[sizeof connected.message - 1] = '\0';
  if (connected.ok == 0) return Status::fail("connect: server: %s", connected.message);
  EndpointInfo me = ep->info();
  char qps[64];
  std::snprintf(qps, sizeof qps, "RC QP 0x%06x <-> 0x%06x", me.qpn, hello.info.qpn);
  row("connect", qps, "LID %u <-> %u, PSN 0x%06x/0x%06x, both RTS", me.lid, hello.info.lid, me.psn,
      hello.info.psn);
  row("", "server MR", "%s at 0x%llx, rkey 0x%08x", size_text(hello.info.size).c_str(),
      static_cast<unsigned long long>(hello.info.addr), hello.info.rkey);

  Session s{config, *ep, ch};
  DEMO_TRY(in_step("SEND", step_send(s, false)));
  DEMO_TRY(in_step("SEND_WITH_IMM", step_send(s, true)));
  DEMO_TRY(in_step("RDMA WRITE", step_write(s, false)));
  DEMO_TRY(in_step("RDMA WRITE_WITH_IMM", step_write(s, true)));
  DEMO_TRY(in_step("RDMA READ", step_read(s)));
  DEMO_TRY(in_step("ATOMIC", step_atomics(s)));
  DEMO_TRY(in_step("latency", measure_latency(s)));
  DEMO_TRY(in_step("bandwidth", measure_bandwidth(s)));
  DEMO_TRY(in_step("message rate", measure_message_rate(s)));

  DEMO_TRY(in_step("teardown", call(s, make(Op::kQuit))));
  DEMO_TRY(in_step("teardown", ep->close()));
  DEMO_TRY(in_step("teardown", server.finish(kOpTimeoutMs)));
  row("teardown", "both processes", "QP, MR, CQs, PD, context destroyed; server exited 0");
  return Status::ok();
}

}  // namespace

int run_client(const DemoConfig& config) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  install_handlers();
  alarm(kWatchdogSeconds);
  Status s = client_main(config);
  std::fflush(stdout);
  if (!s.is_ok()) {
    std::fprintf(stderr, "demo: FAILED: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("demo: all checks passed\n");
  return 0;
}

}  // namespace softverbs::demo
