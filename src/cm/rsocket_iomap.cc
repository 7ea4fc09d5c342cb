// rsockets' iomap: riomap registers a window of ours and writes its entry
// into the peer's iomap table (IOMAP_SGL); riowrite writes straight into a
// window the peer mapped, by offset, with plain RDMA WRITEs the peer does not
// see (rdma-core's protocol; the peer learns of the data out of band).
#include <endian.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>

#include <cerrno>
#include <cstring>

#include "cm/rsocket.h"

namespace softverbs::cm {

using namespace rsimpl;

namespace {

bool conn_can_send(Rsocket* rs) { return can_send(rs) || (rs->state & kRsWritable) == 0; }

int wait_can_send(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock) {
  if (can_send(rs)) return 0;
  if (wait_for(rs, lk, nonblock, conn_can_send) != 0) return -1;
  return (rs->state & kRsWritable) == 0 ? fail(ECONNRESET) : 0;
}

uint32_t sbuf_left(const Rsocket* rs) {
  return uint32_t(reinterpret_cast<uintptr_t>(rs->sbuf + rs->sbuf_size) - rs->ssgl[0].addr);
}

// Stages `len` bytes in the send ring (or inline) and posts one RDMA WRITE,
// with the immediate `imm` when `with_imm`.
int post_staged(Rsocket* rs, const void* src, uint32_t len, uint32_t wr_data, uint64_t addr, uint32_t rkey, bool with_imm) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  ibv_sge inl{};
  wr.wr_id = wr_data;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (with_imm) wr.imm_data = htobe32(wr_data);
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  // The ring moves on only after the post: the WR points into it.
  uintptr_t next = rs->ssgl[0].addr;
  if (len <= rs->sq_inline) {
    inl = ibv_sge{reinterpret_cast<uintptr_t>(src), len, 0};
    wr.sg_list = &inl;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_INLINE;
  } else if (len <= sbuf_left(rs)) {
    std::memcpy(reinterpret_cast<void*>(rs->ssgl[0].addr), src, len);
    rs->ssgl[0].length = len;
    wr.sg_list = rs->ssgl;
    wr.num_sge = 1;
    next = len < sbuf_left(rs) ? rs->ssgl[0].addr + len : reinterpret_cast<uintptr_t>(rs->sbuf);
  } else {
    rs->ssgl[0].length = sbuf_left(rs);
    std::memcpy(reinterpret_cast<void*>(rs->ssgl[0].addr), src, rs->ssgl[0].length);
    rs->ssgl[1].length = len - rs->ssgl[0].length;
    std::memcpy(rs->sbuf, static_cast<const uint8_t*>(src) + rs->ssgl[0].length, rs->ssgl[1].length);
    wr.sg_list = rs->ssgl;
    wr.num_sge = 2;
    next = reinterpret_cast<uintptr_t>(rs->sbuf) + rs->ssgl[1].length;
  }
  rs->sqe_avail--;
  rs->sbuf_bytes_avail -= int(len);
  const int rc = ibv_post_send(rs->id->qp, &wr, &bad);
  rs->ssgl[0].addr = next;
  return rc != 0 ? fail(rc) : 0;
}

}  // namespace

namespace rsimpl {

int send_iomaps(Rsocket* rs) {
  for (uint32_t i = 0; i < rs->remote_iomap.length && rs->iomap_pending != 0; ++i) {
    RsIomapMr& m = rs->iomaps[i];
    if (!m.pending) continue;
    if (!can_send(rs)) return fail(EWOULDBLOCK);
    rsproto::Iomap iom{m.offset, {reinterpret_cast<uintptr_t>(m.mr->addr), m.mr->rkey, uint32_t(m.mr->length)}};
    if (rs->swap_sgl) {
      iom.offset = __builtin_bswap64(iom.offset);
      iom.sge = rsproto::swap(iom.sge);
    }
    rs->sseq_no++;
    if (post_staged(rs, &iom, sizeof iom, rsproto::msg(rsproto::Op::kIomapSgl, uint32_t(m.index)),
                    rs->remote_iomap.addr + uint64_t(m.index) * sizeof(rsproto::Iomap), rs->remote_iomap.key,
                    true) != 0) {
      return -1;
    }
    m.pending = false;
    rs->iomap_pending--;
  }
  return 0;
}

}  // namespace rsimpl

