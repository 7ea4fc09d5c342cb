// TCP connection setup, the peer of the RDMA CM's connect step (cmtime).
//   tcp_connect server <addr> <port> <n>    accepts n connections, then waits for each to close
//   tcp_connect client <addr> <port> <n>    opens n connections at once, as cmtime does
// The client prints microseconds per connection: from the first connect()
// until every one is established (the three-way handshake done and accepted
// into the server's queue), divided by n.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "common.h"

namespace {

sockaddr_in address(const char* addr, const char* port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(std::atoi(port)));
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) svbench::die("inet_pton");
  return sa;
}

int serve(const sockaddr_in& sa, int n) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) svbench::die("bind");
  if (listen(ls, n) != 0) svbench::die("listen");
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int fd = accept(ls, nullptr, nullptr);
    if (fd < 0) svbench::die("accept");
    fds.push_back(fd);
  }
  char c;
  for (int fd : fds) {
    while (read(fd, &c, 1) > 0) {
    }
    close(fd);
  }
  close(ls);
  return 0;
}

// One connection, retried while the server is not listening yet.
bool server_listens(const sockaddr_in& sa) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0;
    close(fd);
    if (ok) return true;
    usleep(10000);
  }
  return false;
}

int connect_all(const sockaddr_in& sa, int n) {
  // The probe is one of the server's n connections: n - 1 are timed.
  if (!server_listens(sa)) svbench::die("connect");
  const int timed = n - 1;
  int ep = epoll_create1(0);
  std::vector<int> fds;
  const double start = svbench::now_s();
  for (int i = 0; i < timed; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) svbench::die("socket");
    if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS)
      svbench::die("connect");
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.fd = fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    fds.push_back(fd);
  }
  int pending = timed;
  std::vector<epoll_event> ready(64);
  while (pending > 0) {
    const int got = epoll_wait(ep, ready.data(), int(ready.size()), 10000);
    if (got <= 0) svbench::die("epoll_wait");
    for (int i = 0; i < got; ++i) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(ready[i].data.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        errno = err;
        svbench::die("connect");
      }
      epoll_ctl(ep, EPOLL_CTL_DEL, ready[i].data.fd, nullptr);
      --pending;
    }
  }
  const double elapsed = svbench::now_s() - start;
  for (int fd : fds) close(fd);
  close(ep);
  svbench::result(elapsed / timed * 1e6, "us");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: tcp_connect server|client <addr> <port> <connections>\n");
    return 2;
  }
  const std::string mode = argv[1];
  const sockaddr_in sa = address(argv[2], argv[3]);
  const int n = std::atoi(argv[4]);
  if (n < 2) {
    std::fprintf(stderr, "tcp_connect: at least 2 connections\n");
    return 2;
  }
  return mode == "server" ? serve(sa, n) : connect_all(sa, n);
}
