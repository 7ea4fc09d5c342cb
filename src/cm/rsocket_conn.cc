// rsockets' control path: socket/bind/listen/accept/connect and the CM
// events behind them, the connection's resources, shutdown and close.
#include <fcntl.h>
#include <infiniband/ib.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/agent.h"
#include "cm/cm.h"
#include "cm/event_channel.h"
#include "cm/rsocket.h"
#include "cm/rsocket_dgram.h"
#include "util/log.h"
#include "wire/cma_hdr.h"

namespace softverbs::cm {
namespace rsimpl {

namespace {
size_t page_round(size_t len) { return (len + 4095) / 4096 * 4096; }
}  // namespace

uint8_t* alloc_pages(size_t len) {
  void* p = mmap(nullptr, page_round(len), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

void free_pages(uint8_t* p, size_t len) {
  if (p != nullptr) munmap(p, page_round(len));
}

namespace {

// The CM's event status as the errno librdmacm gives for it.
int event_errno(const rdma_cm_event* ev) {
  if (ev->event == RDMA_CM_EVENT_REJECTED) return ECONNREFUSED;
  if (ev->status < 0) return -ev->status;
  if (ev->status > 0) return ev->status;
  switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_ERROR: return EHOSTUNREACH;
    case RDMA_CM_EVENT_ROUTE_ERROR: return EHOSTUNREACH;
    case RDMA_CM_EVENT_UNREACHABLE: return ETIMEDOUT;
    default: return ECONNABORTED;
  }
}

void connect_failed(Rsocket* rs, int err) {
  rs->state = kRsConnectError;
  rs->err = err;
}

// An AF_IB REQ has no CMA header, so rdma-core's rsocket leaves room for
// one (struct ib_connect_hdr) before its data; its listener reads past it.
size_t conn_data_offset(const rdma_cm_id* id) {
  return id->route.addr.src_addr.sa_family == AF_IB ? wire::cm::CmaHeader::kBytes : 0;
}

// After ROUTE_RESOLVED: the QP, the buffers, and the REQ with our data.
void send_req(Rsocket* rs) {
  if (create_ep(rs) != 0) return connect_failed(rs, errno);
  uint8_t data[rsproto::kConnDataLen];
  rdma_conn_param param = conn_param(rs, data);
  uint8_t pd[wire::cm::CmaHeader::kBytes + rsproto::kConnDataLen]{};
  const size_t at = conn_data_offset(rs->id);
  std::memcpy(pd + at, data, sizeof data);
  param.private_data = pd;
  param.private_data_len = static_cast<uint8_t>(at + rsproto::kConnDataLen);
  if (connect(rs->id, &param) != 0) return connect_failed(rs, errno);
  rs->state = kRsConnecting;
}

void on_cm_event(Rsocket* rs, const rdma_cm_event* ev) {
  switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rs->state != kRsResolvingAddr) break;
      if (resolve_route(rs->id, 2000) != 0) {
        connect_failed(rs, errno);
      } else {
        rs->state = kRsResolvingRoute;
      }
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (rs->state == kRsResolvingRoute) send_req(rs);
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      if (rs->state == kRsConnecting) {
        if (!save_conn_data(rs, ev->param.conn.private_data, ev->param.conn.private_data_len)) {
          SV_LOG(kDebug, "rconnect: the peer's REP carries no rsocket version 1 data");
          connect_failed(rs, ENOTSUP);
          disconnect(rs->id);
          break;
        }
        rs->state = kRsConnectRdwr;
      } else if (rs->state == kRsAccepting) {
        rs->state = kRsConnectRdwr;
      }
      break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
      if ((rs->state & kRsOpening) != 0) connect_failed(rs, event_errno(ev));
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      // The data already delivered stays readable (the CQ was polled first).
      if ((rs->state & kRsConnected) != 0 || (rs->state & kRsOpening) != 0) {
        if ((rs->state & kRsOpening) != 0) {
          connect_failed(rs, ECONNRESET);
        } else {
          rs->state = kRsDisconnected;
        }
      }
      break;
    default:
      break;
  }
}

}  // namespace

void process_cm_events(Rsocket* rs) {
  if (rs->state == kRsListening) return;  // raccept takes those
  while (!rs->ch->empty()) {
    rdma_cm_event* ev = nullptr;
    if (get_event(rs->ch, &ev) != 0) break;
    on_cm_event(rs, ev);
    ack_event(ev);
  }
}

int create_ep(Rsocket* rs) {
  ibv_context* verbs = rs->id->verbs;
  if (verbs == nullptr || rs->id->pd == nullptr) return fail(EINVAL);
  ibv_device_attr da{};
  const int max_wr = ibv_query_device(verbs, &da) == 0 ? std::min(da.max_qp_wr, 0xFFFE) : 0xFFFE;
  rs->sq_size = uint16_t(std::clamp<int>(rs->sq_size, 16, max_wr));
  rs->rq_size = uint16_t(std::clamp<int>(rs->rq_size, 16, max_wr));

  rs->cq_ch = ibv_create_comp_channel(verbs);
  if (rs->cq_ch == nullptr) return -1;
  // Ours alone, never the application's: waits go through poll(2) (invariant 2).
  fcntl(rs->cq_ch->fd, F_SETFL, fcntl(rs->cq_ch->fd, F_GETFL) | O_NONBLOCK);
  rs->cq = ibv_create_cq(verbs, rs->sq_size + rs->rq_size, rs, rs->cq_ch, 0);
  if (rs->cq == nullptr) return -1;

  ibv_qp_init_attr_ex qa{};
  qa.qp_context = rs;
  qa.send_cq = rs->cq;
  qa.recv_cq = rs->cq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = rs->sq_size;
  qa.cap.max_recv_wr = rs->rq_size;
  qa.cap.max_send_sge = 2;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = rs->sq_inline;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD;
  qa.pd = rs->id->pd;
  if (create_qp_ex(rs->id, &qa) != 0) return -1;
  rs->sq_inline = qa.cap.max_inline_data;

  rs->rmsg = new (std::nothrow) Rsocket::Rmsg[rs->rq_size + 1]();
  if (rs->rmsg == nullptr) return fail(ENOMEM);
  // Room after the send ring for the control messages (SGL updates) that
  // cannot go inline; always there, so free_ep knows the size.
  const size_t sbuf_total = rs->sbuf_size + sizeof(rsproto::Sge) * kCtrlSize;
  rs->sbuf = alloc_pages(sbuf_total);
  if (rs->sbuf == nullptr) return fail(ENOMEM);
  rs->smr = ibv_reg_mr(rs->id->pd, rs->sbuf, sbuf_total, IBV_ACCESS_LOCAL_WRITE);
  if (rs->smr == nullptr) return -1;
  const size_t tlen = sizeof(rsproto::Sge) * rsproto::kSglSize + sizeof(rsproto::Iomap) * rs->target_iomap_size;
  rs->target_buf = alloc_pages(tlen);
  if (rs->target_buf == nullptr) return fail(ENOMEM);
  rs->target_mr = ibv_reg_mr(rs->id->pd, rs->target_buf, tlen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (rs->target_mr == nullptr) return -1;
  rs->target_sgl = reinterpret_cast<volatile rsproto::Sge*>(rs->target_buf);
  if (rs->target_iomap_size != 0) {
    rs->target_iomap = reinterpret_cast<volatile rsproto::Iomap*>(rs->target_buf + sizeof(rsproto::Sge) * rsproto::kSglSize);
  }
  rs->rbuf = alloc_pages(rs->rbuf_size);
  if (rs->rbuf == nullptr) return fail(ENOMEM);
  rs->rmr = ibv_reg_mr(rs->id->pd, rs->rbuf, rs->rbuf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (rs->rmr == nullptr) return -1;

  rs->ssgl[0].addr = rs->ssgl[1].addr = reinterpret_cast<uintptr_t>(rs->sbuf);
  rs->ssgl[0].lkey = rs->ssgl[1].lkey = rs->smr->lkey;
  rs->sbuf_bytes_avail = int(rs->sbuf_size);
  rs->rbuf_free_offset = int(rs->rbuf_size >> 1);
  rs->rbuf_bytes_avail = int(rs->rbuf_size >> 1);
  rs->sqe_avail = rs->sq_size - int(rs->ctrl_max_seqno);
  rs->rseq_comp = uint16_t(rs->rq_size >> 1);

  for (int i = 0; i < rs->rq_size; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kRecvFlag;
    if (ibv_post_recv(rs->id->qp, &wr, &bad) != 0) return -1;
  }
  arm_cq(rs);
  rs->last_activity_us = now_us();
  return 0;
}

void free_ep(Rsocket* rs) {
  if (rs->id != nullptr && rs->id->qp != nullptr) destroy_qp(rs->id);
  if (rs->cq != nullptr) {
    drain_cq_events(rs);
    if (rs->unacked_cq_events != 0) ibv_ack_cq_events(rs->cq, rs->unacked_cq_events);
    ibv_destroy_cq(rs->cq);
  }
  if (rs->cq_ch != nullptr) ibv_destroy_comp_channel(rs->cq_ch);
  if (rs->iomaps != nullptr) {
    for (uint32_t i = 0; i < rs->remote_iomap.length; ++i) {
      if (rs->iomaps[i].mr != nullptr) ibv_dereg_mr(rs->iomaps[i].mr);
    }
    delete[] rs->iomaps;
  }
  for (RsIomapMr& m : rs->local_iomaps) ibv_dereg_mr(m.mr);
  for (ibv_mr* mr : {rs->smr, rs->rmr, rs->target_mr}) {
    if (mr != nullptr) ibv_dereg_mr(mr);
  }
  free_pages(rs->sbuf, rs->sbuf_size + sizeof(rsproto::Sge) * kCtrlSize);
  free_pages(rs->rbuf, rs->rbuf_size);
  free_pages(rs->target_buf, sizeof(rsproto::Sge) * rsproto::kSglSize + sizeof(rsproto::Iomap) * rs->target_iomap_size);
  delete[] rs->rmsg;
}

rdma_conn_param conn_param(const Rsocket* rs, uint8_t (&wire)[rsproto::kConnDataLen]) {
  rsproto::ConnData c;
  c.version = rsproto::kVersion;
  c.flags = rsproto::kFlagIomap | (__BYTE_ORDER == __BIG_ENDIAN ? rsproto::kFlagNet : 0);
  c.credits = rs->rq_size;
  c.iomap_scale = rsproto::value_to_scale(rs->target_iomap_size, 8);
  c.target_sgl = {reinterpret_cast<uintptr_t>(rs->target_buf), rs->target_mr->rkey, uint32_t(rsproto::kSglSize)};
  c.data_buf = {reinterpret_cast<uintptr_t>(rs->rbuf), rs->rmr->rkey, rs->rbuf_size >> 1};
  rsproto::encode(c, wire);
  rdma_conn_param param{};
  param.private_data = wire;
  param.private_data_len = sizeof wire;
  param.flow_control = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  return param;
}

bool save_conn_data(Rsocket* rs, const void* data, size_t len) {
  rsproto::ConnData c;
  if (!rsproto::decode(static_cast<const uint8_t*>(data), len, &c) || c.version != rsproto::kVersion) return false;
  rs->remote_sgl = c.target_sgl;
  rs->remote_sge = 1;
  rs->swap_sgl = ((c.flags & rsproto::kFlagNet) != 0) != (__BYTE_ORDER == __BIG_ENDIAN);
  if ((c.flags & rsproto::kFlagIomap) != 0) {
    rs->remote_iomap.addr = rs->remote_sgl.addr + sizeof(rsproto::Sge) * rs->remote_sgl.length;
    rs->remote_iomap.length = rsproto::scale_to_value(c.iomap_scale, 8);
    rs->remote_iomap.key = rs->remote_sgl.key;
  }
  rs->target_sgl[0].addr = c.data_buf.addr;
  rs->target_sgl[0].key = c.data_buf.key;
  rs->target_sgl[0].length = c.data_buf.length;
  rs->sseq_comp = c.credits;
  return true;
}

int do_connect(Rsocket* rs) {
  progress(rs);
  if ((rs->state & kRsConnected) != 0) return 0;
  if (rs->state == kRsConnectError) {
    const int e = rs->err != 0 ? rs->err : ECONNREFUSED;
    return fail(e);
  }
  if ((rs->state & kRsOpening) != 0) return fail(EINPROGRESS);
  if ((rs->state & (kRsDisconnected | kRsError)) != 0) return fail(ENOTCONN);
  return fail(EINVAL);
}

}  // namespace rsimpl

using namespace rsimpl;

int rs_socket(int domain, int type, int protocol) {
  const int socket_type = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
  if ((domain == AF_INET || domain == AF_INET6) && socket_type == SOCK_DGRAM &&
      (protocol == 0 || protocol == IPPROTO_UDP)) {
    return ds_socket(domain, type);
  }
  if ((domain != AF_INET && domain != AF_INET6 && domain != AF_IB) || socket_type != SOCK_STREAM ||
      (protocol != 0 && protocol != IPPROTO_TCP)) {
    // AF_IB datagram rsockets: rdma-core has none either (they ride a UDP socket).
    return fail(domain == AF_INET || domain == AF_INET6 || domain == AF_IB ? ENOTSUP : EAFNOSUPPORT);
  }
  Agent::get().contexts();
  auto* rs = new (std::nothrow) Rsocket();
  if (rs == nullptr) return fail(ENOMEM);
  rs->domain = domain;
  rs->fd_flags = (type & SOCK_CLOEXEC) != 0 ? FD_CLOEXEC : 0;
  rs->fs_flags = (type & SOCK_NONBLOCK) != 0 ? O_NONBLOCK : 0;
  rs->ch = EventChannel::create();
  if (rs->ch == nullptr) {
    delete rs;
    return fail(EMFILE);
  }
  const int fd = rs->ch->pub()->fd;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP) != 0) {
    const int e = errno;
    delete rs->ch;
    delete rs;
    return fail(e);
  }
  rs->id->route.addr.src_addr.sa_family = sa_family_t(domain);
  rs->index = fd;
  if (!insert(rs)) {
    destroy_id(rs->id);
    delete rs->ch;
    delete rs;
    return fail(EMFILE);
  }
  return rs->index;
}

