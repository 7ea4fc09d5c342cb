// Datagram rsockets' control path: the socket, its UD QPs and destinations,
// address handles, the UDP exchange that tells peers our QPN, close, and
// the options (rdma-core's ds_init .. ds_get_dest, udp_svc_process_rs).
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/address.h"
#include "cm/agent.h"
#include "cm/cm.h"
#include "cm/rsocket_dgram.h"
#include "util/log.h"
#include "util/raw_socket.h"

namespace softverbs::cm {
namespace rsimpl {

namespace {

// rdma-core compares whole sockaddrs; flowinfo and padding would only split
// one peer into two.
DsAddrKey addr_key(const sockaddr* sa) {
  DsAddrKey k{};
  k[0] = uint8_t(sa->sa_family);
  if (sa->sa_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(sa);
    std::memcpy(&k[1], &sin->sin_port, 2);
    std::memcpy(&k[3], &sin->sin_addr, 4);
  } else {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(sa);
    std::memcpy(&k[1], &sin6->sin6_port, 2);
    std::memcpy(&k[3], &sin6->sin6_addr, 16);
    const uint32_t scope = sin6->sin6_scope_id;
    std::memcpy(&k[19], &scope, 4);
  }
  return k;
}

bool same_addr(const sockaddr* a, const sockaddr* b) { return a->sa_family == b->sa_family && addr_key(a) == addr_key(b); }

// rs_any_addr: the wildcard and loopback addresses say nothing about the
// address a peer sees.
bool any_addr(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const in_addr_t a = reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr;
    return a == htonl(INADDR_ANY) || a == htonl(INADDR_LOOPBACK);
  }
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
  return IN6_IS_ADDR_UNSPECIFIED(&a) || IN6_IS_ADDR_LOOPBACK(&a);
}

void set_port(sockaddr* sa, in_port_t port) {
  if (sa->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(sa)->sin_port = port;
  } else {
    reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = port;
  }
}

in_port_t port_of(const sockaddr* sa) {
  return sa->sa_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(sa)->sin_port
                                  : reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
}

// The address our datagrams to `dest` leave from, with the UDP socket's
// port (ds_get_src_addr). An unbound socket is bound to an ephemeral port
// first, as the kernel would on its first sendto: the port is what the peer
// answers to.
int src_addr_for(Rsocket* rs, const sockaddr* dest, sockaddr_storage* src) {
  socklen_t len = sizeof *src;
  if (getsockname(rs->dg->udp_sock, reinterpret_cast<sockaddr*>(src), &len) != 0) return -1;
  if (port_of(reinterpret_cast<sockaddr*>(src)) == 0) {
    sockaddr_storage any{};
    any.ss_family = src->ss_family;
    if (bind(rs->dg->udp_sock, reinterpret_cast<sockaddr*>(&any), sockaddr_len(reinterpret_cast<sockaddr*>(&any))) != 0) {
      return -1;
    }
    len = sizeof *src;
    if (getsockname(rs->dg->udp_sock, reinterpret_cast<sockaddr*>(src), &len) != 0) return -1;
  }
  if (!any_addr(reinterpret_cast<sockaddr*>(src))) return 0;
  const in_port_t port = port_of(reinterpret_cast<sockaddr*>(src));
  const int probe = raw_socket(dest->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return -1;
  int rc = connect(probe, dest, sockaddr_len(dest));
  if (rc == 0) {
    len = sizeof *src;
    rc = getsockname(probe, reinterpret_cast<sockaddr*>(src), &len);
    set_port(reinterpret_cast<sockaddr*>(src), port);
  }
  const int e = errno;
  close(probe);
  errno = e;
  return rc;
}

uint8_t sgid_index(ibv_context* verbs, uint8_t port, const ibv_gid& sgid) {
  for (int i = 0; i < 16; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(verbs, port, i, &g) != 0) break;
    if (std::memcmp(&g, &sgid, sizeof g) == 0) return uint8_t(i);
  }
  return 0;
}

// An address handle from `qp`'s address to `dst`, by the route the CM
// resolves (udp_svc_create_ah); nullptr if there is none.
ibv_ah* make_ah(DsQp* qp, const sockaddr* dst) {
  rdma_cm_id* id = nullptr;
  if (create_id(nullptr, &id, nullptr, RDMA_PS_UDP) != 0) return nullptr;
  sockaddr_storage src{};
  std::memcpy(&src, &qp->id->route.addr.src_addr, sockaddr_len(&qp->id->route.addr.src_addr));
  set_port(reinterpret_cast<sockaddr*>(&src), 0);
  ibv_ah* ah = nullptr;
  if (resolve_addr(id, reinterpret_cast<sockaddr*>(&src), dst, 2000) == 0 && resolve_route(id, 2000) == 0 &&
      id->route.path_rec != nullptr) {
    const ibv_sa_path_rec& p = *id->route.path_rec;
    ibv_ah_attr a{};
    if (p.hop_limit > 1) {
      a.is_global = 1;
      a.grh.dgid = p.dgid;
      a.grh.flow_label = be32toh(p.flow_label);
      a.grh.sgid_index = sgid_index(qp->id->verbs, qp->id->port_num, p.sgid);
      a.grh.hop_limit = p.hop_limit;
      a.grh.traffic_class = p.traffic_class;
    }
    a.dlid = be16toh(p.dlid);
    a.sl = p.sl;
    a.port_num = qp->id->port_num;
    ah = ibv_create_ah(qp->id->pd, &a);
  }
  const int e = errno;
  destroy_id(id);
  errno = e;
  return ah;
}

void free_qp(DsQp* qp) {
  if (qp->self.ah != nullptr) ibv_destroy_ah(qp->self.ah);
  if (qp->id != nullptr && qp->id->qp != nullptr) destroy_qp(qp->id);
  if (qp->cq != nullptr) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    while (qp->cq_ch != nullptr && ibv_get_cq_event(qp->cq_ch, &cq, &ctx) == 0) ++qp->unacked_cq_events;
    if (qp->unacked_cq_events != 0) ibv_ack_cq_events(qp->cq, qp->unacked_cq_events);
    ibv_destroy_cq(qp->cq);
  }
  if (qp->cq_ch != nullptr) ibv_destroy_comp_channel(qp->cq_ch);
  if (qp->smr != nullptr) ibv_dereg_mr(qp->smr);
  if (qp->rmr != nullptr) ibv_dereg_mr(qp->rmr);
  if (qp->id != nullptr) destroy_id(qp->id);
}

// A UD QP bound to `src` (ds_create_qp): its receives posted, its CQ armed,
// an address handle to itself.
DsQp* create_qp(Rsocket* rs, const sockaddr* src) {
  RsDgram* dg = rs->dg;
  auto qp = std::make_unique<DsQp>();
  qp->hdr_len = dsproto::format_header(src, qp->hdr);
  auto fail_qp = [&]() -> DsQp* {
    const int e = errno;
    free_qp(qp.get());
    free_pages(qp->rbuf, rs->rbuf_size + sizeof(ibv_grh));
    errno = e;
    return nullptr;
  };
  if (create_id(nullptr, &qp->id, qp.get(), RDMA_PS_UDP) != 0) return nullptr;
  if (bind_addr(qp->id, src) != 0) return fail_qp();
  if (qp->id->verbs == nullptr || qp->id->pd == nullptr) {
    errno = EADDRNOTAVAIL;
    return fail_qp();
  }
  qp->rbuf = alloc_pages(rs->rbuf_size + sizeof(ibv_grh));
  qp->grh_offset = rs->rbuf_size;
  if (qp->rbuf == nullptr) {
    errno = ENOMEM;
    return fail_qp();
  }
  qp->smr = ibv_reg_mr(qp->id->pd, dg->sbuf, size_t(rs->sq_size) * kDsSlot, IBV_ACCESS_LOCAL_WRITE);
  qp->rmr = ibv_reg_mr(qp->id->pd, qp->rbuf, rs->rbuf_size + sizeof(ibv_grh), IBV_ACCESS_LOCAL_WRITE);
  if (qp->smr == nullptr || qp->rmr == nullptr) return fail_qp();
  qp->cq_ch = ibv_create_comp_channel(qp->id->verbs);
  if (qp->cq_ch == nullptr) return fail_qp();
  fcntl(qp->cq_ch->fd, F_SETFL, fcntl(qp->cq_ch->fd, F_GETFL) | O_NONBLOCK);  // cm/rsocket.h invariant 2
  qp->cq = ibv_create_cq(qp->id->verbs, rs->sq_size + rs->rq_size, qp.get(), qp->cq_ch, 0);
  if (qp->cq == nullptr) return fail_qp();

  ibv_qp_init_attr_ex qa{};
  qa.qp_context = qp.get();
  qa.send_cq = qp->cq;
  qa.recv_cq = qp->cq;
  qa.qp_type = IBV_QPT_UD;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = rs->sq_size;
  qa.cap.max_recv_wr = rs->rq_size;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 2;
  qa.cap.max_inline_data = rs->sq_inline;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD;
  qa.pd = qp->id->pd;
  if (create_qp_ex(qp->id, &qa) != 0) return fail_qp();
  rs->sq_inline = qa.cap.max_inline_data;

  ibv_port_attr pa{};
  if (ibv_query_port(qp->id->verbs, qp->id->port_num, &pa) != 0) return fail_qp();
  const uint32_t mtu = 128u << pa.active_mtu;  // IBV_MTU_256 = 1
  qp->max_payload = std::min(kDsSlot, mtu) - (qp->hdr_len == dsproto::kIpv4HdrLen ? dsproto::kUdpIpv4HdrLen
                                                                                   : dsproto::kUdpIpv6HdrLen);

  std::memcpy(&qp->self.addr, src, sockaddr_len(src));
  qp->self.qp = qp.get();
  qp->self.qpn = qp->id->qp->qp_num;
  qp->self.ah = make_ah(qp.get(), src);
  if (qp->self.ah == nullptr) return fail_qp();

  for (uint32_t i = 0; i < rs->rq_size; ++i) ds_post_recv(qp.get(), i * kDsSlot);
  ibv_req_notify_cq(qp->cq, 0);
  qp->cq_armed = true;
  dg->qps.push_back(std::move(qp));
  return dg->qps.back().get();
}

DsQp* get_qp(Rsocket* rs, const sockaddr* src) {
  for (auto& qp : rs->dg->qps) {
    if (same_addr(&qp->id->route.addr.src_addr, src)) return qp.get();
  }
  return create_qp(rs, src);
}

// (Re)makes dest's address handle for the peer QP `qpn`.
void update_ah(DsDest* dest, uint32_t qpn) {
  if (dest->ah != nullptr) ibv_destroy_ah(dest->ah);
  dest->ah = make_ah(dest->qp, reinterpret_cast<const sockaddr*>(&dest->addr));
  dest->qpn = qpn;
  if (dest->ah == nullptr) SV_LOG(kDebug, "rsocket: no route to a datagram peer (errno %d)", errno);
}

}  // namespace

