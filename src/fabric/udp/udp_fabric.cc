#include "fabric/udp/udp_fabric.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fabric/fabrics.h"
#include "fabric/gsi_route.h"
#include "fabric/udp/sockaddr.h"
#include "fabric/udp/tos_control.h"
#include "transport/responder.h"
#include "transport/qp_types.h"
#include "util/log.h"
#include "wire/cm_mad.h"
#include "wire/icrc.h"
#include "util/raw_socket.h"

namespace softverbs::fabric::udp {
namespace {

uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

void store_le32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

UdpFabric& udp_fabric() {
  static UdpFabric* f = new UdpFabric();  // receive threads outlive static destruction
  return *f;
}

namespace {

// A UDP socket for RoCE on `gid`, bound to `port` (0: any), or -errno.
int open_roce_socket(const wire::Gid& gid, wire::IpVersion version, uint16_t port) {
  const int fd = raw_socket(version == wire::IpVersion::kV4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int on = 1;
  if (version == wire::IpVersion::kV4) {
    // DF, and with it identification 0 on an unconnected socket: the header the ICRC covers.
    int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  } else {
    int pmtu = IPV6_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu);
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
  }
  // Multicast (a UD datagram to a group's MGID) leaves on the port's
  // interface, whatever the routes say, as from a NIC.
  if (version == wire::IpVersion::kV4) {
    in_addr local;
    std::memcpy(&local, gid.data() + 12, 4);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &local, sizeof local);
  } else {
    const int ifindex = static_cast<int>(interface_of(gid));
    if (ifindex != 0) setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof ifindex);
  }
  // Bursts of a window of requests arrive at once: room for them.
  // net.core.rmem_max caps SO_RCVBUF (200 KiB by default); with
  // CAP_NET_ADMIN the FORCE variants pass the cap.
  // 16 MiB: one WQE's burst (a 4 MiB message of 4 KiB packets, each charged
  // about twice its size) for two QPs at once.
  int buf = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  buf = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  sockaddr_storage sa;
  const socklen_t len = to_sockaddr(gid, port, &sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    const int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

// A receive socket takes the kernel's coalesced buffers (UDP_GRO): up to
// 64 KiB of one flow's equal-sized datagrams in one read, the segment size
// in a control message. Without it (older kernels) each datagram comes alone.
void enable_gro(int fd) {
  int on = 1;
  if (setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on) != 0)
    SV_LOG(kInfo, "RoCE: no UDP_GRO on this kernel (%s): one datagram per read", std::strerror(errno));
}

// The segment size of a coalesced buffer, or 0 when it is one datagram.
size_t gro_segment_size(msghdr& m) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_UDP || c->cmsg_type != UDP_GRO) continue;
    int size = 0;
    std::memcpy(&size, CMSG_DATA(c), sizeof size);
    return size > 0 ? static_cast<size_t>(size) : 0;
  }
  return 0;
}

uint16_t bound_port(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  return ntohs(sa.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&sa)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port);
}

}  // namespace