int rs_bind(int s, const sockaddr* addr, socklen_t len) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (addr == nullptr || len < sizeof(sa_family_t)) return fail(EINVAL);
  std::lock_guard<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr) return ds_bind(rs, addr, len);
  if (rs->state != kRsInit) return fail(EINVAL);
  if (bind_addr(rs->id, addr) != 0) return -1;
  rs->state = kRsBound;
  return 0;
}

int rs_listen(int s, int backlog) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dg != nullptr) return fail(EOPNOTSUPP);  // as UDP's listen
  std::lock_guard<std::mutex> lk(rs->mu);
  if (rs->state == kRsListening) return 0;
  if (listen(rs->id, backlog) != 0) return -1;
  rs->state = kRsListening;
  return 0;
}

int rs_connect(int s, const sockaddr* addr, socklen_t len) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  std::unique_lock<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr) return ds_connect(rs, addr, len);
  if ((rs->state & kRsOpening) != 0) {
    if (do_connect(rs) == 0) return 0;
    return fail(errno == EINPROGRESS ? EALREADY : errno);
  }
  if ((rs->state & kRsConnected) != 0) return fail(EISCONN);
  if (rs->state != kRsInit && rs->state != kRsBound) return fail(EINVAL);
  const auto known = [](sa_family_t f) { return f == AF_INET || f == AF_INET6 || f == AF_IB; };
  if (addr == nullptr || len < sizeof(sockaddr_in) || !known(addr->sa_family) ||
      (addr->sa_family == AF_INET6 && len < sizeof(sockaddr_in6)) ||
      (addr->sa_family == AF_IB && len < sizeof(sockaddr_ib))) {
    return fail(addr != nullptr && len >= sizeof(sa_family_t) && !known(addr->sa_family) ? EAFNOSUPPORT : EINVAL);
  }
  if (resolve_addr(rs->id, nullptr, addr, 2000) != 0) return -1;
  rs->state = kRsResolvingAddr;
  const bool nonblock = (rs->fs_flags & O_NONBLOCK) != 0;
  const int rc = wait_for(rs, lk, nonblock, [](Rsocket* r) { return (r->state & kRsOpening) == 0; });
  if (rc != 0) {
    if (errno == EWOULDBLOCK) return fail(EINPROGRESS);
    return -1;
  }
  if ((rs->state & kRsConnected) != 0) return 0;
  const int e = rs->err != 0 ? rs->err : ECONNREFUSED;
  rs->err = 0;  // reported here, not again through SO_ERROR
  return fail(e);
}

