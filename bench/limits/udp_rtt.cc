// Raw UDP round trip between two processes, one thread each.
//   udp_rtt [--block] server <addr> <port>            echoes every datagram until killed
//   udp_rtt [--block] client <addr> <port> [iters] [bytes]
// The client prints the median round trip in microseconds.
//
// Busy (the default): both ends spin on MSG_DONTWAIT reads, the limit for a
// RoCE ping-pong whose application threads poll the CQ (ib_send_lat), where
// the polling thread takes the datagram itself. --block: both ends sleep in
// recv until the kernel wakes them, so every half round trip includes a
// wake-up: the limit for a RoCE ping-pong whose application never calls into
// the library between messages (ib_write_lat spins on memory), where a
// library thread blocked in the kernel must receive each datagram.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

namespace {

sockaddr_in address(const char* addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) svbench::die("inet_pton");
  return sa;
}

// One datagram into buf; false if none came within a second (a lost one).
bool receive(int fd, char* buf, size_t size, bool block, double t0) {
  if (block) return recv(fd, buf, size, 0) > 0;  // SO_RCVTIMEO bounds the wait
  for (;;) {
    if (recv(fd, buf, size, MSG_DONTWAIT) > 0) return true;
    if (svbench::now_s() - t0 > 1) return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool block = false;
  if (argc > 1 && std::strcmp(argv[1], "--block") == 0) {
    block = true;
    --argc;
    ++argv;
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: udp_rtt [--block] server|client <addr> <port> [iters] [bytes]\n");
    return 2;
  }
  const std::string mode = argv[1];
  sockaddr_in sa = address(argv[2], std::atoi(argv[3]));
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) svbench::die("socket");
  char buf[65536];
  if (mode == "server") {
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) svbench::die("bind");
    for (;;) {
      sockaddr_in from{};
      socklen_t len = sizeof from;
      ssize_t n = recvfrom(fd, buf, sizeof buf, block ? 0 : MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 0) continue;
      sendto(fd, buf, size_t(n), 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }
  const long iters = argc > 4 ? std::atol(argv[4]) : 20000;
  const size_t bytes = argc > 5 ? std::strtoull(argv[5], nullptr, 0) : 8;
  if (bytes == 0 || bytes > sizeof buf) {
    std::fprintf(stderr, "udp_rtt: bytes must be 1 .. %zu\n", sizeof buf);
    return 2;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) svbench::die("connect");
  const timeval one_second{1, 0};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &one_second, sizeof one_second) != 0) svbench::die("SO_RCVTIMEO");
  std::memset(buf, 0x5a, bytes);
  // Until the server answers (it may not be bound yet), resend every 10 ms.
  const double give_up = svbench::now_s() + 10;
  for (bool answered = false; !answered;) {
    send(fd, buf, bytes, 0);
    const double resend = svbench::now_s() + 0.01;
    while (svbench::now_s() < resend) {
      if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
        answered = true;
        break;
      }
    }
    if (svbench::now_s() > give_up) {
      std::fprintf(stderr, "udp_rtt: no answer from the server\n");
      return 1;
    }
  }
  std::vector<double> rtt;
  rtt.reserve(size_t(iters));
  // On a loaded machine a busy-polling pair may run far slower than usual
  // (each end waits for the scheduler): stop after 10 s with what was taken,
  // inside bench/run.py's 30 s bound.
  const double stop = svbench::now_s() + 10;
  for (long i = 0; i < iters + iters / 10 && (rtt.size() < 100 || svbench::now_s() < stop); ++i) {
    const double t0 = svbench::now_s();
    if (send(fd, buf, bytes, 0) < 0) svbench::die("send");
    receive(fd, buf, sizeof buf, block, t0);  // a lost one counts as a ~1 s outlier
    if (i >= iters / 10) rtt.push_back(svbench::now_s() - t0);
  }
  if (rtt.empty()) {
    std::fprintf(stderr, "udp_rtt: no round trips measured (iters %ld)\n", iters);
    return 1;
  }
  std::nth_element(rtt.begin(), rtt.begin() + long(rtt.size() / 2), rtt.end());
  svbench::result(rtt[rtt.size() / 2] * 1e6, "us");
  return 0;
}