Status UdpFabric::start(DeviceHost& host, const std::vector<wire::Gid>& gids, uint16_t port,
                        transport::Link& local) {
  std::lock_guard lock(start_mu_);
  if (started_) return Status::ok();
  std::vector<Endpoint> eps;
  std::vector<int> rx_fds;  // per endpoint: bound to `port`, or -1
  auto close_all = [&] {
    for (size_t i = 0; i < eps.size(); ++i) {
      const Endpoint& o = eps[i];
      for (size_t k = 1; k < kTxSockets; ++k)
        if (o.tx_fd[k] != o.fd) close(o.tx_fd[k]);
      close(o.fd);
      if (i < rx_fds.size() && rx_fds[i] >= 0 && rx_fds[i] != o.fd) close(rx_fds[i]);
    }
  };
  for (const wire::Gid& gid : gids) {
    Endpoint ep;
    ep.gid = gid;
    ep.version = is_v4_mapped(gid) ? wire::IpVersion::kV4 : wire::IpVersion::kV6;
    int fd = open_roce_socket(gid, ep.version, port);
    int rx_fd = -1;
    if (fd == -EADDRINUSE) {
      // Another process of the device receives for this address: it forwards
      // us our packets (forwarder.h); we send from a port of our own.
      SV_LOG(kInfo, "RoCE: %s port %u is another process's; our packets come forwarded",
             addr_text(gid, ep.version).c_str(), static_cast<unsigned>(port));
      fd = open_roce_socket(gid, ep.version, 0);
    } else if (fd >= 0) {
      rx_fd = fd;
    }
    if (fd < 0) {
      SV_LOG(kError, "RoCE: cannot bind UDP %s: %s", addr_text(gid, ep.version).c_str(), std::strerror(-fd));
      close_all();
      return Status::error(-fd);
    }
    ep.fd = fd;
    ep.port = bound_port(fd);
    ep.tx_fd[0] = fd;
    ep.tx_port[0] = ep.port;
    for (size_t k = 1; k < kTxSockets; ++k) {
      const int t = open_roce_socket(gid, ep.version, 0);
      ep.tx_fd[k] = t >= 0 ? t : fd;  // without it, that flow shares the first port
      ep.tx_port[k] = t >= 0 ? bound_port(t) : ep.port;
    }
    eps.push_back(ep);
    rx_fds.push_back(rx_fd);
  }
  host_ = &host;
  local_ = &local;
  dst_port_ = port;
  // SOFTVERBS_ROCE_GSO=0: every packet its own datagram on the sender's
  // side too (captures on a veth then see segments without a gso_max_segs
  // setting; A/B measurements).
  if (const char* gso = std::getenv("SOFTVERBS_ROCE_GSO"); gso != nullptr && std::strcmp(gso, "0") == 0)
    gso_.store(false, std::memory_order_relaxed);
  if (const char* tlp = std::getenv("SOFTVERBS_ROCE_TLP"); tlp != nullptr && std::strcmp(tlp, "0") == 0)
    tail_probe_ = false;
  for (const int rx : rx_fds)
    if (rx >= 0) enable_gro(rx);
  receivers_ = std::make_unique<Receiver[]>(eps.size());
  for (size_t i = 0; i < eps.size(); ++i) {
    receivers_[i].buffers = std::make_unique<uint8_t[]>(kRxBatch * kRxBufferBytes);
    receivers_[i].fd.store(rx_fds[i], std::memory_order_relaxed);
  }
  endpoints_ = std::move(eps);
  const int e = forwarder_.start(
      host.seg().path(), host.self(),
      [this](uint8_t endpoint, const wire::Gid& from, uint16_t from_port, std::span<const uint8_t> ib) {
        if (endpoint >= endpoints_.size()) return;
        // Under the endpoint's receive lock like every datagram, so that
        // quiesce() covers forwarded ones too.
        std::lock_guard handling(receivers_[endpoint].mu);
        on_datagram(endpoints_[endpoint], Peer{from, from_port}, ib, false);
      },
      [this] { take_over_ports(); });
  if (e != 0) {
    SV_LOG(kError, "RoCE: cannot listen for forwarded packets: %s", std::strerror(e));
    close_all();
    endpoints_.clear();
    receivers_.reset();
    return Status::error(e);
  }
  if (fabric::port().faults.active()) {
    faults_ = std::make_unique<FaultLink>(
        fabric::port().faults,
        [this](size_t i, const wire::Gid& to, std::span<const uint8_t> d, uint8_t tc) {
          send_raw(endpoints_[i], to, d, tc);
        },
        [this](size_t i, const wire::Gid& to, std::span<const std::span<uint8_t>> d, uint8_t tc) {
          send_runs(endpoints_[i], to, d, true, tc);
        },
        host.notifier().port_counters());
    faults_->start();
    SV_LOG(kInfo, "RoCE: faults on the wire: %s", fault::format_fault_config(fabric::port().faults).c_str());
  }
  for (size_t i = 0; i < endpoints_.size(); ++i)
    if (rx_fds[i] >= 0) std::thread([this, i] { receive_loop(i); }).detach();
  started_ = true;
  return Status::ok();
}

// The process that received for an address has gone (or never was): bind it
// and receive for the device from now on.
void UdpFabric::take_over_ports() {
  std::lock_guard lock(start_mu_);
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const Endpoint& ep = endpoints_[i];
    if (receivers_[i].fd.load(std::memory_order_relaxed) >= 0) continue;
    const int fd = open_roce_socket(ep.gid, ep.version, dst_port_);
    if (fd < 0) continue;
    enable_gro(fd);
    SV_LOG(kInfo, "RoCE: %s port %u: we receive for the device now", addr_text(ep.gid, ep.version).c_str(),
           static_cast<unsigned>(dst_port_));
    receivers_[i].fd.store(fd, std::memory_order_release);
    std::thread([this, i] { receive_loop(i); }).detach();
  }
}

