#include "fabric/udp/forwarder.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "fabric/udp/udp_fabric.h"
#include "util/log.h"
#include "util/raw_socket.h"

namespace softverbs::fabric::udp {
namespace {

// What precedes each forwarded IB packet.
struct FrameHeader {
  uint8_t endpoint;
  uint8_t reserved;
  uint16_t from_port;
  uint8_t from[16];
};

// Under the ACK timeout of common settings (timeout 14: 67 ms, 7 retries): a
// port whose owner died is taken over before connections time out.
constexpr int kIdleMs = 200;

socklen_t abstract_address(const std::string& name, sockaddr_un* sa) {
  std::memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof sa->sun_path - 1);
  std::memcpy(sa->sun_path + 1, name.data(), n);  // sun_path[0] == 0: the abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

}  // namespace

std::string Forwarder::name_of(shm::OwnerId who) const {
  return prefix_ + "-" + std::to_string(who.slot) + "-" + std::to_string(who.generation);
}

int Forwarder::start(const std::string& device_path, shm::OwnerId self, Deliver deliver,
                     std::function<void()> on_idle) {
  prefix_ = "softverbs-roce-" + std::to_string(std::hash<std::string>{}(device_path));
  deliver_ = std::move(deliver);
  on_idle_ = std::move(on_idle);
  listen_fd_ = raw_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return errno;
  sockaddr_un sa;
  const socklen_t len = abstract_address(name_of(self), &sa);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(listen_fd_, 64) != 0) {
    const int e = errno;
    close(listen_fd_);
    listen_fd_ = -1;
    return e;
  }
  std::thread([this] { receive_loop(); }).detach();  // lives as long as the process
  return 0;
}

bool Forwarder::forward(shm::OwnerId to, uint8_t endpoint, const wire::Gid& from, uint16_t from_port,
                        std::span<const uint8_t> ib) {
  if (to.slot >= shm::kMaxProcesses) return false;
  std::lock_guard lock(out_mu_);
  Out& o = out_[to.slot];
  if (o.fd >= 0 && o.generation != to.generation) {
    close(o.fd);
    o.fd = -1;
  }
  if (o.fd < 0) {
    const int fd = raw_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_un sa;
    const socklen_t len = abstract_address(name_of(to), &sa);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
      close(fd);
      return false;
    }
    int buf = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    o.fd = fd;
    o.generation = to.generation;
  }
  FrameHeader h{};
  h.endpoint = endpoint;
  h.from_port = from_port;
  std::memcpy(h.from, from.data(), 16);
  iovec iov[2] = {{&h, sizeof h}, {const_cast<uint8_t*>(ib.data()), ib.size()}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  if (sendmsg(o.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return true;
  if (errno != EAGAIN) {  // the process went: forget the connection
    close(o.fd);
    o.fd = -1;
  }
  return false;
}

void Forwarder::receive_loop() {
  prctl(PR_SET_NAME, "softverbs-fwd");
  std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
  std::vector<uint8_t> buf(sizeof(FrameHeader) + kMaxIbPacket);
  for (;;) {
    const int n = poll(fds.data(), fds.size(), kIdleMs);
    if (n < 0 && errno != EINTR) {
      SV_LOG(kError, "RoCE: forwarding stopped: %s", std::strerror(errno));
      return;
    }
    if (n == 0) {
      on_idle_();
      continue;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t k = recv(fds[i].fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        close(fds[i].fd);
        fds[i].fd = -1;  // removed below
        continue;
      }
      if (k < static_cast<ssize_t>(sizeof(FrameHeader))) continue;
      FrameHeader h;
      std::memcpy(&h, buf.data(), sizeof h);
      wire::Gid from;
      std::memcpy(from.data(), h.from, 16);
      deliver_(h.endpoint, from, h.from_port, {buf.data() + sizeof h, static_cast<size_t>(k) - sizeof h});
    }
    std::erase_if(fds, [](const pollfd& p) { return p.fd < 0; });
    if (fds[0].revents & POLLIN) {
      const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) fds.push_back({c, POLLIN, 0});
    }
    for (pollfd& p : fds) p.revents = 0;
  }
}

}  // namespace softverbs::fabric::udp
