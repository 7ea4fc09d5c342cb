// An ordinary TCP echo pair, for Debian's librspreload (LD_PRELOAD) over our
// librdmacm.so.1: nothing here knows of rsockets. Each side reports whether
// its connected socket is one (getsockopt(SOL_RDMA) succeeds only on an
// rsocket; the kernel's TCP says ENOPROTOOPT), and the client checks every
// byte that comes back.
//   socket_echo server <addr> <port>
//   socket_echo client <addr> <port> <bytes>
// Exit 0 when all went well.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

bool on_rsocket(int fd) {
  int v = 0;
  socklen_t len = sizeof v;
  return getsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, &len) == 0;
}

int resolve(const char* addr, const char* port, sockaddr_storage* out, socklen_t* len) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* ai = nullptr;
  if (getaddrinfo(addr, port, &hints, &ai) != 0 || ai == nullptr) return -1;
  std::memcpy(out, ai->ai_addr, ai->ai_addrlen);
  *len = ai->ai_addrlen;
  const int family = ai->ai_family;
  freeaddrinfo(ai);
  return family;
}

int server(const char* addr, const char* port) {
  sockaddr_storage sa{};
  socklen_t len = 0;
  const int family = resolve(addr, port, &sa, &len);
  const int l = socket(family, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(l, 1) != 0) {
    std::perror("server: socket/bind/listen");
    return 1;
  }
  std::printf("server: listening (rsocket %d)\n", on_rsocket(l));
  std::fflush(stdout);
  const int c = accept(l, nullptr, nullptr);
  if (c < 0) {
    std::perror("server: accept");
    return 1;
  }
  std::vector<char> buf(65536);
  long total = 0;
  for (;;) {
    const ssize_t n = read(c, buf.data(), buf.size());
    if (n < 0) {
      std::perror("server: read");
      return 1;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = write(c, buf.data() + off, size_t(n - off));
      if (w <= 0) {
        std::perror("server: write");
        return 1;
      }
      off += w;
    }
    total += n;
  }
  std::printf("server: echoed %ld bytes (rsocket %d)\n", total, on_rsocket(c));
  close(c);
  close(l);
  return 0;
}

int client(const char* addr, const char* port, long bytes) {
  sockaddr_storage sa{};
  socklen_t len = 0;
  const int family = resolve(addr, port, &sa, &len);
  int s = -1;
  // The server may not listen yet: a refused connect is retried.
  for (int tries = 0; tries < 100; ++tries) {
    s = socket(family, SOCK_STREAM, 0);
    if (connect(s, reinterpret_cast<sockaddr*>(&sa), len) == 0) break;
    if (errno != ECONNREFUSED) {
      std::perror("client: connect");
      return 1;
    }
    close(s);
    s = -1;
    usleep(100000);
  }
  if (s < 0) {
    std::fprintf(stderr, "client: nobody listens\n");
    return 1;
  }
  const bool rs = on_rsocket(s);
  std::vector<unsigned char> out(static_cast<size_t>(bytes)), in(static_cast<size_t>(bytes));
  for (long i = 0; i < bytes; ++i) out[size_t(i)] = static_cast<unsigned char>(i * 131 + i / 4093);
  long sent = 0, got = 0;
  bool shut = false;
  // Both directions at once through poll(), as an event loop would.
  while (got < bytes) {
    pollfd p{s, short(POLLIN | (sent < bytes ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 10000) <= 0) {
      std::fprintf(stderr, "client: poll timed out or failed (sent %ld, got %ld)\n", sent, got);
      return 1;
    }
    if ((p.revents & POLLOUT) != 0 && sent < bytes) {
      const ssize_t w = send(s, out.data() + sent, size_t(std::min<long>(bytes - sent, 30000)), MSG_DONTWAIT);
      if (w > 0) sent += w;
      if (w < 0 && errno != EAGAIN) {
        std::perror("client: send");
        return 1;
      }
    }
    if ((p.revents & POLLIN) != 0) {
      const ssize_t r = recv(s, in.data() + got, size_t(bytes - got), MSG_DONTWAIT);
      if (r == 0) break;
      if (r > 0) got += r;
      if (r < 0 && errno != EAGAIN) {
        std::perror("client: recv");
        return 1;
      }
    }
    if (sent == bytes && !shut) {
      shutdown(s, SHUT_WR);
      shut = true;
    }
  }
  char extra;
  const ssize_t eof = recv(s, &extra, 1, 0);
  close(s);
  if (got != bytes || std::memcmp(in.data(), out.data(), size_t(bytes)) != 0 || eof != 0) {
    std::fprintf(stderr, "client: %ld of %ld bytes came back, %s, end of file %zd\n", got, bytes,
                 got == bytes ? "corrupted" : "short", eof);
    return 1;
  }
  std::printf("client: %ld bytes echoed and verified (rsocket %d)\n", bytes, rs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "server") == 0) return server(argv[2], argv[3]);
  if (argc == 5 && std::strcmp(argv[1], "client") == 0) return client(argv[2], argv[3], std::atol(argv[4]));
  std::fprintf(stderr, "usage: %s server <addr> <port> | client <addr> <port> <bytes>\n", argv[0]);
  return 2;
}