const UdpFabric::Endpoint* UdpFabric::endpoint_for(uint8_t sgid_index) const {
  return sgid_index < endpoints_.size() ? &endpoints_[sgid_index] : nullptr;
}

void UdpFabric::receive_loop(size_t index) {
  prctl(PR_SET_NAME, "softverbs-rx");
  Receiver& r = receivers_[index];
  const int fd = r.fd.load(std::memory_order_acquire);
  for (;;) {
    // Wait without the lock, so that a polling application thread can take
    // the socket meanwhile; then read under it. Full batches mean more is
    // queued: read on without waiting again.
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, -1) < 0 && errno != EINTR) {
      SV_LOG(kError, "RoCE: waiting to receive failed: %s", std::strerror(errno));
      return;
    }
    std::lock_guard lock(r.mu);
    int n;
    while ((n = receive_batch(index)) == static_cast<int>(kRxBatch)) {
    }
    if (n < 0 && n != -EAGAIN && n != -EINTR) {
      SV_LOG(kError, "RoCE: receive failed: %s", std::strerror(-n));
      return;
    }
  }
}

int UdpFabric::receive_batch(size_t index) {
  const Endpoint& ep = endpoints_[index];
  Receiver& r = receivers_[index];
  sockaddr_storage names[kRxBatch];
  iovec iov[kRxBatch];
  mmsghdr msgs[kRxBatch];
  alignas(cmsghdr) uint8_t control[kRxBatch][CMSG_SPACE(sizeof(int))];
  for (unsigned i = 0; i < kRxBatch; ++i) {
    iov[i] = {r.buffers.get() + i * kRxBufferBytes, kRxBufferBytes};
    std::memset(&msgs[i], 0, sizeof msgs[i]);
    msgs[i].msg_hdr.msg_name = &names[i];
    msgs[i].msg_hdr.msg_namelen = sizeof names[i];
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_control = control[i];
    msgs[i].msg_hdr.msg_controllen = sizeof control[i];
  }
  const int n = recvmmsg(r.fd.load(std::memory_order_relaxed), msgs, kRxBatch, MSG_DONTWAIT, nullptr);
  if (n < 0) return -errno;
  for (int i = 0; i < n; ++i) {
    Peer from;
    if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 || !from_sockaddr(names[i], &from.gid, &from.port)) {
      host_->notifier().port_counters().malformed_packets.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // A coalesced buffer is its datagrams back to back, each `segment`
    // bytes but the last, which may be shorter; each is handled as if it
    // had come alone, its payload placed straight from this buffer.
    const uint8_t* data = static_cast<const uint8_t*>(iov[i].iov_base);
    const size_t len = msgs[i].msg_len;
    const size_t segment = gro_segment_size(msgs[i].msg_hdr);
    if (segment == 0 || segment >= len) {
      on_datagram(ep, from, {data, len}, true);  // one datagram (an empty one is malformed there)
      continue;
    }
    for (size_t off = 0; off < len; off += segment)
      on_datagram(ep, from, {data + off, std::min(segment, len - off)}, true);
  }
  return n;
}

void UdpFabric::quiesce() {
  {
    std::lock_guard lock(start_mu_);
    if (!started_) return;
  }
  for (size_t i = 0; i < endpoints_.size(); ++i) std::lock_guard wait_for_handling(receivers_[i].mu);
}

bool UdpFabric::receive_now() {
  // One batch per endpoint at most: a poll of an empty CQ stays short.
  bool handled = false;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    Receiver& r = receivers_[i];
    if (r.fd.load(std::memory_order_acquire) < 0) continue;
    std::unique_lock lock(r.mu, std::try_to_lock);
    if (!lock.owns_lock()) continue;  // the receive thread has it
    handled |= receive_batch(i) > 0;
  }
  // Nothing came: what the caller waits for needs a receive thread to run
  // (ours, while the socket was taken, or the peer's on this host), and on
  // a machine with fewer cores than spinning threads it is queued behind
  // this one until the scheduler's tick. Stepping aside lets it run now: in
  // ib_write_lat between two namespaces on 2 cores, t_avg fell from 200-900
  // to 30-85 us and t_typical from 31-98 to 22-41 us. With nothing else to
  // run this returns at once, at the cost of the recvmmsg just made.
  if (!handled) sched_yield();
  return handled;
}

