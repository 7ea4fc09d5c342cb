// RoCEv2 multicast (IBA annex A17.4, as Linux's rxe does it): a group's MGID
// is an IP multicast address; a datagram to the group leaves as one UDP
// datagram to that address (transmit needs nothing of its own) and the IP
// network replicates it. Here: joining and leaving the IP groups, and the one
// thread per process that receives from them and hands each datagram to the
// QPs of this process attached to the group (shm/mcast_groups.h).
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "fabric/fabrics.h"
#include "fabric/udp/sockaddr.h"
#include "fabric/udp/udp_fabric.h"
#include "shm/mcast_groups.h"
#include "transport/responder.h"
#include "util/log.h"
#include "util/raw_socket.h"

namespace softverbs::fabric::udp {
namespace {

// A socket that receives the group's datagrams to `port` on the interface of
// `local`, or -errno. Bound to the group's address (not the wildcard, which
// the device's unicast sockets hold), with SO_REUSEADDR: every process of the
// host that joins gets its own copy of each datagram.
int open_group_socket(const wire::Gid& mgid, const wire::Gid& local, uint16_t port) {
  const bool v4 = is_v4_mapped(mgid);
  const int fd = raw_socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  const int on = 1;
  const int off = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  // Room for a burst, as the unicast sockets have (open_roce_socket).
  const int buf = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  sockaddr_storage sa;
  const socklen_t len = to_sockaddr(mgid, port, &sa);
  // An interface- or link-local group (ff01::/16, ff02::/16, perftest's
  // default) exists only on an interface: bound with its index.
  if (!v4 && (mgid[1] & 0x0f) <= 2) reinterpret_cast<sockaddr_in6*>(&sa)->sin6_scope_id = interface_of(local);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&sa), len);
  if (rc == 0 && v4) {
    // Only the groups this socket joined, whatever others on the host join.
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &off, sizeof off);
    ip_mreq join{};
    std::memcpy(&join.imr_multiaddr, mgid.data() + 12, 4);
    std::memcpy(&join.imr_interface, local.data() + 12, 4);
    rc = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join);
  } else if (rc == 0) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    ipv6_mreq join{};
    std::memcpy(&join.ipv6mr_multiaddr, mgid.data(), 16);
    join.ipv6mr_interface = interface_of(local);
    rc = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &join, sizeof join);
  }
  if (rc != 0) {
    const int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

void drop_membership(int fd, const wire::Gid& mgid, const wire::Gid& local) {
  if (is_v4_mapped(mgid)) {
    ip_mreq leave{};
    std::memcpy(&leave.imr_multiaddr, mgid.data() + 12, 4);
    std::memcpy(&leave.imr_interface, local.data() + 12, 4);
    setsockopt(fd, IPPROTO_IP, IP_DROP_MEMBERSHIP, &leave, sizeof leave);
  } else {
    ipv6_mreq leave{};
    std::memcpy(&leave.ipv6mr_multiaddr, mgid.data(), 16);
    leave.ipv6mr_interface = interface_of(local);
    setsockopt(fd, IPPROTO_IPV6, IPV6_LEAVE_GROUP, &leave, sizeof leave);
  }
}

// The multicast thread's set of groups changed. An eventfd write fails only
// when its counter is full, which wakes the thread just as well.
void wake(int fd) {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(fd, &one, sizeof one);
}

}  // namespace

Status UdpFabric::join(const uint8_t mgid_bytes[16]) {
  wire::Gid mgid;
  std::memcpy(mgid.data(), mgid_bytes, 16);
  const wire::IpVersion version = is_v4_mapped(mgid) ? wire::IpVersion::kV4 : wire::IpVersion::kV6;
  // The port's first address of the group's IP version names the interface.
  size_t endpoint = endpoints_.size();
  for (size_t i = 0; i < endpoints_.size() && endpoint == endpoints_.size(); ++i)
    if (endpoints_[i].version == version) endpoint = i;
  if (endpoint == endpoints_.size()) return Status::error(EINVAL);
  std::lock_guard lock(mcast_mu_);
  for (McastSocket& m : mcast_) {
    if (m.mgid != mgid) continue;
    ++m.qps;
    return Status::ok();
  }
  if (mcast_wake_ < 0) {
    mcast_wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (mcast_wake_ < 0) return Status::error(errno);
    std::thread([this] { multicast_loop(); }).detach();
  }
  const int fd = open_group_socket(mgid, endpoints_[endpoint].gid, dst_port_);
  if (fd < 0) {
    SV_LOG(kError, "RoCE: cannot join multicast group %s: %s",
           addr_text(mgid, version).c_str(), std::strerror(-fd));
    return Status::error(-fd);
  }
  mcast_.push_back({mgid, endpoint, fd, 1});
  wake(mcast_wake_);
  return Status::ok();
}

