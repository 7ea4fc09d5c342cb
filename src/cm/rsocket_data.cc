// rsockets' datapath: rsend/rrecv over RDMA WRITE WITH IMMEDIATE into the
// peer's receive buffer, credits back as SGL updates (cm/rsocket_proto.h).
//
// Datapath: no allocation, no syscall per message beyond the verbs' own; the
// socket's mutex is the only lock, never held across a wait.
#include <endian.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/rsocket.h"
#include "cm/rsocket_dgram.h"
#include "util/log.h"

namespace softverbs::cm {
namespace rsimpl {

namespace {

using rsproto::Op;

int post_write(Rsocket* rs, ibv_sge* sgl, int nsge, uint32_t wr_data, int flags, uint64_t addr, uint32_t rkey,
               bool with_imm) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_data;
  wr.sg_list = sgl;
  wr.num_sge = nsge;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = unsigned(flags);
  if (with_imm) wr.imm_data = htobe32(wr_data);
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  const int rc = ibv_post_send(rs->id->qp, &wr, &bad);
  return rc != 0 ? fail(rc) : 0;
}

// Claims the next bytes of the peer's current target SGE before posting:
// the peer may refill that entry once it sees the data.
int write_data(Rsocket* rs, ibv_sge* sgl, int nsge, uint32_t length, int flags) {
  rs->sseq_no++;
  rs->sqe_avail--;
  rs->sbuf_bytes_avail -= int(length);
  volatile rsproto::Sge& t = rs->target_sgl[rs->target_sge];
  const uint64_t addr = t.addr;
  const uint32_t rkey = t.key;
  t.addr = addr + length;
  t.length = t.length - length;
  if (t.length == 0 && ++rs->target_sge == rsproto::kSglSize) rs->target_sge = 0;
  return post_write(rs, sgl, nsge, rsproto::msg(Op::kData, length), flags, addr, rkey, true);
}

uint32_t sbuf_left(const Rsocket* rs) {
  return uint32_t(reinterpret_cast<uintptr_t>(rs->sbuf + rs->sbuf_size) - rs->ssgl[0].addr);
}

void* ctrl_buf(Rsocket* rs) {
  return rs->sbuf + rs->sbuf_size + sizeof(rsproto::Sge) * (rs->ctrl_seqno & (kCtrlSize - 1));
}

// Returns half of the receive buffer when a half is free, else only credits.
void send_credits(Rsocket* rs) {
  rs->ctrl_seqno++;
  rs->rseq_comp = uint16_t(rs->rseq_no + (rs->rq_size >> 1));
  const uint32_t credits = uint16_t(rs->rseq_no + rs->rq_size);
  if (rs->rbuf_bytes_avail >= int(rs->rbuf_size >> 1)) {
    rsproto::Sge sge{reinterpret_cast<uintptr_t>(rs->rbuf + rs->rbuf_free_offset), rs->rmr->rkey, rs->rbuf_size >> 1};
    if (rs->swap_sgl) sge = rsproto::swap(sge);
    ibv_sge ib{};
    int flags = 0;
    if (rs->sq_inline < sizeof sge) {
      void* b = ctrl_buf(rs);
      std::memcpy(b, &sge, sizeof sge);
      ib.addr = reinterpret_cast<uintptr_t>(b);
      ib.lkey = rs->smr->lkey;
    } else {
      ib.addr = reinterpret_cast<uintptr_t>(&sge);
      flags = IBV_SEND_INLINE;
    }
    ib.length = sizeof sge;
    post_write(rs, &ib, 1, rsproto::msg(Op::kSgl, credits), flags,
               rs->remote_sgl.addr + uint64_t(rs->remote_sge) * sizeof(rsproto::Sge), rs->remote_sgl.key, true);
    rs->rbuf_bytes_avail -= int(rs->rbuf_size >> 1);
    rs->rbuf_free_offset += int(rs->rbuf_size >> 1);
    if (rs->rbuf_free_offset >= int(rs->rbuf_size)) rs->rbuf_free_offset = 0;
    if (++rs->remote_sge == int(rs->remote_sgl.length)) rs->remote_sge = 0;
  } else {
    post_ctrl(rs, rsproto::msg(Op::kSgl, credits));
  }
}

bool give_credits(const Rsocket* rs) {
  return (rs->rbuf_bytes_avail >= int(rs->rbuf_size >> 1) || int16_t(uint16_t(rs->rseq_no - rs->rseq_comp)) >= 0) &&
         ctrl_avail(rs) && (rs->state & kRsConnected) != 0;
}

bool nonblocking(const Rsocket* rs, int flags) { return (rs->fs_flags & O_NONBLOCK) != 0 || (flags & MSG_DONTWAIT) != 0; }

bool conn_have_rdata(Rsocket* rs) { return have_rdata(rs) || (rs->state & kRsReadable) == 0; }
bool conn_can_send(Rsocket* rs) { return can_send(rs) || (rs->state & kRsWritable) == 0; }

// A connect or accept still under way: finish it, or say EAGAIN.
int finish_opening(Rsocket* rs, std::unique_lock<std::mutex>& lk, int flags) {
  if ((rs->state & kRsOpening) == 0) return 0;
  if (nonblocking(rs, flags)) {
    if (do_connect(rs) == 0) return 0;
    return fail(errno == EINPROGRESS ? EAGAIN : errno);
  }
  if (wait_for(rs, lk, false, [](Rsocket* r) { return (r->state & kRsOpening) == 0; }) != 0) return -1;
  return do_connect(rs);
}

void copy_iov(uint8_t* dst, const iovec** iov, size_t* offset, size_t len) {
  while (len != 0) {
    const size_t size = (*iov)->iov_len - *offset;
    if (size > len) {
      std::memcpy(dst, static_cast<const uint8_t*>((*iov)->iov_base) + *offset, len);
      *offset += len;
      return;
    }
    std::memcpy(dst, static_cast<const uint8_t*>((*iov)->iov_base) + *offset, size);
    len -= size;
    dst += size;
    ++*iov;
    *offset = 0;
  }
}

}  // namespace

bool ctrl_avail(const Rsocket* rs) { return rs->ctrl_seqno != rs->ctrl_max_seqno; }

bool have_rdata(const Rsocket* rs) { return rs->rmsg_head != rs->rmsg_tail; }

bool can_send(const Rsocket* rs) {
  return rs->sqe_avail > 0 && rs->sbuf_bytes_avail >= int(kSndLowat) && rs->sseq_no != rs->sseq_comp &&
         rs->target_sgl[rs->target_sge].length != 0;
}

bool all_sends_done(const Rsocket* rs) {
  return int(rs->ctrl_max_seqno - rs->ctrl_seqno) + rs->sqe_avail == rs->sq_size;
}

int post_ctrl(Rsocket* rs, uint32_t m) { return post_write(rs, nullptr, 0, m, 0, 0, 0, true); }

int post_keepalive(Rsocket* rs) {
  if (!ctrl_avail(rs)) return 0;
  rs->ctrl_seqno++;
  return post_write(rs, nullptr, 0, rsproto::msg(Op::kCtrl, uint32_t(rsproto::Ctrl::kKeepalive)), 0, 0, 0, false);
}

void update_credits(Rsocket* rs) {
  if (give_credits(rs)) send_credits(rs);
}

void poll_cq(Rsocket* rs) {
  ibv_wc wc[16];
  int reposts = 0;
  int n;
  while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      if ((w.wr_id & kRecvFlag) != 0) {
        if (w.status != IBV_WC_SUCCESS) continue;
        ++reposts;
        // A message from the peer proves the connection up even before the
        // RTU's ESTABLISHED is read (IBA's communication established).
        if (rs->state == kRsAccepting) rs->state = kRsConnectRdwr;
        if ((w.wc_flags & IBV_WC_WITH_IMM) == 0) continue;  // only immediates carry messages
        const uint32_t m = be32toh(w.imm_data);
        switch (rsproto::msg_op(m)) {
          case Op::kSgl:
            rs->sseq_comp = uint16_t(rsproto::msg_data(m));
            break;
          case Op::kIomapSgl:
          case Op::kWrite:
            break;
          case Op::kCtrl:
            if (rsproto::msg_data(m) == uint32_t(rsproto::Ctrl::kDisconnect)) {
              rs->state = kRsDisconnected;
            } else if (rsproto::msg_data(m) == uint32_t(rsproto::Ctrl::kShutdown)) {
              if ((rs->state & kRsWritable) != 0) {
                rs->state &= ~uint32_t(kRsReadable);
              } else {
                rs->state = kRsDisconnected;
              }
            }
            break;
          default:
            rs->rmsg[rs->rmsg_tail] = {uint32_t(rsproto::msg_op(m)), rsproto::msg_data(m)};
            if (++rs->rmsg_tail == rs->rq_size + 1) rs->rmsg_tail = 0;
            break;
        }
      } else {
        const uint32_t m = uint32_t(w.wr_id);
        switch (rsproto::msg_op(m)) {
          case Op::kSgl:
            rs->ctrl_max_seqno++;
            break;
          case Op::kCtrl:
            rs->ctrl_max_seqno++;
            if (rsproto::msg_data(m) == uint32_t(rsproto::Ctrl::kDisconnect)) rs->state = kRsDisconnected;
            break;
          case Op::kIomapSgl:
            rs->sqe_avail++;
            rs->sbuf_bytes_avail += int(sizeof(rsproto::Iomap));
            break;
          default:
            rs->sqe_avail++;
            rs->sbuf_bytes_avail += int(rsproto::msg_data(m));
            break;
        }
        if (w.status != IBV_WC_SUCCESS && (rs->state & kRsConnected) != 0) {
          SV_LOG(kDebug, "rsocket %d: a send failed (%s, message 0x%08x): the connection is broken", rs->index,
                 ibv_wc_status_str(w.status), m);
          rs->state = kRsError;
          rs->err = EIO;
        }
      }
    }
  }
  if ((rs->state & kRsConnected) != 0) {
    for (; reposts > 0; --reposts) {
      ibv_recv_wr wr{};
      ibv_recv_wr* bad = nullptr;
      wr.wr_id = kRecvFlag;
      if (ibv_post_recv(rs->id->qp, &wr, &bad) != 0) {
        rs->state = kRsError;
        rs->err = ENOMEM;
        break;
      }
    }
  }
}

}  // namespace rsimpl