bool UdpFabric::icrc_ok(const Endpoint& ep, const wire::Gid& to, const Peer& from, std::span<const uint8_t> ib) const {
  wire::RoceUdpHeader h;
  h.version = ep.version;
  h.src = from.gid;
  h.dst = to;
  h.src_port = from.port;
  h.dst_port = dst_port_;  // it came to the device's port, forwarded or not
  uint8_t hdr[wire::kIpv6HeaderBytes + wire::kUdpHeaderBytes];
  const size_t n = wire::roce_write_headers(hdr, h, ib.size());
  if (n == 0 || ib.size() < wire::kBthBytes + wire::kIcrcBytes) return false;
  const std::optional<uint32_t> crc = wire::icrc_compute({hdr, n}, ib.first(ib.size() - wire::kIcrcBytes));
  if (!crc) return false;
  const uint32_t got = load_le32(ib.data() + ib.size() - wire::kIcrcBytes);
  if (*crc == got) return true;
  if (ep.version != wire::IpVersion::kV4) return false;
  // Not for identification 0: perhaps a later segment of a GSO send, whose
  // identification we cannot see (DESIGN.md, "RoCEv2 and the IPv4
  // identification"). Per thread: receive threads, polling threads and the
  // multicast thread check at once; each keeps the deltas of its last length.
  thread_local wire::IcrcIdTolerance tolerance;
  return tolerance.accepts(*crc, got, ib.size());
}

size_t UdpFabric::tx_socket_of(std::span<const uint8_t> ib) {
  if (ib.size() < wire::kBthBytes) return 0;
  const uint32_t dest_qp = uint32_t{ib[5]} << 16 | uint32_t{ib[6]} << 8 | ib[7];
  return (dest_qp * 0x9e3779b1u) >> 29;  // kTxSockets == 8
}

