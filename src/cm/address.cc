#include "cm/address.h"

#include <arpa/inet.h>
#include <endian.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

namespace softverbs::cm {

namespace {

const sockaddr_ib* as_ib(const sockaddr* sa) { return reinterpret_cast<const sockaddr_ib*>(sa); }
sockaddr_ib* as_ib(sockaddr* sa) { return reinterpret_cast<sockaddr_ib*>(sa); }

static_assert(shm::kFamilyIb == AF_IB);
constexpr uint64_t kSidPsIb = uint64_t{RDMA_PS_IB} << 16;  // RDMA_IB_IP_PS_IB, absent from older headers

}  // namespace

shm::TableAddr table_addr(const sockaddr* sa) {
  shm::TableAddr a;
  a.family = static_cast<uint8_t>(sa->sa_family);
  if (sa->sa_family == AF_IB) {
    std::memcpy(a.bytes.data(), &as_ib(sa)->sib_addr, 16);
  } else if (sa->sa_family == AF_INET) {
    std::memcpy(a.bytes.data() + 12, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  }
  return a;
}

bool is_wildcard(const sockaddr* sa) { return table_addr(sa).wildcard(); }

uint16_t port_of(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  if (sa->sa_family == AF_IB) return static_cast<uint16_t>(be64toh(as_ib(sa)->sib_sid) & be64toh(as_ib(sa)->sib_sid_mask));
  return 0;
}

void set_port(sockaddr* sa, uint16_t port) {
  if (sa->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(sa)->sin_port = htons(port);
  if (sa->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = htons(port);
  if (sa->sa_family == AF_IB) {  // as the kernel's cma_bind_port: the whole ID is now fixed
    sockaddr_ib* sib = as_ib(sa);
    const uint64_t sid = be64toh(sib->sib_sid) & be64toh(sib->sib_sid_mask);
    sib->sib_sid = htobe64((sid & RDMA_IB_IP_PS_MASK) | port);
    sib->sib_sid_mask = htobe64(~uint64_t{0});
  }
}

socklen_t sockaddr_len(const sockaddr* sa) {
  if (sa->sa_family == AF_IB) return sizeof(sockaddr_ib);
  return sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t select_ib_ps(uint16_t id_ps, sockaddr_ib* sib) {
  const uint64_t mask = be64toh(sib->sib_sid_mask) & RDMA_IB_IP_PS_MASK;
  const uint64_t sid = be64toh(sib->sib_sid) & mask;
  uint64_t sid_ps = 0;
  uint16_t ps = 0;
  if (id_ps == RDMA_PS_IB && sid == (kSidPsIb & mask)) {
    sid_ps = kSidPsIb;
    ps = RDMA_PS_IB;
  } else if ((id_ps == RDMA_PS_IB || id_ps == RDMA_PS_TCP) && sid == (RDMA_IB_IP_PS_TCP & mask)) {
    sid_ps = RDMA_IB_IP_PS_TCP;
    ps = RDMA_PS_TCP;
  } else if ((id_ps == RDMA_PS_IB || id_ps == RDMA_PS_UDP) && sid == (RDMA_IB_IP_PS_UDP & mask)) {
    sid_ps = RDMA_IB_IP_PS_UDP;
    ps = RDMA_PS_UDP;
  }
  if (ps != 0) {
    const uint64_t port = be64toh(sib->sib_sid) & be64toh(sib->sib_sid_mask) & RDMA_IB_IP_PORT_MASK;
    sib->sib_sid = htobe64(sid_ps | port);
    sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | be64toh(sib->sib_sid_mask));
  }
  return ps;
}

uint64_t service_id_of(uint16_t ps, const sockaddr* dst) {
  if (dst->sa_family == AF_IB) return be64toh(as_ib(dst)->sib_sid);
  return uint64_t(ps) << 16 | port_of(dst);
}

Device* ib_device_of_gid(const std::vector<Device*>& devs, const ibv_gid& g) {
  for (Device* d : devs) {
    if (!d->roce && std::memcmp(d->gid.raw, g.raw, 16) == 0) return d;
  }
  return nullptr;
}

Device* ib_device_for_dest(const std::vector<Device*>& devs, const ibv_gid& g) {
  if (Device* d = ib_device_of_gid(devs, g)) return d;
  for (Device* d : devs) {
    if (!d->roce && std::memcmp(d->gid.raw, g.raw, 8) == 0) return d;
  }
  return nullptr;
}

ibv_gid gid_of(const sockaddr* sa) {
  ibv_gid g{};
  if (sa->sa_family == AF_INET) {
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    std::memcpy(g.raw, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  } else if (sa->sa_family == AF_IB) {
    std::memcpy(g.raw, &as_ib(sa)->sib_addr, 16);
  }
  return g;
}

namespace {

bool loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* a6 = &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(a6)) return a6->s6_addr[12] == 127;
  }
  return false;
}

bool host_address(const sockaddr* sa) {
  if (loopback(sa)) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  const shm::TableAddr want = table_addr(sa);
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != sa->sa_family) continue;
    found = table_addr(i->ifa_addr) == want;
  }
  freeifaddrs(list);
  return found;
}

bool owns_gid(const Device* d, const sockaddr* sa) {
  const ibv_gid g = gid_of(sa);
  return std::memcmp(g.raw, d->gid.raw, 16) == 0;
}

}  // namespace