int ds_socket(int domain, int type) {
  Agent::get().contexts();
  auto* rs = new (std::nothrow) Rsocket();
  auto* dg = rs != nullptr ? new (std::nothrow) RsDgram() : nullptr;
  if (dg == nullptr) {
    delete rs;
    return fail(ENOMEM);
  }
  rs->dg = dg;
  rs->domain = domain;
  rs->fd_flags = (type & SOCK_CLOEXEC) != 0 ? FD_CLOEXEC : 0;
  rs->fs_flags = (type & SOCK_NONBLOCK) != 0 ? O_NONBLOCK : 0;
  // Ours to poll (invariant 2), and the library's own: past librspreload.
  dg->udp_sock = raw_socket(domain, SOCK_DGRAM | SOCK_NONBLOCK | (type & SOCK_CLOEXEC), 0);
  if (dg->udp_sock < 0) {
    const int e = errno;
    delete dg;
    delete rs;
    return fail(e);
  }
  rs->index = dg->udp_sock;
  if (!insert(rs)) {
    close(dg->udp_sock);
    delete dg;
    delete rs;
    return fail(EMFILE);
  }
  return rs->index;
}

int ds_init_ep(Rsocket* rs) {
  RsDgram* dg = rs->dg;
  if (dg->ep) return 0;
  // ds_set_qp_size: one slot per queue entry, so the buffers set the sizes.
  ibv_device_attr da{};
  int max_wr = 0xFFFE;
  for (ibv_context* c : Agent::get().contexts()) {
    if (ibv_query_device(c, &da) == 0) max_wr = std::min(max_wr, da.max_qp_wr);
  }
  rs->sq_size = uint16_t(std::min<int>(rs->sq_size, max_wr));
  rs->rq_size = uint16_t(std::min<int>(rs->rq_size, max_wr));
  if (rs->rq_size > rs->rbuf_size / kDsSlot) {
    rs->rq_size = uint16_t(rs->rbuf_size / kDsSlot);
  } else {
    rs->rbuf_size = rs->rq_size * kDsSlot;
  }
  if (rs->sq_size > rs->sbuf_size / kDsSlot) {
    rs->sq_size = uint16_t(rs->sbuf_size / kDsSlot);
  } else {
    rs->sbuf_size = rs->sq_size * kDsSlot;
  }
  if (rs->sq_size == 0 || rs->rq_size == 0) return fail(EINVAL);
  dg->sbuf = alloc_pages(size_t(rs->sq_size) * kDsSlot);
  dg->dmsg = new (std::nothrow) DsRmsg[rs->rq_size + 1]();
  if (dg->sbuf == nullptr || dg->dmsg == nullptr) {
    free_pages(dg->sbuf, size_t(rs->sq_size) * kDsSlot);
    delete[] dg->dmsg;
    dg->sbuf = nullptr;
    dg->dmsg = nullptr;
    return fail(ENOMEM);
  }
  dg->smsg_free.reserve(rs->sq_size);
  for (int i = rs->sq_size - 1; i >= 0; --i) dg->smsg_free.push_back(uint32_t(i) * kDsSlot);
  dg->sqe_avail = rs->sq_size;
  dg->rqe_avail = rs->rq_size;
  dg->ep = true;
  rs->state = kRsReadable | kRsWritable;
  return 0;
}