off_t rs_iomap(int s, void* buf, size_t len, int prot, int, off_t offset) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dg != nullptr) return fail(ENOTSUP);  // iomaps are a stream rsocket's
  std::lock_guard<std::mutex> lk(rs->mu);
  if (rs->id->pd == nullptr || (rs->state & (kRsConnected | kRsOpening)) == 0 || (prot & ~PROT_WRITE) != 0 ||
      buf == nullptr || len == 0) {
    return fail(EINVAL);
  }
  RsIomapMr* slot = nullptr;
  if ((prot & PROT_WRITE) != 0) {
    if (rs->iomaps == nullptr && rs->remote_iomap.length != 0) {
      rs->iomaps = new (std::nothrow) RsIomapMr[rs->remote_iomap.length]();
      if (rs->iomaps == nullptr) return fail(ENOMEM);
      for (uint32_t i = 0; i < rs->remote_iomap.length; ++i) rs->iomaps[i].index = int(i);
    }
    for (uint32_t i = 0; i < rs->remote_iomap.length && slot == nullptr; ++i) {
      if (rs->iomaps[i].mr == nullptr) slot = &rs->iomaps[i];
    }
    // No free entry in the peer's table (its RDMA_IOMAPSIZE).
    if (slot == nullptr) return fail(ENOMEM);
  }
  const int access = IBV_ACCESS_LOCAL_WRITE | ((prot & PROT_WRITE) != 0 ? IBV_ACCESS_REMOTE_WRITE : 0);
  ibv_mr* mr = ibv_reg_mr(rs->id->pd, buf, len, access);
  if (mr == nullptr) return -1;
  if (offset == -1) offset = off_t(reinterpret_cast<uintptr_t>(buf));
  if (slot != nullptr) {
    slot->mr = mr;
    slot->offset = uint64_t(offset);
    slot->pending = true;
    rs->iomap_pending++;
  } else {
    rs->local_iomaps.push_back(RsIomapMr{uint64_t(offset), mr, -1, false});
  }
  return offset;
}

int rs_iounmap(int s, void* buf, size_t len) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  std::lock_guard<std::mutex> lk(rs->mu);
  for (uint32_t i = 0; rs->iomaps != nullptr && i < rs->remote_iomap.length; ++i) {
    RsIomapMr& m = rs->iomaps[i];
    if (m.mr != nullptr && m.mr->addr == buf && m.mr->length == len) {
      // The peer's entry stays until this slot is mapped again, as in
      // rdma-core: a write it still makes lands on a deregistered key and
      // fails on its side.
      ibv_dereg_mr(m.mr);
      m.mr = nullptr;
      if (m.pending) rs->iomap_pending--;
      m.pending = false;
      return 0;
    }
  }
  for (auto it = rs->local_iomaps.begin(); it != rs->local_iomaps.end(); ++it) {
    if (it->mr->addr == buf && it->mr->length == len) {
      ibv_dereg_mr(it->mr);
      rs->local_iomaps.erase(it);
      return 0;
    }
  }
  return fail(EINVAL);
}

size_t rs_iowrite(int s, const void* buf, size_t count, off_t offset, int flags) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return size_t(fail(EBADF));
  std::unique_lock<std::mutex> lk(rs->mu);
  if ((rs->state & kRsConnected) == 0 || (rs->state & kRsWritable) == 0) return size_t(fail(ENOTCONN));
  const bool nonblock = (rs->fs_flags & O_NONBLOCK) != 0 || (flags & MSG_DONTWAIT) != 0;
  while (rs->iomap_pending != 0) {
    if (wait_can_send(rs, lk, nonblock) != 0) return size_t(-1);
    if (send_iomaps(rs) != 0 && errno != EWOULDBLOCK) return size_t(-1);
  }
  const auto* p = static_cast<const uint8_t*>(buf);
  size_t left = count;
  uint32_t olen = kOlapStart;
  int ret = 0;
  while (left != 0) {
    // The peer's window covering `offset`, read afresh: it writes the table.
    uint64_t base = 0, wlen = 0, waddr = 0;
    uint32_t wkey = 0;
    bool found = false;
    for (uint32_t i = 0; i < rs->target_iomap_size && !found; ++i) {
      volatile rsproto::Iomap& e = rs->target_iomap[i];
      const uint64_t eo = e.offset;
      const uint64_t el = e.sge.length;
      if (el != 0 && uint64_t(offset) >= eo && uint64_t(offset) < eo + el) {
        base = eo;
        wlen = el;
        waddr = e.sge.addr;
        wkey = e.sge.key;
        found = true;
      }
    }
    if (!found) {
      if (left == count) ret = fail(EINVAL);
      break;
    }
    if (wait_can_send(rs, lk, nonblock) != 0) {
      ret = -1;
      break;
    }
    uint32_t xfer;
    if (olen < left) {
      xfer = olen;
      if (olen < kMaxTransfer) olen <<= 1;
    } else {
      xfer = uint32_t(left);
    }
    xfer = std::min<uint32_t>(xfer, uint32_t(rs->sbuf_bytes_avail));
    xfer = uint32_t(std::min<uint64_t>(xfer, base + wlen - uint64_t(offset)));
    if (post_staged(rs, p, xfer, rsproto::msg(rsproto::Op::kWrite, xfer), waddr + (uint64_t(offset) - base), wkey,
                    false) != 0) {
      ret = -1;
      break;
    }
    p += xfer;
    offset += off_t(xfer);
    left -= xfer;
  }
  if (ret != 0 && left == count) return size_t(-1);
  return count - left;
}

}  // namespace softverbs::cm