int rs_accept(int s, sockaddr* addr, socklen_t* len) {
  Rsocket* ls = rs_lookup(s);
  if (ls == nullptr) return fail(EBADF);
  if (ls->dg != nullptr) return fail(EOPNOTSUPP);
  std::unique_lock<std::mutex> lk(ls->mu);
  if (ls->state != kRsListening) return fail(EINVAL);
  for (;;) {
    if (ls->ch->empty()) {
      if ((ls->fs_flags & O_NONBLOCK) != 0) return fail(EAGAIN);
      pollfd p{ls->ch->pub()->fd, POLLIN, 0};
      lk.unlock();
      const int rc = ::poll(&p, 1, kWakeMs);
      lk.lock();
      if (rc < 0 && errno == EINTR) return -1;
      if (ls->state != kRsListening) return fail(EBADF);
      continue;
    }
    rdma_cm_event* ev = nullptr;
    if (get_event(ls->ch, &ev) != 0) continue;
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      ack_event(ev);
      continue;
    }
    rdma_cm_id* cid = ev->id;
    uint8_t req[rsproto::kConnDataLen];
    const size_t at = conn_data_offset(ls->id);
    const bool ok = ev->param.conn.private_data != nullptr && ev->param.conn.private_data_len >= at + sizeof req;
    if (ok) std::memcpy(req, static_cast<const uint8_t*>(ev->param.conn.private_data) + at, sizeof req);
    ack_event(ev);

    auto* rs = new (std::nothrow) Rsocket();
    EventChannel* ch = rs != nullptr ? EventChannel::create() : nullptr;
    if (!ok || ch == nullptr) {
      reject(cid, nullptr, 0);
      destroy_id(cid);
      delete ch;
      delete rs;
      continue;
    }
    const int fd = ch->pub()->fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    rs->ch = ch;
    rs->id = cid;
    cid->context = rs;
    rs->index = fd;
    rs->domain = ls->domain;
    rs->fs_flags = ls->fs_flags;
    rs->fd_flags = ls->fd_flags;
    rs->sbuf_size = ls->sbuf_size;
    rs->rbuf_size = ls->rbuf_size;
    rs->sq_size = ls->sq_size;
    rs->rq_size = ls->rq_size;
    rs->sq_inline = ls->sq_inline;
    rs->target_iomap_size = ls->target_iomap_size;
    rs->so_opts = ls->so_opts;
    rs->tcp_opts = ls->tcp_opts;
    rs->keepidle_s = ls->keepidle_s;
    std::unique_lock<std::mutex> nlk(rs->mu);
    bool good = migrate_id(cid, ch) == 0 && create_ep(rs) == 0 && save_conn_data(rs, req, sizeof req);
    if (good) {
      uint8_t rep[rsproto::kConnDataLen];
      rdma_conn_param param = conn_param(rs, rep);
      good = accept(cid, &param) == 0;
    }
    if (!good || !insert(rs)) {
      SV_LOG(kDebug, "raccept: dropping a connection request (errno %d)", errno);
      reject(cid, nullptr, 0);
      nlk.unlock();
      free_ep(rs);
      destroy_id(cid);
      delete ch;
      delete rs;
      continue;
    }
    // Writable once the RTU is in (ESTABLISHED): data sent earlier could
    // reach the peer before its QP is ready to receive it.
    rs->state = kRsAccepting;
    nlk.unlock();
    lk.unlock();
    if (addr != nullptr && len != nullptr) rs_getpeername(rs->index, addr, len);
    return rs->index;
  }
}

