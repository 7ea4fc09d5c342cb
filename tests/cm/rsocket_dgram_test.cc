// Datagram rsockets (SOCK_DGRAM over UD) in one process on softverbs0,
// through our librdmacm.so.1: rsendto/rrecvfrom between two rsockets (the
// first datagram over UDP, the rest over UD), connected rsend/rrecv, the
// size limit, rpoll, truncation and peeking, options and names, and close
// with datagrams still queued.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

uint16_t next_port() {
  static uint16_t port = static_cast<uint16_t>(20000 + getpid() % 20000);
  return port++;
}

sockaddr_storage loopback(int family, uint16_t port) {
  sockaddr_storage ss{};
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    a->sin6_addr = in6addr_loopback;
  }
  return ss;
}

socklen_t len_of(const sockaddr_storage& ss) {
  return ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t port_of(const sockaddr_storage& ss) {
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(ss).sin6_port
                                        : reinterpret_cast<const sockaddr_in&>(ss).sin_port);
}

// Two datagram rsockets bound to loopback addresses of `family`.
struct Two {
  int a = -1, b = -1;
  sockaddr_storage addr_a{}, addr_b{};
  explicit Two(int family) {
    a = rsocket(family, SOCK_DGRAM, 0);
    b = rsocket(family, SOCK_DGRAM, IPPROTO_UDP);
    EXPECT_GE(a, 0) << strerror(errno);
    EXPECT_GE(b, 0) << strerror(errno);
    addr_a = loopback(family, next_port());
    addr_b = loopback(family, next_port());
    EXPECT_EQ(rbind(a, reinterpret_cast<sockaddr*>(&addr_a), len_of(addr_a)), 0) << strerror(errno);
    EXPECT_EQ(rbind(b, reinterpret_cast<sockaddr*>(&addr_b), len_of(addr_b)), 0) << strerror(errno);
  }
  ~Two() {
    if (a >= 0) rclose(a);
    if (b >= 0) rclose(b);
  }
};

// A blocking receive with a bound: rpoll first, so a lost datagram fails
// the test instead of hanging it.
ssize_t recv_within(int s, void* buf, size_t len, sockaddr_storage* from, int ms = 5000) {
  pollfd p{s, POLLIN, 0};
  const int n = rpoll(&p, 1, ms);
  if (n != 1) {
    errno = n == 0 ? ETIMEDOUT : errno;
    return -1;
  }
  socklen_t flen = sizeof *from;
  return rrecvfrom(s, buf, len, 0, reinterpret_cast<sockaddr*>(from), &flen);
}

void exchange(int family) {
  Two t(family);
  // The first datagram goes over UDP (b's QPN is not known yet), b answers
  // with its QPN, and later ones go over UD; the data and source are the
  // same either way.
  for (int i = 0; i < 50; ++i) {
    const std::string ping = "ping " + std::to_string(i) + std::string(size_t(i) * 30, char('a' + i % 26));
    ASSERT_EQ(rsendto(t.a, ping.data(), ping.size(), 0, reinterpret_cast<sockaddr*>(&t.addr_b), len_of(t.addr_b)),
              ssize_t(ping.size()))
        << strerror(errno);
    char buf[4096];
    sockaddr_storage from{};
    const ssize_t n = recv_within(t.b, buf, sizeof buf, &from);
    ASSERT_EQ(n, ssize_t(ping.size())) << i << ": " << strerror(errno);
    EXPECT_EQ(std::string(buf, size_t(n)), ping);
    ASSERT_EQ(from.ss_family, family);
    EXPECT_EQ(port_of(from), port_of(t.addr_a));

    const std::string pong = "pong " + std::to_string(i);
    ASSERT_EQ(rsendto(t.b, pong.data(), pong.size(), 0, reinterpret_cast<sockaddr*>(&from), len_of(from)),
              ssize_t(pong.size()));
    sockaddr_storage from_b{};
    const ssize_t m = recv_within(t.a, buf, sizeof buf, &from_b);
    ASSERT_EQ(m, ssize_t(pong.size())) << i << ": " << strerror(errno);
    EXPECT_EQ(std::string(buf, size_t(m)), pong);
    EXPECT_EQ(port_of(from_b), port_of(t.addr_b));
  }
}

TEST(RsocketDgram, SendtoRecvfromBothWaysIpv4) { exchange(AF_INET); }
TEST(RsocketDgram, SendtoRecvfromBothWaysIpv6) { exchange(AF_INET6); }