int ds_bind(Rsocket* rs, const sockaddr* addr, socklen_t len) {
  if (ds_init_ep(rs) != 0) return -1;
  return bind(rs->dg->udp_sock, addr, len);
}

int ds_connect(Rsocket* rs, const sockaddr* addr, socklen_t len) {
  if (ds_init_ep(rs) != 0) return -1;
  if (addr == nullptr || len < sizeof(sockaddr_in) || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
      (addr->sa_family == AF_INET6 && len < sizeof(sockaddr_in6))) {
    return fail(addr != nullptr && len >= sizeof(sa_family_t) && addr->sa_family == AF_UNSPEC ? EAFNOSUPPORT : EINVAL);
  }
  if (connect(rs->dg->udp_sock, addr, len) != 0) return -1;
  DsDest* d = ds_get_dest(rs, addr, len);
  if (d == nullptr) return -1;
  rs->dg->peer = d;
  rs->dg->conn_dest = d;
  return 0;
}

DsDest* ds_get_dest(Rsocket* rs, const sockaddr* addr, socklen_t len) {
  RsDgram* dg = rs->dg;
  if (addr == nullptr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) || len < sockaddr_len(addr)) {
    errno = addr != nullptr && addr->sa_family != AF_INET && addr->sa_family != AF_INET6 ? EAFNOSUPPORT : EINVAL;
    return nullptr;
  }
  const DsAddrKey key = addr_key(addr);
  if (auto it = dg->dests.find(key); it != dg->dests.end()) return it->second.get();
  sockaddr_storage src{};
  if (src_addr_for(rs, addr, &src) != 0) return nullptr;
  DsQp* qp = get_qp(rs, reinterpret_cast<sockaddr*>(&src));
  if (qp == nullptr) return nullptr;
  auto d = std::make_unique<DsDest>();
  std::memcpy(&d->addr, addr, sockaddr_len(addr));
  d->qp = qp;
  DsDest* out = d.get();
  dg->dests.emplace(key, std::move(d));
  return out;
}

