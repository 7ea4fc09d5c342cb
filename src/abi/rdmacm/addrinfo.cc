// rdma_getaddrinfo / rdma_freeaddrinfo: getaddrinfo(3) for the CM, one
// result as librdmacm gives: the node is the destination, or with
// RAI_PASSIVE the source; without node and service, the hints' addresses;
// the hints' source address fills a missing one; port space from the hints
// (or the QP type), TCP by default. RAI_FAMILY with AF_IB and
// RAI_NUMERICHOST reads the node as a GID (an IPv6 literal) and gives an
// IB address whose service ID is (port space << 16) | port, as librdmacm's
// ucma_convert_in6 and ucma_set_sid.
#include <endian.h>
#include <infiniband/ib.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "abi/rdmacm/abi.h"

namespace {

sockaddr* copy_addr(const sockaddr* sa, socklen_t len) {
  auto* out = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
  if (out != nullptr) std::memcpy(out, sa, len);
  return out;
}

// The IB address of a GID written as an IPv6 address; the port space is
// filled in once known (set_sid).
sockaddr* ib_from_in6(const sockaddr* sa) {
  auto* sib = static_cast<sockaddr_ib*>(std::calloc(1, sizeof(sockaddr_storage)));
  if (sib == nullptr) return nullptr;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  sib->sib_family = AF_IB;
  sib->sib_pkey = htobe16(0xffff);
  sib->sib_flowinfo = in6->sin6_flowinfo;
  std::memcpy(&sib->sib_addr, &in6->sin6_addr, 16);
  sib->sib_sid = htobe64(ntohs(in6->sin6_port));  // the port, until set_sid
  sib->sib_scope_id = in6->sin6_scope_id;
  return reinterpret_cast<sockaddr*>(sib);
}

void set_sid(int ps, sockaddr* sa) {
  if (sa == nullptr || sa->sa_family != AF_IB) return;
  auto* sib = reinterpret_cast<sockaddr_ib*>(sa);
  const uint64_t port = be64toh(sib->sib_sid) & RDMA_IB_IP_PORT_MASK;
  sib->sib_sid = htobe64(uint64_t(unsigned(ps)) << 16 | port);
  uint64_t mask = ps != 0 ? RDMA_IB_IP_PS_MASK : 0;
  if (port != 0) mask |= RDMA_IB_IP_PORT_MASK;
  sib->sib_sid_mask = htobe64(mask);
}

}  // namespace

SV_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

namespace {

// No node and no service: the hints' own addresses (libfabric passes them so).
int from_hints(const rdma_addrinfo* hints, rdma_addrinfo* r) {
  r->ai_flags = hints->ai_flags;
  r->ai_family = hints->ai_family;
  r->ai_qp_type = hints->ai_qp_type;
  r->ai_port_space = hints->ai_port_space;
  if (hints->ai_dst_addr != nullptr && hints->ai_dst_len > 0) {
    if ((r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len)) == nullptr) return ENOMEM;
    r->ai_dst_len = hints->ai_dst_len;
    if (r->ai_family == 0) r->ai_family = hints->ai_dst_addr->sa_family;
  }
  return 0;
}

}  // namespace

SV_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                               rdma_addrinfo** res) {
  if (res == nullptr || (node == nullptr && service == nullptr && hints == nullptr)) {
    errno = EINVAL;
    return -1;
  }
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (r == nullptr) {
    errno = ENOMEM;
    return -1;
  }
  const int flags = hints != nullptr ? hints->ai_flags : 0;
  if (node == nullptr && service == nullptr) {
    if (const int e = from_hints(hints, r); e != 0) {
      rdma_freeaddrinfo(r);
      errno = e;
      return -1;
    }
  } else {
    const bool ib = hints != nullptr && (flags & RAI_FAMILY) && hints->ai_family == AF_IB;
    addrinfo ai_hints{};
    ai_hints.ai_family = hints != nullptr ? hints->ai_family : AF_UNSPEC;
    // A GID reads as an IPv6 literal; AF_IB without a numeric host is
    // resolved as an IP name (librdmacm leaves the family out then).
    if (hints != nullptr && hints->ai_family == AF_IB) ai_hints.ai_family = ib && (flags & RAI_NUMERICHOST) ? AF_INET6 : AF_UNSPEC;
    ai_hints.ai_socktype = SOCK_STREAM;
    if (flags & RAI_PASSIVE) ai_hints.ai_flags |= AI_PASSIVE;
    if (flags & RAI_NUMERICHOST) ai_hints.ai_flags |= AI_NUMERICHOST;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(node, service, &ai_hints, &found); rc != 0) {
      rdma_freeaddrinfo(r);
      errno = rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL;
      return rc;  // librdmacm returns getaddrinfo's code
    }
    const bool to_ib = ib && (flags & RAI_NUMERICHOST) && found->ai_family == AF_INET6;
    r->ai_flags = flags;
    r->ai_family = to_ib ? AF_IB : found->ai_family;
    r->ai_qp_type = hints != nullptr ? hints->ai_qp_type : 0;
    r->ai_port_space = hints != nullptr ? hints->ai_port_space : 0;
    sockaddr* addr = to_ib ? ib_from_in6(found->ai_addr) : copy_addr(found->ai_addr, found->ai_addrlen);
    const auto len = to_ib ? socklen_t{sizeof(sockaddr_ib)} : found->ai_addrlen;
    if (flags & RAI_PASSIVE) {
      r->ai_src_addr = addr;
      r->ai_src_len = len;
    } else {
      r->ai_dst_addr = addr;
      r->ai_dst_len = len;
    }
    freeaddrinfo(found);
    if (addr == nullptr) {
      rdma_freeaddrinfo(r);
      errno = ENOMEM;
      return -1;
    }
  }
  if (r->ai_qp_type == 0) r->ai_qp_type = IBV_QPT_RC;
  if (r->ai_port_space == 0) r->ai_port_space = r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
  if (r->ai_family == AF_IB && (node != nullptr || service != nullptr)) {
    set_sid(r->ai_port_space, (flags & RAI_PASSIVE) ? r->ai_src_addr : r->ai_dst_addr);
  }
  if (r->ai_src_addr == nullptr && hints != nullptr && hints->ai_src_addr != nullptr && hints->ai_src_len > 0) {
    if ((r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len)) == nullptr) {
      rdma_freeaddrinfo(r);
      errno = ENOMEM;
      return -1;
    }
    r->ai_src_len = hints->ai_src_len;
  }
  *res = r;
  return 0;
}
