// rsockets in one process on softverbs0, through our librdmacm.so.1: the
// protocol's bytes (golden), then the socket calls end to end — a connected
// pair moving data both ways and checked, rpoll over rsockets and a pipe,
// non-blocking calls, half and full shutdown, options, names, riomap and
// riowrite, and the errors a socket program expects.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "cm/rsocket_proto.h"

namespace {

namespace rp = softverbs::cm::rsproto;

uint16_t next_port() {
  static uint16_t port = static_cast<uint16_t>(40000 + getpid() % 20000);
  return port++;
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

TEST(RsocketProto, ConnDataGoldenBytes) {
  rp::ConnData c;
  c.flags = rp::kFlagIomap;
  c.credits = 384;
  c.iomap_scale = 0x81;
  c.target_sgl = {0x00007f0011223340ull, 0xa1b2c3d4, 2};
  c.data_buf = {0x00007f0055667000ull, 0x01020304, 65536};
  uint8_t b[rp::kConnDataLen];
  rp::encode(c, b);
  const uint8_t golden[rp::kConnDataLen] = {
      0x01, 0x02, 0x01, 0x80, 0x00, 0x00, 0x00, 0x81,                          // version, flags, credits, rsvd, iomap
      0x00, 0x00, 0x7f, 0x00, 0x11, 0x22, 0x33, 0x40, 0xa1, 0xb2, 0xc3, 0xd4,  // target SGL addr, rkey
      0x00, 0x00, 0x00, 0x02,                                                  // entries
      0x00, 0x00, 0x7f, 0x00, 0x55, 0x66, 0x70, 0x00, 0x01, 0x02, 0x03, 0x04,  // data buffer addr, rkey
      0x00, 0x01, 0x00, 0x00};                                                 // its length
  EXPECT_EQ(0, std::memcmp(b, golden, sizeof b));
  rp::ConnData d;
  ASSERT_TRUE(rp::decode(golden, sizeof golden, &d));
  EXPECT_EQ(d.credits, 384);
  EXPECT_EQ(d.target_sgl.addr, c.target_sgl.addr);
  EXPECT_EQ(d.data_buf.length, 65536u);
  EXPECT_FALSE(rp::decode(golden, sizeof golden - 1, &d));
}

TEST(RsocketProto, ImmediatesAndScales) {
  EXPECT_EQ(rp::msg(rp::Op::kData, 4096), 0x00001000u);
  EXPECT_EQ(rp::msg(rp::Op::kSgl, 0x1234), 0x80001234u);
  EXPECT_EQ(rp::msg(rp::Op::kIomapSgl, 3), 0xC0000003u);
  EXPECT_EQ(rp::msg(rp::Op::kCtrl, uint32_t(rp::Ctrl::kShutdown)), 0xE0000002u);
  EXPECT_EQ(rp::msg_op(0xE0000002u), rp::Op::kCtrl);
  EXPECT_EQ(rp::msg_data(0xE0000002u), 2u);
  EXPECT_EQ(rp::value_to_scale(100, 8), 100);
  EXPECT_EQ(rp::value_to_scale(1024, 8), 0x84);
  EXPECT_EQ(rp::scale_to_value(0x84, 8), 1024u);
}

// A connected pair: `server` accepted from a listener, `client` connected.
struct Pair {
  int listener = -1, server = -1, client = -1;
  uint16_t port = 0;
  ~Pair() {
    for (int s : {client, server, listener}) {
      if (s >= 0) rclose(s);
    }
  }
};

void connect_pair(Pair* p, int iomap_size = 0) {
  p->port = next_port();
  p->listener = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(p->listener, 0) << strerror(errno);
  const int one = 1;
  ASSERT_EQ(0, rsetsockopt(p->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
  if (iomap_size != 0) {
    ASSERT_EQ(0, rsetsockopt(p->listener, SOL_RDMA, RDMA_IOMAPSIZE, &iomap_size, sizeof iomap_size));
  }
  sockaddr_in a = loopback(p->port);
  ASSERT_EQ(0, rbind(p->listener, reinterpret_cast<sockaddr*>(&a), sizeof a)) << strerror(errno);
  ASSERT_EQ(0, rlisten(p->listener, 4)) << strerror(errno);
  p->client = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(p->client, 0);
  if (iomap_size != 0) {
    ASSERT_EQ(0, rsetsockopt(p->client, SOL_RDMA, RDMA_IOMAPSIZE, &iomap_size, sizeof iomap_size));
  }
  int rc = -1, err = 0;
  std::thread t([&] {
    rc = rconnect(p->client, reinterpret_cast<sockaddr*>(&a), sizeof a);
    err = errno;
  });
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  p->server = raccept(p->listener, reinterpret_cast<sockaddr*>(&peer), &len);
  t.join();
  ASSERT_EQ(rc, 0) << strerror(err);
  ASSERT_GE(p->server, 0) << strerror(errno);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  EXPECT_EQ(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
}

TEST(Rsocket, IndexesAreRealFdsDistinctFromEachOther) {
  Pair p;
  connect_pair(&p);
  EXPECT_NE(p.listener, p.server);
  EXPECT_NE(p.server, p.client);
  // Real fds (rdma-core's index space): librspreload keeps them behind its own.
  for (int s : {p.listener, p.server, p.client}) EXPECT_NE(fcntl(s, F_GETFD), -1);
}

TEST(Rsocket, DataBothWaysLargerThanTheBuffersIsIntact) {
  Pair p;
  connect_pair(&p);
  const size_t n = 3 * 1024 * 1024 + 123;  // crosses the 128 KB buffers many times
  std::vector<uint8_t> out(n), in(n);
  for (size_t i = 0; i < n; ++i) out[i] = uint8_t(i * 7 + i / 251);
  ssize_t sent = 0;
  std::thread t([&] {
    size_t off = 0;
    while (off < n) {
      const ssize_t k = rsend(p.client, out.data() + off, n - off, 0);
      if (k <= 0) break;
      off += size_t(k);
    }
    sent = ssize_t(off);
  });
  ASSERT_EQ(ssize_t(n), rrecv(p.server, in.data(), n, MSG_WAITALL));
  t.join();
  EXPECT_EQ(sent, ssize_t(n));
  EXPECT_EQ(out, in);
  // And back, through rwritev/rreadv.
  iovec iov[2] = {{out.data(), 1000}, {out.data() + 1000, 5000}};
  ASSERT_EQ(6000, rwritev(p.server, iov, 2));
  std::vector<uint8_t> back(6000);
  size_t got = 0;
  while (got < back.size()) {
    iovec r{back.data() + got, back.size() - got};
    const ssize_t k = rreadv(p.client, &r, 1);
    ASSERT_GT(k, 0);
    got += size_t(k);
  }
  EXPECT_EQ(0, std::memcmp(back.data(), out.data(), 6000));
}

TEST(Rsocket, PeekLeavesTheDataAndNonBlockingSaysEagain) {
  Pair p;
  connect_pair(&p);
  char buf[16];
  EXPECT_EQ(-1, rrecv(p.server, buf, sizeof buf, MSG_DONTWAIT));
  EXPECT_EQ(EAGAIN, errno);
  ASSERT_EQ(0, rfcntl(p.server, F_SETFL, O_NONBLOCK));
  EXPECT_EQ(O_NONBLOCK, rfcntl(p.server, F_GETFL) & O_NONBLOCK);
  EXPECT_EQ(-1, rread(p.server, buf, sizeof buf));
  EXPECT_EQ(EAGAIN, errno);
  ASSERT_EQ(5, rsend(p.client, "hello", 5, 0));
  pollfd pf{p.server, POLLIN, 0};
  ASSERT_EQ(1, rpoll(&pf, 1, 5000));
  EXPECT_TRUE(pf.revents & POLLIN);
  EXPECT_EQ(5, rrecv(p.server, buf, sizeof buf, MSG_PEEK));
  EXPECT_EQ(5, rrecv(p.server, buf, sizeof buf, 0));
  EXPECT_EQ(0, std::memcmp(buf, "hello", 5));
  EXPECT_EQ(-1, rrecv(p.server, buf, sizeof buf, 0));
  EXPECT_EQ(EAGAIN, errno);
}

TEST(Rsocket, RpollMixesRsocketsAndOrdinaryFds) {
  Pair p;
  connect_pair(&p);
  int pipefd[2];
  ASSERT_EQ(0, pipe(pipefd));
  pollfd fds[3] = {{p.server, POLLIN, 0}, {pipefd[0], POLLIN, 0}, {p.client, POLLOUT, 0}};
  // The client can send at once; nothing is readable.
  ASSERT_EQ(1, rpoll(fds, 3, 1000));
  EXPECT_EQ(fds[0].revents, 0);
  EXPECT_EQ(fds[1].revents, 0);
  EXPECT_TRUE(fds[2].revents & POLLOUT);
  // Nothing at all within the timeout.
  fds[2].events = 0;
  EXPECT_EQ(0, rpoll(fds, 3, 50));
  ASSERT_EQ(1, write(pipefd[1], "x", 1));
  ASSERT_EQ(1, rpoll(fds, 3, 1000));
  EXPECT_TRUE(fds[1].revents & POLLIN);
  char c;
  ASSERT_EQ(1, read(pipefd[0], &c, 1));
  // Data sent later wakes a poll already asleep.
  std::thread t([&] {
    usleep(100000);
    rsend(p.client, "z", 1, 0);
  });
  ASSERT_EQ(1, rpoll(fds, 3, 5000));
  t.join();
  EXPECT_TRUE(fds[0].revents & POLLIN);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(p.server, &r);
  timeval tv{1, 0};
  EXPECT_EQ(1, rselect(p.server + 1, &r, nullptr, nullptr, &tv));
  EXPECT_TRUE(FD_ISSET(p.server, &r));
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST(Rsocket, ShutdownWriteIsEndOfFileAndCloseHangsUp) {
  Pair p;
  connect_pair(&p);
  ASSERT_EQ(3, rsend(p.client, "abc", 3, 0));
  ASSERT_EQ(0, rshutdown(p.client, SHUT_WR));
  EXPECT_EQ(-1, rsend(p.client, "d", 1, 0));
  EXPECT_EQ(EPIPE, errno);
  char buf[8];
  EXPECT_EQ(3, rrecv(p.server, buf, sizeof buf, MSG_WAITALL));
  EXPECT_EQ(0, rrecv(p.server, buf, sizeof buf, 0));  // end of file
  // The other direction still works.
  ASSERT_EQ(2, rsend(p.server, "ok", 2, 0));
  EXPECT_EQ(2, rrecv(p.client, buf, 2, MSG_WAITALL));
  ASSERT_EQ(0, rclose(p.server));
  p.server = -1;
  pollfd pf{p.client, POLLIN, 0};
  ASSERT_EQ(1, rpoll(&pf, 1, 5000));
  EXPECT_TRUE(pf.revents & POLLHUP);
  EXPECT_EQ(0, rrecv(p.client, buf, sizeof buf, 0));
}

TEST(Rsocket, NonBlockingConnectIsInProgressThenWritable) {
  const uint16_t port = next_port();
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = loopback(port);
  ASSERT_EQ(0, rbind(l, reinterpret_cast<sockaddr*>(&a), sizeof a));
  ASSERT_EQ(0, rlisten(l, 1));
  ASSERT_EQ(0, rfcntl(l, F_SETFL, O_NONBLOCK));
  EXPECT_EQ(-1, raccept(l, nullptr, nullptr));
  EXPECT_EQ(EAGAIN, errno);
  int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_EQ(-1, rconnect(c, reinterpret_cast<sockaddr*>(&a), sizeof a));
  ASSERT_EQ(EINPROGRESS, errno);
  pollfd lp{l, POLLIN, 0};
  ASSERT_EQ(1, rpoll(&lp, 1, 5000));
  int s = raccept(l, nullptr, nullptr);
  ASSERT_GE(s, 0) << strerror(errno);
  pollfd cp{c, POLLOUT, 0};
  ASSERT_EQ(1, rpoll(&cp, 1, 5000));
  EXPECT_TRUE(cp.revents & POLLOUT);
  int err = -1;
  socklen_t len = sizeof err;
  ASSERT_EQ(0, rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len));
  EXPECT_EQ(err, 0);
  sockaddr_in name{};
  len = sizeof name;
  ASSERT_EQ(0, rgetpeername(c, reinterpret_cast<sockaddr*>(&name), &len));
  EXPECT_EQ(name.sin_port, htons(port));
  len = sizeof name;
  ASSERT_EQ(0, rgetsockname(s, reinterpret_cast<sockaddr*>(&name), &len));
  EXPECT_EQ(name.sin_port, htons(port));
  for (int x : {c, s, l}) rclose(x);
}

TEST(Rsocket, ErrorsASocketProgramExpects) {
  EXPECT_EQ(-1, rsocket(AF_UNIX, SOCK_STREAM, 0));
  EXPECT_EQ(EAFNOSUPPORT, errno);
  EXPECT_EQ(-1, rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP));
  EXPECT_EQ(ENOTSUP, errno);
  EXPECT_EQ(-1, rsocket(AF_IB, SOCK_DGRAM, 0)) << "datagram rsockets ride a UDP socket: no AF_IB (nor in rdma-core)";
  EXPECT_EQ(ENOTSUP, errno);
  char b;
  EXPECT_EQ(-1, rrecv(12345, &b, 1, 0));
  EXPECT_EQ(EBADF, errno);
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  EXPECT_EQ(-1, rsend(s, "x", 1, 0));
  EXPECT_EQ(ENOTCONN, errno);
  // Nobody listens: refused, promptly.
  sockaddr_in a = loopback(next_port());
  EXPECT_EQ(-1, rconnect(s, reinterpret_cast<sockaddr*>(&a), sizeof a));
  EXPECT_EQ(ECONNREFUSED, errno);
  rclose(s);
  EXPECT_EQ(-1, rclose(s));
  EXPECT_EQ(EBADF, errno);
}

TEST(Rsocket, OptionsRoundTrip) {
  int s = rsocket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  int v = 1 << 16;
  socklen_t len = sizeof v;
  ASSERT_EQ(0, rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v));
  ASSERT_EQ(0, rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len));
  EXPECT_EQ(v, 1 << 17);  // doubled, as Linux and rdma-core do
  v = 1;
  ASSERT_EQ(0, rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v));
  v = 0;
  ASSERT_EQ(0, rgetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &len));
  EXPECT_EQ(v, 1);
  ASSERT_EQ(0, rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v));
  ASSERT_EQ(0, rgetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, &len));
  EXPECT_EQ(v, 1);
  v = 100;
  ASSERT_EQ(0, rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v));
  ASSERT_EQ(0, rgetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, &len));
  EXPECT_EQ(v, 100);
  linger lg{1, 5};
  ASSERT_EQ(0, rsetsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
  linger back{};
  len = sizeof back;
  ASSERT_EQ(0, rgetsockopt(s, SOL_SOCKET, SO_LINGER, &back, &len));
  EXPECT_EQ(back.l_onoff, 1);
  EXPECT_EQ(-1, rgetsockopt(s, SOL_SOCKET, SO_PEERCRED, &v, &len));
  EXPECT_EQ(ENOTSUP, errno);
  len = sizeof v;
  ASSERT_EQ(0, rgetsockopt(s, IPPROTO_TCP, TCP_MAXSEG, &v, &len));
  EXPECT_GT(v, 0);
  rclose(s);
}

