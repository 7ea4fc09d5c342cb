// Subnet management packets for the VL15 tests (issue 20), through
// libibumad.so.3's public API only, as any SM or tool would use it.
//   softverbs_mad_flood flood THREADS SECONDS [BURST]
//       THREADS threads, each with its own open port, send NodeInfo SMPs
//       (LID routed to the port itself) for SECONDS, reading whatever
//       answers came; prints how many were sent and answered. Back to back,
//       or BURST at a time at the start of every millisecond, all threads
//       at once (a flood that leaves the cores some time for the data).
//   softverbs_mad_flood rtt COUNT
//       COUNT NodeInfo round trips one after another (send, then wait for
//       the answer); prints the median and the 90th percentile in us.
#include <infiniband/umad.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kMad = 256;
std::atomic<uint64_t> sent{0}, answered{0};

struct Port {
  int fd = -1;
  int agent = -1;
  std::vector<uint8_t> req = std::vector<uint8_t>(umad_size() + kMad);
  std::vector<uint8_t> resp = std::vector<uint8_t>(umad_size() + kMad);
  uint8_t* m = nullptr;

  Port() {
    fd = umad_open_port(nullptr, 0);
    if (fd < 0) {
      std::fprintf(stderr, "umad_open_port: %d\n", fd);
      std::exit(1);
    }
    long mask[16 / sizeof(long)] = {};
    agent = umad_register(fd, 0x01, 1, 0, mask);
    m = static_cast<uint8_t*>(umad_get_mad(req.data()));
    m[0] = 1, m[1] = 0x01, m[2] = 1, m[3] = 0x01;  // SubnGet, LID routed
    m[16] = 0x00, m[17] = 0x11;                    // NodeInfo
    umad_set_addr(req.data(), 0xffff, 0, 0, 0);    // the permissive LID: this port
  }
  ~Port() { umad_close_port(fd); }
};

void flood(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point until, int burst) {
  Port p;
  const int fd = p.fd, agent = p.agent;
  uint8_t* m = p.m;
  std::vector<uint8_t>& req = p.req;
  std::vector<uint8_t>& resp = p.resp;
  uint64_t n = 0, got = 0;
  auto tick = start;
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < (burst > 0 ? burst : 1); ++i) {
      m[15] = static_cast<uint8_t>(n);  // TID
      // No timeout: a dropped SMP is simply not answered.
      if (umad_send(fd, agent, req.data(), kMad, 0, 0) == 0) ++n;
      int len = kMad;
      while (umad_recv(fd, resp.data(), &len, 0) >= 0) {
        ++got;
        len = kMad;
      }
    }
    if (burst > 0) {
      // Every thread's burst starts on the same millisecond.
      tick += std::chrono::milliseconds(1);
      std::this_thread::sleep_until(tick);
    }
  }
  int len = kMad;
  while (umad_recv(fd, resp.data(), &len, 100) >= 0) {
    ++got;
    len = kMad;
  }
  sent += n;
  answered += got;
}

// Round trips one at a time; a lost one (the answer does not come within
// a second) fails.
int rtt(int count) {
  Port p;
  std::vector<double> us;
  for (int i = 0; i < count; ++i) {
    p.m[15] = static_cast<uint8_t>(i);
    const auto t0 = std::chrono::steady_clock::now();
    if (umad_send(p.fd, p.agent, p.req.data(), kMad, 1000, 0) != 0) return 1;
    int len = kMad;
    if (umad_recv(p.fd, p.resp.data(), &len, 2000) < 0 || umad_status(p.resp.data()) != 0) {
      std::fprintf(stderr, "round trip %d: no answer\n", i);
      return 1;
    }
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("median %.1f p90 %.1f\n", us[us.size() / 2], us[us.size() * 9 / 10]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (umad_init() != 0) return 1;
  if (mode == "rtt" && argc == 3 && std::atoi(argv[2]) > 0) return rtt(std::atoi(argv[2]));
  if (mode != "flood" || argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: %s flood THREADS SECONDS [BURST] | rtt COUNT\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[2]);
  const int burst = argc == 5 ? std::atoi(argv[4]) : 0;
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::milliseconds(static_cast<int64_t>(std::atof(argv[3]) * 1000));
  std::vector<std::thread> t;
  for (int i = 0; i < threads; ++i) t.emplace_back(flood, start, until, burst);
  for (auto& x : t) x.join();
  std::printf("sent %llu answered %llu\n", static_cast<unsigned long long>(sent.load()),
              static_cast<unsigned long long>(answered.load()));
  return sent.load() > 0 ? 0 : 1;
}