TEST(RsocketDgram, ConnectedSendAndRecvAndNames) {
  Two t(AF_INET);
  char buf[64];
  EXPECT_EQ(rsend(t.a, "x", 1, 0), -1);
  EXPECT_EQ(errno, EDESTADDRREQ);
  ASSERT_EQ(rconnect(t.a, reinterpret_cast<sockaddr*>(&t.addr_b), len_of(t.addr_b)), 0) << strerror(errno);
  ASSERT_EQ(rsend(t.a, "hello", 5, 0), 5) << strerror(errno);
  sockaddr_storage from{};
  ASSERT_EQ(recv_within(t.b, buf, sizeof buf, &from), 5);
  ASSERT_EQ(rsendto(t.b, "world", 5, 0, reinterpret_cast<sockaddr*>(&from), len_of(from)), 5);
  pollfd p{t.a, POLLIN, 0};
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  EXPECT_EQ(rrecv(t.a, buf, sizeof buf, 0), 5);
  EXPECT_EQ(std::memcmp(buf, "world", 5), 0);

  sockaddr_storage name{};
  socklen_t nlen = sizeof name;
  ASSERT_EQ(rgetpeername(t.a, reinterpret_cast<sockaddr*>(&name), &nlen), 0);
  EXPECT_EQ(port_of(name), port_of(t.addr_b));
  nlen = sizeof name;
  ASSERT_EQ(rgetsockname(t.b, reinterpret_cast<sockaddr*>(&name), &nlen), 0);
  EXPECT_EQ(port_of(name), port_of(t.addr_b));
  nlen = sizeof name;
  EXPECT_EQ(rgetpeername(t.b, reinterpret_cast<sockaddr*>(&name), &nlen), -1);
  EXPECT_EQ(errno, ENOTCONN);

  // a has b's QPN now (b's answer over UDP, read within a few ms of any
  // call): with a's UDP socket shut for writing, its datagrams still
  // arrive, so they go over UD.
  usleep(5000);
  p = pollfd{t.a, POLLIN, 0};
  EXPECT_EQ(rpoll(&p, 1, 0), 0);
  ASSERT_EQ(::shutdown(t.a, SHUT_WR), 0) << strerror(errno);  // the index is the kernel UDP socket
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(rsend(t.a, "over ud", 7, 0), 7) << i << ": " << strerror(errno);
    ASSERT_EQ(recv_within(t.b, buf, sizeof buf, &from), 7) << i;
    EXPECT_EQ(std::memcmp(buf, "over ud", 7), 0);
  }

  int type = 0;
  socklen_t tlen = sizeof type;
  ASSERT_EQ(rgetsockopt(t.a, SOL_SOCKET, SO_TYPE, &type, &tlen), 0);
  EXPECT_EQ(type, SOCK_DGRAM);
  EXPECT_EQ(rlisten(t.a, 1), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST(RsocketDgram, BiggerThanOneSlotIsEmsgsizeAndTheLargestArrivesWhole) {
  for (int family : {AF_INET, AF_INET6}) {
    Two t(family);
    // One 2048-byte slot holds the data and its longest header, UDP's
    // (softverbs0's MTU is larger), as rdma-core sizes its buffers.
    const size_t largest = 2048 - (family == AF_INET ? 16 : 28);
    std::vector<uint8_t> big(largest + 1);
    for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7 + 1);
    const auto* to = reinterpret_cast<sockaddr*>(&t.addr_b);
    EXPECT_EQ(rsendto(t.a, big.data(), big.size(), 0, to, len_of(t.addr_b)), -1);
    EXPECT_EQ(errno, EMSGSIZE);
    EXPECT_EQ(rsendto(t.a, big.data(), 65536, 0, to, len_of(t.addr_b)), -1);
    EXPECT_EQ(errno, EMSGSIZE);
    // Twice: the first goes over UDP, the second over UD.
    for (int round = 0; round < 2; ++round) {
      ASSERT_EQ(rsendto(t.a, big.data(), largest, 0, to, len_of(t.addr_b)), ssize_t(largest)) << strerror(errno);
      std::vector<uint8_t> got(4096);
      sockaddr_storage from{};
      ASSERT_EQ(recv_within(t.b, got.data(), got.size(), &from), ssize_t(largest)) << strerror(errno);
      EXPECT_EQ(std::memcmp(got.data(), big.data(), largest), 0);
      // b answers, so a learns b's QPN for the next round.
      ASSERT_EQ(rsendto(t.b, "k", 1, 0, reinterpret_cast<sockaddr*>(&from), len_of(from)), 1);
      ASSERT_EQ(recv_within(t.a, got.data(), got.size(), &from), 1);
    }
  }
}