using namespace rsimpl;

namespace {

size_t iov_len(const iovec* iov, int iovcnt) {
  size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

// A datagram rsocket's send: to `to`, or without one to its rconnect peer.
ssize_t rs_sendto_locked(Rsocket* rs, std::unique_lock<std::mutex>& lk, const iovec* iov, int iovcnt, int flags,
                         const sockaddr* to, socklen_t tolen) {
  RsDgram* dg = rs->dg;
  if ((rs->state & kRsWritable) == 0 && dg->ep) return fail(EPIPE);
  if (ds_init_ep(rs) != 0) return -1;
  DsDest* dest = dg->peer;
  if (to != nullptr) {
    dest = dg->conn_dest;
    if (dest == nullptr || tolen < sizeof(sa_family_t) || to->sa_family != dest->addr.ss_family ||
        std::memcmp(to, &dest->addr, to->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in)) != 0) {
      dest = ds_get_dest(rs, to, tolen);
      if (dest == nullptr) return -1;
      dg->conn_dest = dest;
    }
  }
  if (dest == nullptr) return fail(EDESTADDRREQ);
  return ds_send(rs, lk, dest, iov, iovcnt, iov_len(iov, iovcnt), flags);
}

}  // namespace

ssize_t rs_recv(int s, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  return rs_recvv(s, &iov, 1, flags);
}

