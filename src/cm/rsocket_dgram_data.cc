// Datagram rsockets' datapath: sends into a registered slot and one UD
// SEND, receives from the QPs' receive slots, completions, waits and
// readiness (rdma-core's dsend, ds_recvfrom, ds_poll_cqs, ds_get_comp).
// Per datagram: no allocation and no system call; the UDP socket is read
// only when nothing else turned up, or every kUdpCheckUs while busy.
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "cm/rsocket_dgram.h"

namespace softverbs::cm {
namespace rsimpl {

namespace {

size_t gather(uint8_t* dst, const iovec* iov, int iovcnt, size_t len) {
  size_t done = 0;
  for (int i = 0; i < iovcnt && done < len; ++i) {
    const size_t n = std::min(iov[i].iov_len, len - done);
    std::memcpy(dst + done, iov[i].iov_base, n);
    done += n;
  }
  return done;
}

size_t scatter(const iovec* iov, int iovcnt, const uint8_t* src, size_t len) {
  size_t done = 0;
  for (int i = 0; i < iovcnt && done < len; ++i) {
    const size_t n = std::min(iov[i].iov_len, len - done);
    std::memcpy(iov[i].iov_base, src + done, n);
    done += n;
  }
  return done;
}

bool nonblocking(const Rsocket* rs, int flags) { return (rs->fs_flags & O_NONBLOCK) != 0 || (flags & MSG_DONTWAIT) != 0; }

void on_wc(Rsocket* rs, DsQp* qp, const ibv_wc& wc) {
  RsDgram* dg = rs->dg;
  if ((wc.wr_id & kRecvFlag) == 0) {
    dg->smsg_free.push_back(uint32_t(wc.wr_id));
    dg->sqe_avail++;
    return;
  }
  const auto offset = uint32_t(wc.wr_id & ~kRecvFlag);
  const bool ok = wc.status == IBV_WC_SUCCESS && wc.byte_len >= sizeof(ibv_grh) &&
                  dsproto::header_len(qp->rbuf + offset, wc.byte_len - sizeof(ibv_grh)) != 0;
  if (dg->rqe_avail == 0 || !ok) {
    // No room to keep it (a datagram lost), or not ours to read.
    if (wc.status != IBV_WC_WR_FLUSH_ERR) ds_post_recv(qp, offset);
    return;
  }
  dg->rqe_avail--;
  dg->dmsg[dg->rmsg_tail] = DsRmsg{qp, offset, wc.byte_len - uint32_t(sizeof(ibv_grh))};
  if (++dg->rmsg_tail == rs->rq_size + 1) dg->rmsg_tail = 0;
}

}  // namespace

bool ds_can_send(Rsocket* rs) { return rs->dg->sqe_avail > 0; }
bool ds_have_rdata(Rsocket* rs) { return rs->dg->rmsg_head != rs->dg->rmsg_tail; }
bool ds_all_sends_done(Rsocket* rs) { return rs->dg->sqe_avail == rs->sq_size; }

void ds_post_recv(DsQp* qp, uint32_t offset) {
  ibv_sge sge[2];
  sge[0] = ibv_sge{reinterpret_cast<uintptr_t>(qp->rbuf + qp->grh_offset), uint32_t(sizeof(ibv_grh)), qp->rmr->lkey};
  sge[1] = ibv_sge{reinterpret_cast<uintptr_t>(qp->rbuf + offset), kDsSlot, qp->rmr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kRecvFlag | offset;
  wr.sg_list = sge;
  wr.num_sge = 2;
  ibv_post_recv(qp->id->qp, &wr, &bad);
}

// Round robin over the QPs' CQs, stopping once there is no room for a
// receive but a send slot is free: what is left stays in the CQ rather than
// being dropped (ds_poll_cqs).
void ds_poll_cqs(Rsocket* rs) {
  RsDgram* dg = rs->dg;
  const size_t n = dg->qps.size();
  if (n == 0) return;
  bool any = true;
  while (any) {
    any = false;
    for (size_t k = 0; k < n; ++k) {
      DsQp* qp = dg->qps[(dg->next_poll + k) % n].get();
      ibv_wc wc;
      if (ibv_poll_cq(qp->cq, 1, &wc) <= 0) continue;
      any = true;
      on_wc(rs, qp, wc);
      if (dg->rqe_avail == 0 && dg->sqe_avail != 0) {
        dg->next_poll = (dg->next_poll + k + 1) % n;
        return;
      }
    }
  }
}

int ds_post(Rsocket* rs, DsQp* qp, const DsDest& dest, const uint8_t* hdr, uint8_t hdr_len, const iovec* iov,
            int iovcnt, size_t len) {
  RsDgram* dg = rs->dg;
  const uint32_t slot = dg->smsg_free.back();
  dg->smsg_free.pop_back();
  dg->sqe_avail--;
  uint8_t* msg = dg->sbuf + slot;
  std::memcpy(msg, hdr, hdr_len);
  gather(msg + hdr_len, iov, iovcnt, len);
  ibv_sge sge{reinterpret_cast<uintptr_t>(msg), uint32_t(hdr_len + len), qp->smr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = sge.length <= rs->sq_inline ? IBV_SEND_INLINE : 0;
  wr.wr.ud.ah = dest.ah;
  wr.wr.ud.remote_qpn = dest.qpn;
  wr.wr.ud.remote_qkey = dsproto::kQkey;
  const int rc = ibv_post_send(qp->id->qp, &wr, &bad);
  if (rc != 0) {
    dg->smsg_free.push_back(slot);
    dg->sqe_avail++;
    return fail(rc);
  }
  return 0;
}

ssize_t ds_send_udp(Rsocket* rs, const DsDest& dest, const iovec* iov, int iovcnt, uint8_t op, int flags) {
  if (iovcnt > 8) return fail(ENOTSUP);  // as rdma-core's ds_sendv_udp
  uint8_t hdr[dsproto::kMaxUdpHdrLen];
  const uint8_t hlen = dsproto::format_udp_header(dest.qp->hdr, op, dest.qp->id->qp->qp_num, hdr);
  iovec miov[9];
  miov[0] = iovec{hdr, hlen};
  for (int i = 0; i < iovcnt; ++i) miov[i + 1] = iov[i];
  msghdr m{};
  m.msg_name = const_cast<sockaddr_storage*>(&dest.addr);
  m.msg_namelen = dest.addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  m.msg_iov = miov;
  m.msg_iovlen = size_t(iovcnt) + 1;
  ssize_t n = sendmsg(rs->dg->udp_sock, &m, flags & ~MSG_DONTWAIT);
  // An ICMP error an earlier datagram drew (nobody on that port yet) is
  // reported on the next call; it is not this datagram's.
  if (n < 0 && errno == ECONNREFUSED) n = sendmsg(rs->dg->udp_sock, &m, flags & ~MSG_DONTWAIT);
  return n > 0 ? n - hlen : n;
}

ssize_t ds_send(Rsocket* rs, std::unique_lock<std::mutex>& lk, DsDest* dest, const iovec* iov, int iovcnt, size_t len,
                int flags) {
  if (len > dest->qp->max_payload) return fail(EMSGSIZE);  // invariant 3
  if (dest->ah == nullptr) return ds_send_udp(rs, *dest, iov, iovcnt, dsproto::kOpData, flags);
  if (!ds_can_send(rs) && ds_wait_for(rs, lk, nonblocking(rs, flags), ds_can_send) != 0) return -1;
  if (ds_post(rs, dest->qp, *dest, dest->qp->hdr, dest->qp->hdr_len, iov, iovcnt, len) != 0) return -1;
  return ssize_t(len);
}

ssize_t ds_recv(Rsocket* rs, std::unique_lock<std::mutex>& lk, const iovec* iov, int iovcnt, int flags,
                sockaddr* from, socklen_t* fromlen) {
  RsDgram* dg = rs->dg;
  if ((rs->state & kRsReadable) == 0) return fail(EINVAL);
  if (!ds_have_rdata(rs) && ds_wait_for(rs, lk, nonblocking(rs, flags), ds_have_rdata) != 0) return -1;
  const DsRmsg m = dg->dmsg[dg->rmsg_head];
  const uint8_t* hdr = m.qp->rbuf + m.offset;
  const uint32_t payload = m.length - hdr[1];
  const size_t copied = scatter(iov, iovcnt, hdr + hdr[1], payload);
  if (from != nullptr && fromlen != nullptr) {
    sockaddr_storage src;
    dsproto::source_of(hdr, &src);
    const socklen_t size = src.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    std::memcpy(from, &src, std::min(size, *fromlen));
    *fromlen = size;
  }
  if ((flags & MSG_PEEK) == 0) {
    ds_post_recv(m.qp, m.offset);
    if (++dg->rmsg_head == rs->rq_size + 1) dg->rmsg_head = 0;
    dg->rqe_avail++;
  }
  return ssize_t((flags & MSG_TRUNC) != 0 ? payload : copied);
}

void ds_progress(Rsocket* rs) {
  ds_poll_cqs(rs);
  RsDgram* dg = rs->dg;
  if (dg->udp_ready || now_us() - dg->last_udp_check_us >= kUdpCheckUs) {
    dg->udp_ready = false;
    ds_service_udp(rs);
    ds_poll_cqs(rs);
  }
}

size_t ds_arm(Rsocket* rs, pollfd* fds, size_t max) {
  size_t n = 0;
  if (n < max) fds[n++] = pollfd{rs->dg->udp_sock, POLLIN, 0};
  for (auto& qp : rs->dg->qps) {
    if (n == max) break;
    if (!qp->cq_armed) {
      ibv_req_notify_cq(qp->cq, 0);
      qp->cq_armed = true;
    }
    fds[n++] = pollfd{qp->cq_ch->fd, POLLIN, 0};
  }
  return n;
}

void ds_arm(Rsocket* rs, std::vector<pollfd>* fds) {
  const size_t at = fds->size();
  fds->resize(at + 1 + rs->dg->qps.size());
  fds->resize(at + ds_arm(rs, fds->data() + at, fds->size() - at));
}

void ds_after_poll(Rsocket* rs, const pollfd& p) {
  if (p.revents == 0) return;
  if (p.fd == rs->dg->udp_sock) {
    rs->dg->udp_ready = true;
    return;
  }
  for (auto& qp : rs->dg->qps) {
    if (qp->cq_ch->fd == p.fd) drain_cq_channel(qp->cq_ch, qp->cq, &qp->cq_armed, &qp->unacked_cq_events);
  }
}

int ds_wait_for(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock, bool (*test)(Rsocket*)) {
  const uint64_t spin_until = now_us() + 10;
  // On the stack: two threads may wait on one rsocket, each with its own.
  pollfd fds[16];
  for (;;) {
    ds_progress(rs);
    if (test(rs)) return 0;
    if (nonblock) return fail(EWOULDBLOCK);
    if (now_us() < spin_until) continue;
    const size_t n = ds_arm(rs, fds, std::size(fds));
    ds_poll_cqs(rs);  // completions that came before the arm raise no event
    if (test(rs)) return 0;
    lk.unlock();
    const int rc = ::poll(fds, n, kWakeMs);
    lk.lock();
    if (rc < 0 && errno == EINTR) return -1;
    for (size_t i = 0; i < n; ++i) ds_after_poll(rs, fds[i]);
  }
}

short ds_poll_events(Rsocket* rs, short events) {
  auto ready = [&] {
    short rev = 0;
    if ((events & POLLIN) != 0 && ds_have_rdata(rs)) rev |= POLLIN;
    if ((events & POLLOUT) != 0 && ds_can_send(rs)) rev |= POLLOUT;
    return rev;
  };
  if (!rs->dg->ep) return short(events & POLLOUT);  // an unused socket can send
  ds_progress(rs);
  return ready();
}

}  // namespace rsimpl
}  // namespace softverbs::cm