void ds_service_udp(Rsocket* rs) {
  RsDgram* dg = rs->dg;
  dg->last_udp_check_us = now_us();
  if (!dg->ep) return;
  uint8_t buf[kDsSlot + dsproto::kMaxUdpHdrLen];
  // Bounded, so a flood of first datagrams cannot hold the caller.
  for (int n = 0; n < 64; ++n) {
    sockaddr_storage from{};
    socklen_t flen = sizeof from;
    const ssize_t got = recvfrom(dg->udp_sock, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &flen);
    if (got < 0) return;
    dsproto::UdpHeader h;
    if (!dsproto::parse_udp_header(buf, size_t(got), from.ss_family, &h)) continue;
    DsDest* dest = ds_get_dest(rs, reinterpret_cast<sockaddr*>(&from), flen);
    if (dest == nullptr) continue;
    // Tell a sender that does not know our QPN yet.
    if (h.op == dsproto::kOpData) ds_send_udp(rs, *dest, nullptr, 0, dsproto::kOpCtrl, 0);
    if (dest->ah == nullptr || dest->qpn != h.qpn) update_ah(dest, h.qpn);
    if (h.op != dsproto::kOpData) continue;
    // Its data goes to our own QP, with a header naming the UDP source, to
    // be received as every other datagram is.
    uint8_t hdr[dsproto::kMaxHdrLen];
    const uint8_t hlen = dsproto::format_header(reinterpret_cast<sockaddr*>(&from), hdr);
    const size_t len = size_t(got) - h.length;
    if (len + hlen > kDsSlot) continue;
    if (!ds_can_send(rs)) ds_poll_cqs(rs);
    if (!ds_can_send(rs)) continue;  // a datagram lost, as on a full socket
    iovec iov{buf + h.length, len};
    ds_post(rs, dest->qp, dest->qp->self, hdr, hlen, &iov, 1, len);
  }
}

