// The multicast GID and LID an IP multicast address joins, as the kernel's
// rdma_cm derives them (cma_set_mgid, cma_iboe_set_mgid), so a softverbs
// host and a Linux host joining the same address meet in the same group.
//
//   - RoCE: IPv4 a.b.c.d -> ::ffff:a.b.c.d (RoCEv2, rdma_gid2ip's inverse);
//     IPv6 -> the address itself.
//   - InfiniBand (softverbs0): the IPoIB mapping (RFC 4391) with the
//     default P_Key 0xffff and link-local scope: IPv4 -> ff12:401b:ffff::
//     with the address's low 28 bits, IPv6 -> ff12:601b:ffff: with its low
//     80 bits; an RDMA_PS_UDP id puts the RDMA CM's signature 0x01 in place
//     of 0x1b, as the kernel does. An IPv6 address that already is an
//     SA-assigned MGID (ff1x:a01b::) is taken as it is.
//
// Header-only: pure functions, unit-tested without the CM (mcast_gid_test.cc).
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>

namespace softverbs::cm {

inline bool is_multicast_addr(const sockaddr* sa) {
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    return IN_MULTICAST(ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr));
  }
  if (sa->sa_family == AF_INET6) return IN6_IS_ADDR_MULTICAST(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  return false;
}

// REQUIRES: is_multicast_addr(sa).
inline ibv_gid mcast_mgid(const sockaddr* sa, bool roce, rdma_port_space ps) {
  ibv_gid g{};
  if (sa->sa_family == AF_INET) {
    const auto* s4 = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(g.raw + 12, &s4->sin_addr, 4);
    if (roce) {
      g.raw[10] = 0xff;
      g.raw[11] = 0xff;
      return g;
    }
    g.raw[12] &= 0x0f;
    g.raw[0] = 0xff;
    g.raw[1] = 0x12;
    g.raw[2] = 0x40;
    g.raw[3] = ps == RDMA_PS_UDP ? 0x01 : 0x1b;
    g.raw[4] = 0xff;
    g.raw[5] = 0xff;
    return g;
  }
  const uint8_t* a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr.s6_addr;
  const bool sa_assigned = a[0] == 0xff && (a[1] & 0xf0) == 0x10 && a[2] == 0xa0 && a[3] == 0x1b;
  if (roce || sa_assigned) {
    std::memcpy(g.raw, a, 16);
    return g;
  }
  g.raw[0] = 0xff;
  g.raw[1] = 0x12;
  g.raw[2] = 0x60;
  g.raw[3] = ps == RDMA_PS_UDP ? 0x01 : 0x1b;
  g.raw[4] = 0xff;
  g.raw[5] = 0xff;
  std::memcpy(g.raw + 6, a + 6, 10);
  return g;
}

// The MLID of a group on softverbs0. With no SA to hand one out, every
// process derives the same one from the MGID (FNV-1a folded into
// 0xc000..0xfffe); groups are told apart by MGID, so a shared MLID costs
// nothing. A RoCE port has no LIDs: 0.
inline uint16_t mcast_mlid(const ibv_gid& mgid, bool roce) {
  if (roce) return 0;
  uint32_t h = 2166136261u;
  for (uint8_t b : mgid.raw) h = (h ^ b) * 16777619u;
  return static_cast<uint16_t>(0xc000 + h % 0x3fff);
}

}  // namespace softverbs::cm