TEST(RsocketDgram, TruncatesPeeksAndSaysEagainWhenEmpty) {
  Two t(AF_INET);
  ASSERT_EQ(rfcntl(t.b, F_SETFL, O_NONBLOCK), 0);
  char buf[64];
  EXPECT_EQ(rrecv(t.b, buf, sizeof buf, 0), -1);
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
  ASSERT_EQ(rsendto(t.a, "0123456789", 10, 0, reinterpret_cast<sockaddr*>(&t.addr_b), len_of(t.addr_b)), 10);
  pollfd p{t.b, POLLIN, 0};
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  EXPECT_EQ(p.revents & POLLIN, POLLIN);
  EXPECT_EQ(rrecv(t.b, buf, 4, MSG_PEEK), 4);
  EXPECT_EQ(rrecv(t.b, buf, 4, MSG_PEEK | MSG_TRUNC), 10);  // the datagram's length, as a kernel socket
  EXPECT_EQ(rrecv(t.b, buf, 4, 0), 4);  // the rest of the datagram is gone
  EXPECT_EQ(std::memcmp(buf, "0123", 4), 0);
  EXPECT_EQ(rrecv(t.b, buf, sizeof buf, 0), -1);
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
  // Nothing to read: rpoll waits out its timeout, and says writable.
  const auto start = std::chrono::steady_clock::now();
  p = pollfd{t.b, POLLIN, 0};
  EXPECT_EQ(rpoll(&p, 1, 50), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(45));
  p = pollfd{t.b, POLLOUT, 0};
  EXPECT_EQ(rpoll(&p, 1, 0), 1);
}

TEST(RsocketDgram, SendmsgGathersAndRecvmsgScattersWithTheAddress) {
  Two t(AF_INET6);
  for (int round = 0; round < 3; ++round) {  // over UDP first, then over UD
    char h1[] = "gather-", h2[] = "scatter";
    iovec out[2] = {{h1, 7}, {h2, 7}};
    msghdr m{};
    m.msg_name = &t.addr_b;
    m.msg_namelen = len_of(t.addr_b);
    m.msg_iov = out;
    m.msg_iovlen = 2;
    ASSERT_EQ(rsendmsg(t.a, &m, 0), 14) << strerror(errno);
    pollfd p{t.b, POLLIN, 0};
    ASSERT_EQ(rpoll(&p, 1, 5000), 1);
    char r1[5], r2[32];
    iovec in[2] = {{r1, sizeof r1}, {r2, sizeof r2}};
    sockaddr_storage from{};
    msghdr rm{};
    rm.msg_name = &from;
    rm.msg_namelen = sizeof from;
    rm.msg_iov = in;
    rm.msg_iovlen = 2;
    ASSERT_EQ(rrecvmsg(t.b, &rm, 0), 14);
    EXPECT_EQ(std::string(r1, 5) + std::string(r2, 9), "gather-scatter");
    EXPECT_EQ(rm.msg_namelen, socklen_t(sizeof(sockaddr_in6)));
    EXPECT_EQ(port_of(from), port_of(t.addr_a));
    // An answer, so that a learns b's QPN.
    ASSERT_EQ(rsendto(t.b, "k", 1, 0, reinterpret_cast<sockaddr*>(&from), len_of(from)), 1);
    ASSERT_EQ(recv_within(t.a, r2, sizeof r2, &from), 1);
  }
}

TEST(RsocketDgram, OptionsReachTheUdpSocketAndSizeTheQueues) {
  const int s = rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(s, 0);
  int v = 1 << 16;
  ASSERT_EQ(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v), 0);
  v = 32;
  ASSERT_EQ(rsetsockopt(s, SOL_RDMA, RDMA_RQSIZE, &v, sizeof v), 0);
  v = 1;
  ASSERT_EQ(rsetsockopt(s, SOL_SOCKET, SO_REUSEADDR, &v, sizeof v), 0);
  EXPECT_EQ(rsetsockopt(s, IPPROTO_TCP, 1 /* TCP_NODELAY */, &v, sizeof v), -1);  // the UDP socket refuses it
  sockaddr_storage a = loopback(AF_INET, next_port());
  ASSERT_EQ(rbind(s, reinterpret_cast<sockaddr*>(&a), len_of(a)), 0);
  int got = 0;
  socklen_t len = sizeof got;
  ASSERT_EQ(rgetsockopt(s, SOL_SOCKET, SO_REUSEADDR, &got, &len), 0);
  EXPECT_EQ(got, 1);
  // 32 receives of one 2048-byte slot each, as rdma-core sizes them.
  ASSERT_EQ(rgetsockopt(s, SOL_RDMA, RDMA_RQSIZE, &got, &len), 0);
  EXPECT_EQ(got, 32);
  ASSERT_EQ(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &got, &len), 0);
  EXPECT_EQ(got, 32 * 2048);
  // Sizes are fixed once bound.
  EXPECT_EQ(rsetsockopt(s, SOL_RDMA, RDMA_RQSIZE, &v, sizeof v), -1);
  EXPECT_EQ(rfcntl(s, F_GETFL) & O_NONBLOCK, 0);
  // rselect sees it writable, not readable.
  fd_set r, w;
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_SET(s, &r);
  FD_SET(s, &w);
  timeval tv{0, 20000};
  EXPECT_EQ(rselect(s + 1, &r, &w, nullptr, &tv), 1);
  EXPECT_FALSE(FD_ISSET(s, &r));
  EXPECT_TRUE(FD_ISSET(s, &w));
  EXPECT_EQ(rclose(s), 0);
}

