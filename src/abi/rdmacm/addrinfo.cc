// rdma_getaddrinfo / rdma_freeaddrinfo: getaddrinfo(3) for the CM, one
// result as librdmacm gives: the node is the destination, or with
// RAI_PASSIVE the source; hints' source address is kept for an active
// lookup; port space from the hints (or the QP type), TCP by default.
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

SV_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                               rdma_addrinfo** res) {
  if (res == nullptr || (node == nullptr && service == nullptr)) {
    errno = EINVAL;
    return -1;
  }
  const int flags = hints != nullptr ? hints->ai_flags : 0;
  addrinfo ai_hints{};
  ai_hints.ai_family = hints != nullptr ? hints->ai_family : AF_UNSPEC;
  ai_hints.ai_socktype = SOCK_STREAM;
  if (flags & RAI_PASSIVE) ai_hints.ai_flags |= AI_PASSIVE;
  if (flags & RAI_NUMERICHOST) ai_hints.ai_flags |= AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(node, service, &ai_hints, &found); rc != 0) {
    errno = rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL;
    return rc;  // librdmacm returns getaddrinfo's code
  }
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (r == nullptr) {
    freeaddrinfo(found);
    errno = ENOMEM;
    return -1;
  }
  r->ai_flags = flags;
  r->ai_family = found->ai_family;
  r->ai_qp_type = hints != nullptr && hints->ai_qp_type != 0 ? hints->ai_qp_type : IBV_QPT_RC;
  r->ai_port_space = hints != nullptr && hints->ai_port_space != 0 ? hints->ai_port_space
                     : r->ai_qp_type == IBV_QPT_UD                 ? RDMA_PS_UDP
                                                                   : RDMA_PS_TCP;
  sockaddr* addr = copy_addr(found->ai_addr, found->ai_addrlen);
  if (flags & RAI_PASSIVE) {
    r->ai_src_addr = addr;
    r->ai_src_len = found->ai_addrlen;
  } else {
    r->ai_dst_addr = addr;
    r->ai_dst_len = found->ai_addrlen;
    if (hints != nullptr && hints->ai_src_addr != nullptr && hints->ai_src_len > 0) {
      r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
      r->ai_src_len = hints->ai_src_len;
    }
  }
  freeaddrinfo(found);
  if (addr == nullptr) {
    rdma_freeaddrinfo(r);
    errno = ENOMEM;
    return -1;
  }
  *res = r;
  return 0;
}
