// TCP throughput over one connection.
//   tcp_bw server <addr> <port>                       reads one connection to EOF, then exits
//   tcp_bw client <addr> <port> [seconds] [bytes]     writes <bytes> buffers for [seconds]
// The client prints GB/s (10^9), timed until the server has read everything.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: tcp_bw server|client <addr> <port> [seconds] [bytes]\n");
    return 2;
  }
  const std::string mode = argv[1];
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(std::atoi(argv[3])));
  if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) svbench::die("inet_pton");
  std::vector<char> buf(1 << 20, 0x5a);
  if (mode == "server") {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) svbench::die("bind");
    if (listen(ls, 1) != 0) svbench::die("listen");
    int fd = accept(ls, nullptr, nullptr);
    if (fd < 0) svbench::die("accept");
    while (read(fd, buf.data(), buf.size()) > 0) {
    }
    close(fd);
    return 0;
  }
  const double seconds = argc > 4 ? std::atof(argv[4]) : 1.0;
  const size_t bytes = argc > 5 ? std::strtoull(argv[5], nullptr, 0) : (1 << 20);
  if (bytes > buf.size()) buf.resize(bytes, 0x5a);
  int fd = -1;
  for (int attempt = 0;; ++attempt) {  // the server may not listen yet
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) break;
    close(fd);
    if (attempt == 500) svbench::die("connect");
    usleep(10000);
  }
  double total = 0;
  const double start = svbench::now_s();
  while (svbench::now_s() - start < seconds) {
    ssize_t n = write(fd, buf.data(), bytes);
    if (n <= 0) svbench::die("write");
    total += double(n);
  }
  shutdown(fd, SHUT_WR);
  while (read(fd, buf.data(), buf.size()) > 0) {
  }
  const double elapsed = svbench::now_s() - start;
  svbench::result(total / elapsed / 1e9, "GB/s");
  return 0;
}