bool UdpFabric::seal(const Endpoint& ep, const wire::Gid& to, std::span<uint8_t> ib, uint16_t ipv4_id) {
  static_assert(kTxSockets == 8);
  wire::RoceUdpHeader h;
  h.ipv4_id = ipv4_id;
  h.version = ep.version;
  h.src = ep.gid;
  h.dst = to;
  h.src_port = ep.tx_port[tx_socket_of(ib)];
  h.dst_port = dst_port_;
  uint8_t hdr[wire::kIpv6HeaderBytes + wire::kUdpHeaderBytes];
  const size_t n = wire::roce_write_headers(hdr, h, ib.size());
  const std::optional<uint32_t> crc =
      n == 0 ? std::nullopt : wire::icrc_compute({hdr, n}, ib.first(ib.size() - wire::kIcrcBytes));
  if (!crc) {
    host_->notifier().port_counters().send_errors.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  store_le32(ib.data() + ib.size() - wire::kIcrcBytes, *crc);
  return true;
}

void UdpFabric::send(const Endpoint& ep, const wire::Gid& to, std::span<uint8_t> ib, uint8_t tc) {
  if (!seal(ep, to, ib)) return;
  if (faults_ != nullptr)
    faults_->send(static_cast<size_t>(&ep - endpoints_.data()), to, ib, tc);
  else
    send_raw(ep, to, ib, tc);
}

void UdpFabric::send_many(const Endpoint& ep, const wire::Gid& to, std::span<const std::span<uint8_t>> packets,
                          uint8_t tc) {
  if (packets.empty()) return;
  if (faults_ == nullptr) {
    send_runs(ep, to, packets, false, tc);
    return;
  }
  // The injector decides per packet, as on a wire; what it lets through now
  // still leaves in GSO runs (FaultLink::send_many), so a lossy run measures
  // the same send path as a clean one.
  constexpr size_t kChunk = 64;
  std::span<uint8_t> sealed[kChunk];
  size_t n = 0;
  for (std::span<uint8_t> ib : packets) {
    if (!seal(ep, to, ib)) continue;
    sealed[n++] = ib;
    if (n == kChunk) {
      faults_->send_many(static_cast<size_t>(&ep - endpoints_.data()), to, {sealed, n}, tc);
      n = 0;
    }
  }
  if (n > 0) faults_->send_many(static_cast<size_t>(&ep - endpoints_.data()), to, {sealed, n}, tc);
}

void UdpFabric::send_runs(const Endpoint& ep, const wire::Gid& to, std::span<const std::span<uint8_t>> packets,
                          bool sealed, uint8_t tc) {
  if (packets.empty()) return;
  // One message's packets: one destination QP, one socket, one syscall.
  // A run of packets of one size (the middle of a burst; a shorter last one
  // may end it) is one GSO datagram (UDP_SEGMENT): the kernel cuts it into
  // the packets again, on the wire or in the peer's socket, and a veth
  // carries it whole to a UDP_GRO receiver. Linux numbers the segments' IPv4
  // identifications 0, 1, 2, ... (DF set, unconnected socket: checked on
  // 6.18 with a capture), so packet k of a run is sealed for identification
  // k; a packet alone stays a plain datagram with identification 0.
  // `sealed` packets (through the FaultLink, perhaps corrupted) have their
  // ICRC for identification 0: segment k's is moved to k by the CRC's
  // linearity, which leaves a corrupted one as wrong as it was. A packet
  // whose (corrupted) QPN picks another socket than the first ends the call:
  // its source port is in its ICRC.
  constexpr size_t kMaxMsgs = 16;
  constexpr size_t kMaxIov = 64;
  // A UDP datagram's payload under a 20-byte IPv4 header, and the segment
  // count every kernel with UDP_SEGMENT takes (UDP_MAX_SEGMENTS).
  constexpr size_t kMaxGsoBytes = 65535 - wire::kIpv4HeaderBytes - wire::kUdpHeaderBytes;
  constexpr size_t kMaxGsoSegments = wire::IcrcIdTolerance::kIds;
  const size_t max_run = gso_.load(std::memory_order_relaxed) ? kMaxGsoSegments : 1;
  sockaddr_storage sa;
  const socklen_t len = to_sockaddr(to, dst_port_, &sa);
  iovec iov[kMaxIov];
  mmsghdr msgs[kMaxMsgs];
  alignas(cmsghdr) uint8_t control[kMaxMsgs][CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(int))];
  uint32_t packets_of[kMaxMsgs];
  uint64_t bytes_of[kMaxMsgs];
  size_t n = 0;
  size_t used = 0;  // iovecs
  size_t next = 0;  // packets taken
  const size_t socket = tx_socket_of(packets[0]);
  while (next < packets.size() && n < kMaxMsgs && used < kMaxIov && tx_socket_of(packets[next]) == socket) {
    const size_t segment = packets[next].size();
    const size_t first = used;
    uint64_t bytes = 0;
    uint16_t k = 0;
    while (next < packets.size() && used < kMaxIov && k < max_run) {
      const std::span<uint8_t> ib = packets[next];
      if (k > 0 && (ib.size() > segment || bytes + ib.size() > kMaxGsoBytes || tx_socket_of(ib) != socket)) break;
      ++next;
      if (sealed) {
        if (k > 0 && ep.version == wire::IpVersion::kV4) {
          thread_local wire::IcrcIdDeltas deltas;
          uint8_t* icrc = ib.data() + ib.size() - wire::kIcrcBytes;
          store_le32(icrc, load_le32(icrc) ^ deltas.delta(ib.size(), k));
        }
      } else if (!seal(ep, to, ib, k)) {
        continue;
      }
      iov[used++] = {ib.data(), ib.size()};
      bytes += ib.size();
      ++k;
      if (ib.size() < segment) break;  // only the last segment may be shorter
    }
    if (k == 0) continue;
    mmsghdr& m = msgs[n];
    std::memset(&m, 0, sizeof m);
    m.msg_hdr.msg_name = &sa;
    m.msg_hdr.msg_namelen = len;
    m.msg_hdr.msg_iov = &iov[first];
    m.msg_hdr.msg_iovlen = k;
    // Ancillary data: the GSO segment size for a run, the DSCP/ECN byte
    // for a traffic class other than 0.
    const size_t control_len =
        (k > 1 ? CMSG_SPACE(sizeof(uint16_t)) : 0) + (tc != 0 ? CMSG_SPACE(sizeof(int)) : 0);
    if (control_len != 0) {
      std::memset(control[n], 0, control_len);
      m.msg_hdr.msg_control = control[n];
      m.msg_hdr.msg_controllen = control_len;
      cmsghdr* c = CMSG_FIRSTHDR(&m.msg_hdr);
      if (k > 1) {
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const uint16_t size = static_cast<uint16_t>(segment);
        std::memcpy(CMSG_DATA(c), &size, sizeof size);
        c = CMSG_NXTHDR(&m.msg_hdr, c);
      }
      if (tc != 0) write_tos_cmsg(ep.version, tc, c);
    }
    packets_of[n] = k;
    bytes_of[n] = bytes;
    ++n;
  }
  shm::PortCounters& c = host_->notifier().port_counters();
  const int sent = n == 0 ? 0 : sendmmsg(ep.tx_fd[socket], msgs, static_cast<unsigned>(n), MSG_DONTWAIT);
  if (sent < 0 && (errno == EIO || errno == EINVAL) && packets_of[0] > 1 && gso_.exchange(false)) {
    // No UDP GSO on this path (no checksum offload, an old kernel): plain
    // datagrams from now on. These packets are lost; the requester resends.
    SV_LOG(kWarn, "RoCE: UDP GSO refused (%s): one datagram per packet from now on", std::strerror(errno));
  }
  // What the socket did not take is lost, as on a wire: the requester recovers it.
  const size_t ok = sent < 0 ? 0 : static_cast<size_t>(sent);
  uint64_t ok_packets = 0, ok_bytes = 0, lost = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i < ok) {
      ok_packets += packets_of[i];
      ok_bytes += bytes_of[i];
    } else {
      lost += packets_of[i];
    }
  }
  if (lost != 0) c.send_errors.fetch_add(lost, std::memory_order_relaxed);
  c.xmit_packets.fetch_add(ok_packets, std::memory_order_relaxed);
  c.xmit_bytes.fetch_add(ok_bytes, std::memory_order_relaxed);
  if (next < packets.size()) send_runs(ep, to, packets.subspan(next), sealed, tc);
}