int rs_shutdown(int s, int how) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
  std::unique_lock<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr) {
    if (how != SHUT_WR) rs->state &= ~uint32_t(kRsReadable);
    if (how != SHUT_RD) rs->state &= ~uint32_t(kRsWritable);
    return 0;
  }
  if ((rs->state & kRsAccepting) == kRsAccepting) do_connect(rs);
  if ((rs->state & kRsConnected) == 0) {
    return (rs->state & (kRsDisconnected | kRsError)) != 0 ? 0 : fail(ENOTCONN);
  }
  rsproto::Ctrl ctrl;
  if (how == SHUT_RDWR) {
    ctrl = rsproto::Ctrl::kDisconnect;
    rs->state &= ~uint32_t(kRsReadable | kRsWritable);
  } else if (how == SHUT_WR) {
    rs->state &= ~uint32_t(kRsWritable);
    ctrl = (rs->state & kRsReadable) != 0 ? rsproto::Ctrl::kShutdown : rsproto::Ctrl::kDisconnect;
  } else {
    rs->state &= ~uint32_t(kRsReadable);
    if ((rs->state & kRsWritable) != 0) return 0;
    ctrl = rsproto::Ctrl::kDisconnect;
  }
  // Bounded: a peer that stopped answering must not hold the caller.
  const uint64_t deadline = now_us() + 2000000;
  auto bounded = [&](bool (*test)(Rsocket*)) {
    while (!test(rs) && now_us() < deadline) {
      if (wait_for(rs, lk, false, test) == 0) break;
      if (errno != EINTR && errno != EWOULDBLOCK) break;
    }
  };
  bounded([](Rsocket* r) { return ctrl_avail(r) || (r->state & kRsConnected) == 0; });
  if ((rs->state & kRsConnected) != 0 && ctrl_avail(rs)) {
    rs->ctrl_seqno++;
    post_ctrl(rs, rsproto::msg(rsproto::Op::kCtrl, uint32_t(ctrl)));
  }
  bounded([](Rsocket* r) { return all_sends_done(r) || (r->state & kRsConnected) == 0; });
  if (ctrl == rsproto::Ctrl::kDisconnect) rs->state = kRsDisconnected;
  return 0;
}

int rs_close(int s) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dg != nullptr) return ds_close(rs);
  if ((rs->state & kRsConnected) != 0) rs_shutdown(s, SHUT_RDWR);
  std::unique_lock<std::mutex> lk(rs->mu);
  remove(rs);
  // The CM sends the DREQ (or a REJ) for an id that is still connected.
  if (rs->id != nullptr) {
    if ((rs->state & (kRsConnected | kRsDisconnected)) != 0) disconnect(rs->id);
    while (!rs->ch->empty()) {
      rdma_cm_event* ev = nullptr;
      if (get_event(rs->ch, &ev) != 0) break;
      if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->id != rs->id) {
        reject(ev->id, nullptr, 0);
        rdma_cm_id* cid = ev->id;
        ack_event(ev);
        destroy_id(cid);
        continue;
      }
      ack_event(ev);
    }
  }
  free_ep(rs);
  if (rs->id != nullptr) destroy_id(rs->id);
  lk.unlock();
  delete rs->ch;
  delete rs;
  return 0;
}

}  // namespace softverbs::cm
