// Raw UDP round trip, busy-polling both ends.
//   udp_rtt server <addr> <port>            echoes every datagram until killed
//   udp_rtt client <addr> <port> [iters] [bytes]
// The client prints the median round trip in microseconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: udp_rtt server|client <addr> <port> [iters] [bytes]\n");
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
      ssize_t n = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 0) continue;
      sendto(fd, buf, size_t(n), 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }
  const long iters = argc > 4 ? std::atol(argv[4]) : 20000;
  const size_t bytes = argc > 5 ? std::strtoull(argv[5], nullptr, 0) : 8;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) svbench::die("connect");
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
  for (long i = 0; i < iters + iters / 10; ++i) {
    const double t0 = svbench::now_s();
    if (send(fd, buf, bytes, 0) < 0) svbench::die("send");
    for (;;) {
      if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) break;
      if (svbench::now_s() - t0 > 1) break;  // lost: counts as a 1 s outlier
    }
    if (i >= iters / 10) rtt.push_back(svbench::now_s() - t0);
  }
  std::nth_element(rtt.begin(), rtt.begin() + long(rtt.size() / 2), rtt.end());
  svbench::result(rtt[rtt.size() / 2] * 1e6, "us");
  return 0;
}