void UdpFabric::leave(const uint8_t mgid_bytes[16]) {
  wire::Gid mgid;
  std::memcpy(mgid.data(), mgid_bytes, 16);
  std::lock_guard lock(mcast_mu_);
  for (size_t i = 0; i < mcast_.size(); ++i) {
    if (mcast_[i].mgid != mgid) continue;
    if (--mcast_[i].qps != 0) return;
    drop_membership(mcast_[i].fd, mgid, endpoints_[mcast_[i].endpoint].gid);
    mcast_closing_.push_back(mcast_[i].fd);
    mcast_.erase(mcast_.begin() + static_cast<ptrdiff_t>(i));
    wake(mcast_wake_);
    return;
  }
}

void UdpFabric::multicast_loop() {
  prctl(PR_SET_NAME, "softverbs-mcast");
  auto buffers = std::make_unique<uint8_t[]>(kRxBatch * kMaxIbPacket);
  std::vector<McastSocket> groups;
  std::vector<pollfd> ready;
  for (;;) {
    {
      std::lock_guard lock(mcast_mu_);
      for (int fd : mcast_closing_) close(fd);
      mcast_closing_.clear();
      groups = mcast_;
      ready.assign(1, pollfd{mcast_wake_, POLLIN, 0});
    }
    for (const McastSocket& g : groups) ready.push_back(pollfd{g.fd, POLLIN, 0});
    if (poll(ready.data(), ready.size(), -1) < 0 && errno != EINTR) {
      SV_LOG(kError, "RoCE: waiting for multicast failed: %s", std::strerror(errno));
      return;
    }
    if ((ready[0].revents & POLLIN) != 0) {
      uint64_t count;
      [[maybe_unused]] const ssize_t n = read(mcast_wake_, &count, sizeof count);  // resets the counter
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      if ((ready[i + 1].revents & POLLIN) == 0) continue;
      const McastSocket& g = groups[i];
      // Under the endpoint's receive lock like every datagram (quiesce).
      std::lock_guard handling(receivers_[g.endpoint].mu);
      for (unsigned n = 0; n < kRxBatch; ++n) {
        sockaddr_storage name{};
        socklen_t name_len = sizeof name;
        uint8_t* buf = buffers.get() + n * kMaxIbPacket;
        const ssize_t got = recvfrom(g.fd, buf, kMaxIbPacket, MSG_DONTWAIT | MSG_TRUNC,
                                     reinterpret_cast<sockaddr*>(&name), &name_len);
        if (got < 0) break;
        Peer from;
        if (static_cast<size_t>(got) > kMaxIbPacket || !from_sockaddr(name, &from.gid, &from.port)) {
          host_->notifier().port_counters().malformed_packets.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        on_multicast_datagram(endpoints_[g.endpoint], g.mgid, from, {buf, static_cast<size_t>(got)});
      }
    }
  }
}

void UdpFabric::on_multicast_datagram(const Endpoint& ep, const wire::Gid& mgid, const Peer& from,
                                      std::span<const uint8_t> ib) {
  shm::PortCounters& c = host_->notifier().port_counters();
  const wire::PacketView v = wire::PacketView::parse(ib, 4096);
  if (!v.ok()) {
    c.malformed_packets.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!icrc_ok(ep, mgid, from, ib)) {
    c.icrc_errors.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // IBA 10.5.2.5: only UD requests to DestQP 0xFFFFFF are multicast.
  if (v.bth().dest_qp != shm::kMulticastQpn || (v.info().qp_types & wire::QpTypes::kUd) == 0 ||
      !v.info().any(wire::OpFlag::kRequest) || !v.has(wire::Header::kDeth)) {
    c.dropped_requests.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  shm::Segment& seg = host_->seg();
  // The sending QP, when it is ours: our own datagram, looped back by IP.
  const uint32_t src_qp = v.deth().src_qp;
  const bool from_us = port().gid_index(from.gid.data()) >= 0;
  shm::for_each_mcast_member(seg, mgid.data(), 0, [&](const shm::SharedMcastGroup&, uint32_t qpn) {
    const int slot = transport::qp_slot_of(seg, qpn);
    if (slot < 0) return;
    const shm::SharedQp& qp = seg.qp(static_cast<uint32_t>(slot));
    if (!(qp.owner == host_->self()) || qp.qp_type != IBV_QPT_UD) return;  // each process serves its own
    if (from_us && qpn == src_qp && qp.block_self_mcast != 0) return;
    on_request(ep, mgid, from, static_cast<uint32_t>(slot), v);
  });
}

}  // namespace softverbs::fabric::udp