Device* device_of_local(const std::vector<Device*>& devs, const sockaddr* sa) {
  for (Device* d : devs) {
    if (d->roce && owns_gid(d, sa)) return d;
  }
  if (host_address(sa)) {
    for (Device* d : devs) {
      if (!d->roce) return d;
    }
  }
  return nullptr;
}

Device* device_for_dest(const std::vector<Device*>& devs, const sockaddr* dst) {
  for (Device* d : devs) {
    if (d->roce && owns_gid(d, dst)) return d;
  }
  if (host_address(dst)) {
    for (Device* d : devs) {
      if (!d->roce) return d;
    }
  }
  for (Device* d : devs) {
    if (d->roce) return d;
  }
  return nullptr;
}

Device* device_for_group(const std::vector<Device*>& devs, Device* bound, const sockaddr* src) {
  if (src != nullptr && (src->sa_family == AF_INET || src->sa_family == AF_INET6) && !is_wildcard(src)) {
    return device_of_local(devs, src);
  }
  if (bound != nullptr) return bound;
  for (Device* d : devs) {
    if (d->roce) return d;
  }
  return devs.empty() ? nullptr : devs.front();
}

void source_for(const Device* dev, const sockaddr* dst, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  if (dev->roce) {
    const bool v4 = IN6_IS_ADDR_V4MAPPED(reinterpret_cast<const in6_addr*>(dev->gid.raw));
    if (v4) {
      auto* s = reinterpret_cast<sockaddr_in*>(out);
      s->sin_family = AF_INET;
      std::memcpy(&s->sin_addr, dev->gid.raw + 12, 4);
    } else {
      auto* s = reinterpret_cast<sockaddr_in6*>(out);
      s->sin6_family = AF_INET6;
      std::memcpy(&s->sin6_addr, dev->gid.raw, 16);
    }
    return;
  }
  // The host device: a local destination is reached from itself, a group
  // from the loopback address.
  std::memcpy(out, dst, sockaddr_len(dst));
  if (dst->sa_family == AF_INET && IN_MULTICAST(ntohl(reinterpret_cast<const sockaddr_in*>(dst)->sin_addr.s_addr))) {
    reinterpret_cast<sockaddr_in*>(out)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else if (dst->sa_family == AF_INET6 && IN6_IS_ADDR_MULTICAST(&reinterpret_cast<const sockaddr_in6*>(dst)->sin6_addr)) {
    reinterpret_cast<sockaddr_in6*>(out)->sin6_addr = in6addr_loopback;
  }
  set_port(reinterpret_cast<sockaddr*>(out), 0);
}

}  // namespace softverbs::cm