// Like rdma-core's, it fills the first buffer only.
ssize_t rs_recvv(int s, const iovec* iov, int iovcnt, int flags) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (iov == nullptr || iovcnt < 1) return fail(EINVAL);
  uint8_t* out = static_cast<uint8_t*>(iov[0].iov_base);
  const size_t len = iov[0].iov_len;
  std::unique_lock<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr) return ds_recv(rs, lk, iov, iovcnt, flags, nullptr, nullptr);
  if (finish_opening(rs, lk, flags) != 0) return -1;
  if ((rs->state & (kRsConnected | kRsDisconnected | kRsError)) == 0) return fail(ENOTCONN);
  size_t left = len;
  int ret = 0;
  do {
    if (!have_rdata(rs)) {
      ret = wait_for(rs, lk, nonblocking(rs, flags), conn_have_rdata);
      if (ret != 0) break;
    }
    if ((flags & MSG_PEEK) != 0) {
      int head = rs->rmsg_head;
      int off = rs->rbuf_offset;
      uint8_t* p = out;
      for (; left != 0 && head != rs->rmsg_tail;) {
        uint32_t rsize = left < rs->rmsg[head].data ? uint32_t(left) : rs->rmsg[head].data;
        if (rsize == rs->rmsg[head].data && ++head == rs->rq_size + 1) head = 0;
        const uint32_t end = rs->rbuf_size - uint32_t(off);
        if (rsize > end) {
          std::memcpy(p, rs->rbuf + off, end);
          off = 0;
          p += end;
          left -= end;
          rsize -= end;
        }
        std::memcpy(p, rs->rbuf + off, rsize);
        off += int(rsize);
        p += rsize;
        left -= rsize;
      }
      break;
    }
    for (; left != 0 && have_rdata(rs);) {
      uint32_t rsize;
      if (left < rs->rmsg[rs->rmsg_head].data) {
        rsize = uint32_t(left);
        rs->rmsg[rs->rmsg_head].data -= rsize;
      } else {
        rs->rseq_no++;
        rsize = rs->rmsg[rs->rmsg_head].data;
        if (++rs->rmsg_head == rs->rq_size + 1) rs->rmsg_head = 0;
      }
      const uint32_t end = rs->rbuf_size - uint32_t(rs->rbuf_offset);
      if (rsize > end) {
        std::memcpy(out, rs->rbuf + rs->rbuf_offset, end);
        rs->rbuf_offset = 0;
        out += end;
        left -= end;
        rsize -= end;
        rs->rbuf_bytes_avail += int(end);
      }
      std::memcpy(out, rs->rbuf + rs->rbuf_offset, rsize);
      rs->rbuf_offset += int(rsize);
      out += rsize;
      left -= rsize;
      rs->rbuf_bytes_avail += int(rsize);
    }
  } while (left != 0 && (flags & MSG_WAITALL) != 0 && (rs->state & kRsReadable) != 0);
  update_credits(rs);
  if (ret != 0 && left == len) return -1;
  return ssize_t(len - left);
}