void UdpFabric::send_raw(const Endpoint& ep, const wire::Gid& to, std::span<const uint8_t> ib, uint8_t tc) {
  shm::PortCounters& c = host_->notifier().port_counters();
  sockaddr_storage sa;
  const socklen_t len = to_sockaddr(to, dst_port_, &sa);
  // A full socket buffer or an unreachable peer is a lost packet: the
  // requester's timers recover it, as they would on a wire.
  // The socket the ICRC was computed for (a corrupted QPN picks another: the
  // receiver drops it either way).
  iovec iov{const_cast<uint8_t*>(ib.data()), ib.size()};
  msghdr m{};
  m.msg_name = &sa;
  m.msg_namelen = len;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  TosControl tos;
  tos.attach(ep.version, tc, &m);
  if (sendmsg(ep.tx_fd[tx_socket_of(ib)], &m, MSG_DONTWAIT) < 0) {
    c.send_errors.fetch_add(1, std::memory_order_relaxed);
    SV_LOG_RATELIMITED(kDebug, "RoCE: send failed: %s", std::strerror(errno));
    return;
  }
  c.xmit_packets.fetch_add(1, std::memory_order_relaxed);
  c.xmit_bytes.fetch_add(ib.size(), std::memory_order_relaxed);
}

void UdpFabric::on_datagram(const Endpoint& ep, const Peer& from, std::span<const uint8_t> ib, bool may_forward) {
  shm::PortCounters& c = host_->notifier().port_counters();
  const wire::PacketView v = wire::PacketView::parse(ib, 4096);
  if (!v.ok()) {
    c.malformed_packets.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!icrc_ok(ep, ep.gid, from, ib)) {
    c.icrc_errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint32_t dest_qp = v.bth().dest_qp;
  // QP1 is shared by the device's processes: the MAD says whose agent it is for.
  if (dest_qp == wire::cm::kGsiQpn && v.has(wire::Header::kDeth)) dest_qp = gsi_route(host_->seg().path(), v.payload());
  const int slot = transport::qp_slot_of(host_->seg(), dest_qp);
  if (slot < 0) {
    c.unknown_qp_packets.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const shm::OwnerId owner = host_->seg().qp(static_cast<uint32_t>(slot)).owner;
  if (!(owner == host_->self())) {
    // Another process's QP on this device: it gets the packet as it came.
    if (!may_forward || !forwarder_.forward(owner, static_cast<uint8_t>(&ep - endpoints_.data()), from.gid, from.port, ib))
      c.unknown_qp_packets.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // A packet of another transport than the QP's is not for it (IBA 9.6.1.4).
  const uint8_t type = host_->seg().qp(static_cast<uint32_t>(slot)).qp_type;
  if ((v.info().qp_types & transport::wire_transport(type)) == 0) {
    c.dropped_requests.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (v.info().any(wire::OpFlag::kRequest))
    on_request(ep, ep.gid, from, static_cast<uint32_t>(slot), v);
  else if (transport::reliable_qp(type))
    on_response(from, static_cast<uint32_t>(slot), v);
}

}  // namespace softverbs::fabric::udp