int ds_close(Rsocket* rs) {
  RsDgram* dg = rs->dg;
  {
    std::unique_lock<std::mutex> lk(rs->mu);
    rs->state &= ~uint32_t(kRsReadable | kRsWritable);
    // What was sent leaves first (ds_shutdown), within a bound: a UD send
    // completes once it left, so this is quick unless the device is stuck.
    const uint64_t deadline = now_us() + 2000000;
    while (dg->ep && now_us() < deadline) {
      ds_poll_cqs(rs);
      if (ds_all_sends_done(rs)) break;
      lk.unlock();
      ::poll(nullptr, 0, 1);
      lk.lock();
    }
    remove(rs);
    for (auto& [key, d] : dg->dests) {
      if (d->ah != nullptr) ibv_destroy_ah(d->ah);
    }
    dg->dests.clear();
    for (auto& qp : dg->qps) {
      free_qp(qp.get());
      free_pages(qp->rbuf, rs->rbuf_size + sizeof(ibv_grh));
    }
    dg->qps.clear();
    free_pages(dg->sbuf, size_t(rs->sq_size) * kDsSlot);
    delete[] dg->dmsg;
    close(dg->udp_sock);
  }
  delete dg;
  delete rs;
  return 0;
}

int ds_setsockopt(Rsocket* rs, int level, int name, const void* val, socklen_t len) {
  // Everything but SOL_RDMA is the UDP socket's too, as in rdma-core.
  if (setsockopt(rs->dg->udp_sock, level, name, val, len) != 0) return -1;
  if (level != SOL_SOCKET) return 0;
  int v = 0;
  if (val != nullptr && len >= sizeof(int)) std::memcpy(&v, val, sizeof v);
  switch (name) {
    case SO_RCVBUF:
      if (!rs->dg->ep) rs->rbuf_size = std::max<uint32_t>(uint32_t(v) << 1, kDsSlot << 1);
      break;
    case SO_SNDBUF:
      if (!rs->dg->ep) rs->sbuf_size = std::max<uint32_t>(uint32_t(v) << 1, kDsSlot << 1);
      break;
    case SO_REUSEADDR:
    case SO_KEEPALIVE:
    case SO_OOBINLINE:
      if (v != 0) {
        rs->so_opts |= uint64_t(1) << name;
      } else {
        rs->so_opts &= ~(uint64_t(1) << name);
      }
      break;
    default:
      break;
  }
  return 0;
}

int ds_getsockopt(Rsocket* rs, int level, int name, void* val, socklen_t* len) {
  if (level == SOL_SOCKET && val != nullptr && len != nullptr && *len >= sizeof(int)) {
    int v = 0;
    switch (name) {
      case SO_RCVBUF:
        v = int(rs->rbuf_size);
        break;
      case SO_SNDBUF:
        v = int(rs->sbuf_size);
        break;
      case SO_ERROR:
        v = rs->err;
        rs->err = 0;
        break;
      default:
        return getsockopt(rs->dg->udp_sock, level, name, val, len);
    }
    std::memcpy(val, &v, sizeof v);
    *len = sizeof v;
    return 0;
  }
  return getsockopt(rs->dg->udp_sock, level, name, val, len);
}

}  // namespace rsimpl
}  // namespace softverbs::cm