ssize_t rs_send(int s, const void* buf, size_t len, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  return rs_sendv(s, &iov, 1, flags);
}

ssize_t rs_sendv(int s, const iovec* iov, int iovcnt, int flags) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (iov == nullptr || iovcnt < 1) return fail(EINVAL);
  std::unique_lock<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr) return rs_sendto_locked(rs, lk, iov, iovcnt, flags, nullptr, 0);
  if (finish_opening(rs, lk, flags) != 0) return -1;
  if ((rs->state & kRsConnected) == 0) return fail((rs->state & (kRsDisconnected | kRsError)) != 0 ? EPIPE : ENOTCONN);
  if ((rs->state & kRsWritable) == 0) return fail(EPIPE);
  size_t len = 0;
  for (int i = 0; i < iovcnt; ++i) len += iov[i].iov_len;
  while (rs->iomap_pending != 0) {
    if (!can_send(rs) && wait_for(rs, lk, nonblocking(rs, flags), conn_can_send) != 0) return -1;
    if ((rs->state & kRsWritable) == 0) return fail(ECONNRESET);
    if (send_iomaps(rs) != 0 && errno != EWOULDBLOCK) return -1;
  }
  const iovec* cur = iov;
  size_t offset = 0;
  size_t left = len;
  uint32_t olen = kOlapStart;
  int ret = 0;
  while (left != 0) {
    if (!can_send(rs)) {
      ret = wait_for(rs, lk, nonblocking(rs, flags), conn_can_send);
      if (ret != 0) break;
      if ((rs->state & kRsWritable) == 0) {
        ret = fail(ECONNRESET);
        break;
      }
    }
    uint32_t xfer;
    if (olen < left) {
      xfer = olen;
      if (olen < kMaxTransfer) olen <<= 1;
    } else {
      xfer = uint32_t(left);
    }
    xfer = std::min<uint32_t>(xfer, uint32_t(rs->sbuf_bytes_avail));
    xfer = std::min<uint32_t>(xfer, uint32_t(rs->target_sgl[rs->target_sge].length));
    const int inl = xfer <= rs->sq_inline ? IBV_SEND_INLINE : 0;
    if (iovcnt == 1 && inl != 0) {
      // Inline straight from the caller's buffer: the post copies it.
      ibv_sge sge{reinterpret_cast<uintptr_t>(static_cast<const uint8_t*>(cur->iov_base) + offset), xfer, 0};
      ret = write_data(rs, &sge, 1, xfer, inl);
      offset += xfer;
    } else if (xfer <= sbuf_left(rs)) {
      copy_iov(reinterpret_cast<uint8_t*>(rs->ssgl[0].addr), &cur, &offset, xfer);
      rs->ssgl[0].length = xfer;
      ret = write_data(rs, rs->ssgl, 1, xfer, inl);
      if (xfer < sbuf_left(rs)) {
        rs->ssgl[0].addr += xfer;
      } else {
        rs->ssgl[0].addr = reinterpret_cast<uintptr_t>(rs->sbuf);
      }
    } else {
      rs->ssgl[0].length = sbuf_left(rs);
      copy_iov(reinterpret_cast<uint8_t*>(rs->ssgl[0].addr), &cur, &offset, rs->ssgl[0].length);
      rs->ssgl[1].length = xfer - rs->ssgl[0].length;
      copy_iov(rs->sbuf, &cur, &offset, rs->ssgl[1].length);
      ret = write_data(rs, rs->ssgl, 2, xfer, inl);
      rs->ssgl[0].addr = reinterpret_cast<uintptr_t>(rs->sbuf) + rs->ssgl[1].length;
    }
    if (ret != 0) break;
    left -= xfer;
  }
  if (ret != 0 && left == len) return -1;
  return ssize_t(len - left);
}

ssize_t rs_recvfrom(int s, const iovec* iov, int iovcnt, int flags, sockaddr* from, socklen_t* fromlen) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (iov == nullptr || iovcnt < 1) return fail(EINVAL);
  if (rs->dg == nullptr) {
    const ssize_t n = rs_recvv(s, iov, iovcnt, flags);
    if (n > 0 && from != nullptr) rs_getpeername(s, from, fromlen);
    return n;
  }
  std::unique_lock<std::mutex> lk(rs->mu);
  return ds_recv(rs, lk, iov, iovcnt, flags, from, fromlen);
}

ssize_t rs_sendto(int s, const iovec* iov, int iovcnt, int flags, const sockaddr* to, socklen_t tolen) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (iov == nullptr || iovcnt < 1) return fail(EINVAL);
  // A connected stream socket ignores the destination, as TCP's sendto does.
  if (rs->dg == nullptr) return rs_sendv(s, iov, iovcnt, flags);
  std::unique_lock<std::mutex> lk(rs->mu);
  return rs_sendto_locked(rs, lk, iov, iovcnt, flags, to, tolen);
}

}  // namespace softverbs::cm