// One thread receiving on an rsocket while another sends on it (and a third
// echoes at the peer): each call makes progress for the others.
TEST(RsocketDgram, OneRsocketSendsAndReceivesFromTwoThreads) {
  Two t(AF_INET);
  // Each learns the other's QPN first: a burst over UDP may overflow the
  // kernel socket's buffer (datagrams lost, as UDP loses them), over UD a
  // burst smaller than the receive queue loses none.
  char hello[8] = "hello";
  sockaddr_storage peer{};
  ASSERT_EQ(rsendto(t.a, hello, 8, 0, reinterpret_cast<sockaddr*>(&t.addr_b), len_of(t.addr_b)), 8);
  ASSERT_EQ(recv_within(t.b, hello, 8, &peer), 8);
  ASSERT_EQ(rsendto(t.b, hello, 8, 0, reinterpret_cast<sockaddr*>(&peer), len_of(peer)), 8);
  ASSERT_EQ(recv_within(t.a, hello, 8, &peer), 8);
  usleep(5000);  // a reads b's answer over UDP (its QPN) on its next call
  // Fewer than a receive queue holds (the default 128 KiB buffer is 64
  // slots): none dropped.
  constexpr int kN = 60;
  int echoed = 0, received = 0;
  std::thread echo([&] {
    for (int i = 0; i < kN; ++i) {
      char buf[64];
      sockaddr_storage from{};
      const ssize_t n = recv_within(t.b, buf, sizeof buf, &from);
      if (n <= 0) return;
      if (rsendto(t.b, buf, size_t(n), 0, reinterpret_cast<sockaddr*>(&from), len_of(from)) != n) return;
      ++echoed;
    }
  });
  std::thread reader([&] {
    for (int i = 0; i < kN; ++i) {
      char buf[64];
      sockaddr_storage from{};
      if (recv_within(t.a, buf, sizeof buf, &from) != 8) return;
      ++received;
    }
  });
  for (int i = 0; i < kN; ++i) {
    const uint64_t v = uint64_t(i);
    ASSERT_EQ(rsendto(t.a, &v, sizeof v, 0, reinterpret_cast<sockaddr*>(&t.addr_b), len_of(t.addr_b)), 8);
  }
  echo.join();
  reader.join();
  EXPECT_EQ(echoed, kN);
  EXPECT_EQ(received, kN);
}

TEST(RsocketDgram, CloseWithDatagramsQueuedAndInFlight) {
  Two t(AF_INET);
  const auto* to = reinterpret_cast<sockaddr*>(&t.addr_b);
  char buf[256];
  std::memset(buf, 0x5a, sizeof buf);
  // Learn b's QPN, then queue datagrams at b that it never reads.
  ASSERT_EQ(rsendto(t.a, buf, 16, 0, to, len_of(t.addr_b)), 16);
  sockaddr_storage from{};
  ASSERT_EQ(recv_within(t.b, buf, sizeof buf, &from), 16);
  ASSERT_EQ(rsendto(t.b, buf, 1, 0, reinterpret_cast<sockaddr*>(&from), len_of(from)), 1);
  ASSERT_EQ(recv_within(t.a, buf, sizeof buf, &from), 1);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(rsendto(t.a, buf, sizeof buf, 0, to, len_of(t.addr_b)), ssize_t(sizeof buf));
  pollfd p{t.b, POLLIN, 0};
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  const int a = t.a, b = t.b;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(rclose(t.b), 0);
  t.b = -1;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // The sender goes on: datagrams to a closed rsocket are lost, not errors.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(rsendto(t.a, buf, sizeof buf, 0, to, len_of(t.addr_b)), ssize_t(sizeof buf));
  // And closes with its own sends possibly still in flight.
  EXPECT_EQ(rclose(t.a), 0);
  t.a = -1;
  // Both are gone.
  for (int s : {a, b}) {
    EXPECT_EQ(rsend(s, buf, 1, 0), -1);
    EXPECT_EQ(errno, EBADF);
  }
}

}  // namespace