TEST(Rsocket, RiowriteLandsInThePeersMappedWindow) {
  Pair p;
  connect_pair(&p, 4);
  std::vector<uint8_t> window(256 * 1024, 0);
  ASSERT_EQ(off_t(4096), riomap(p.server, window.data(), window.size(), PROT_WRITE, 0, 4096)) << strerror(errno);
  // The entry travels with the next message to the peer.
  ASSERT_EQ(1, rsend(p.server, "m", 1, 0));
  char c;
  ASSERT_EQ(1, rrecv(p.client, &c, 1, MSG_WAITALL));
  std::vector<uint8_t> data(200 * 1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i % 253);
  ASSERT_EQ(data.size(), riowrite(p.client, data.data(), data.size(), 4096 + 1000, 0)) << strerror(errno);
  // riowrite's data is not announced: a message after it says it is there.
  ASSERT_EQ(1, rsend(p.client, "d", 1, 0));
  ASSERT_EQ(1, rrecv(p.server, &c, 1, MSG_WAITALL));
  EXPECT_EQ(0, std::memcmp(window.data() + 1000, data.data(), data.size()));
  EXPECT_EQ(0, window[999]);
  // Outside every window of the peer's.
  EXPECT_EQ(size_t(-1), riowrite(p.client, data.data(), 10, 1 << 30, 0));
  EXPECT_EQ(EINVAL, errno);
  EXPECT_EQ(0, riounmap(p.server, window.data(), window.size()));
  EXPECT_EQ(-1, riounmap(p.server, window.data(), window.size()));
}

}  // namespace
