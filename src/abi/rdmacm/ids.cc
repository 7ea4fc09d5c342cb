// rdma_cm_id calls: addresses, routes, connections.
#include <arpa/inet.h>
#include <endian.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>

#include <cerrno>

#include "abi/rdmacm/abi.h"
#include "cm/cm.h"
#include "cm/event_channel.h"

namespace cm = softverbs::cm;

SV_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
  return cm::create_id(channel != nullptr ? cm::EventChannel::from(channel) : nullptr, id, context, ps);
}
SV_EXPORT int rdma_destroy_id(rdma_cm_id* id) { return cm::destroy_id(id); }
SV_EXPORT int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) { return cm::bind_addr(id, addr); }
SV_EXPORT int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int timeout_ms) {
  return cm::resolve_addr(id, src, dst, timeout_ms);
}
SV_EXPORT int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) { return cm::resolve_route(id, timeout_ms); }
SV_EXPORT int rdma_listen(rdma_cm_id* id, int backlog) { return cm::listen(id, backlog); }
SV_EXPORT int rdma_connect(rdma_cm_id* id, rdma_conn_param* param) { return cm::connect(id, param); }
SV_EXPORT int rdma_accept(rdma_cm_id* id, rdma_conn_param* param) { return cm::accept(id, param); }
SV_EXPORT int rdma_reject(rdma_cm_id* id, const void* data, uint8_t len) { return cm::reject(id, data, len); }
// IBA table 109's reason 35: the vendor option (the ECE asked for) is not supported.
SV_EXPORT int rdma_reject_ece(rdma_cm_id* id, const void* data, uint8_t len) { return cm::reject(id, data, len, 35); }

// Enhanced connection establishment for external QPs: the REQ carries the
// active side's, the REP the passive side's (src/cm/api_connect.cc).
SV_EXPORT int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) { return cm::set_local_ece(id, ece); }
SV_EXPORT int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) { return cm::get_remote_ece(id, ece); }
SV_EXPORT int rdma_establish(rdma_cm_id* id) { return cm::establish(id); }
SV_EXPORT int rdma_disconnect(rdma_cm_id* id) { return cm::disconnect(id); }
SV_EXPORT int rdma_notify(rdma_cm_id* id, ibv_event_type event) { return cm::notify(id, event); }
SV_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) { return cm::get_request(listen, id); }
SV_EXPORT int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  return cm::set_option(id, level, optname, optval, optlen);
}

namespace {

// librdmacm's ucma_get_port: an IB address's port is its service ID's low
// 16 bits.
__be16 port_in(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_port;
  if (sa->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  if (sa->sa_family == AF_IB) {
    return htons(static_cast<uint16_t>(be64toh(reinterpret_cast<const sockaddr_ib*>(sa)->sib_sid)));
  }
  return 0;
}

}  // namespace

// The ports of the id's addresses, in network order as librdmacm returns them.
SV_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) { return port_in(&id->route.addr.src_addr); }
SV_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) { return port_in(&id->route.addr.dst_addr); }
