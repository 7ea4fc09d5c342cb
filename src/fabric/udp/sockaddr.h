// RoCEv2 addresses as socket addresses: a GID is an IPv6 address, or an
// IPv4 one when IPv4-mapped (::ffff:a.b.c.d), as Linux's rdma_gid2ip has it.
#pragma once

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <string>

#include "wire/roce_udp.h"

namespace softverbs::fabric::udp {

inline bool is_v4_mapped(const wire::Gid& g) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.data(), kPrefix, 12) == 0;
}

inline socklen_t to_sockaddr(const wire::Gid& g, uint16_t port, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  if (is_v4_mapped(g)) {
    auto* a = reinterpret_cast<sockaddr_in*>(out);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    std::memcpy(&a->sin_addr, g.data() + 12, 4);
    return sizeof *a;
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(out);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(port);
  std::memcpy(&a->sin6_addr, g.data(), 16);
  return sizeof *a;
}

inline bool from_sockaddr(const sockaddr_storage& s, wire::Gid* gid, uint16_t* port) {
  if (s.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&s);
    const auto* b = reinterpret_cast<const uint8_t*>(&a->sin_addr);
    *gid = wire::gid_from_ipv4(b[0], b[1], b[2], b[3]);
    *port = ntohs(a->sin_port);
    return true;
  }
  if (s.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&s);
    std::memcpy(gid->data(), &a->sin6_addr, 16);
    *port = ntohs(a->sin6_port);
    return true;
  }
  return false;
}

// The index of the interface that has IPv6 address `gid`, or 0.
inline unsigned interface_of(const wire::Gid& gid) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return 0;
  unsigned index = 0;
  for (const ifaddrs* i = all; i != nullptr && index == 0; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET6) continue;
    const auto* a = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
    if (std::memcmp(&a->sin6_addr, gid.data(), 16) == 0) index = if_nametoindex(i->ifa_name);
  }
  freeifaddrs(all);
  return index;
}

// For log lines.
inline std::string addr_text(const wire::Gid& gid, wire::IpVersion v) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(v == wire::IpVersion::kV4 ? AF_INET : AF_INET6, v == wire::IpVersion::kV4 ? gid.data() + 12 : gid.data(),
            text, sizeof text);
  return text;
}

}  // namespace softverbs::fabric::udp
