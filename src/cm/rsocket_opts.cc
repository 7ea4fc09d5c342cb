// rsockets' options, flags and names: rsetsockopt/rgetsockopt (SOL_SOCKET,
// IPPROTO_TCP, IPPROTO_IPV6 and SOL_RDMA as rdma-core defines them), rfcntl,
// rgetpeername/rgetsockname.
#include <fcntl.h>
#include <infiniband/ib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/cm.h"
#include "cm/rsocket.h"
#include "cm/rsocket_dgram.h"

namespace softverbs::cm {

using namespace rsimpl;

namespace {

constexpr uint32_t kQpMaxSize = 0xFFFE;

bool int_arg(const void* val, socklen_t len, int* out) {
  if (val == nullptr || len < sizeof(int)) return false;
  std::memcpy(out, val, sizeof(int));
  return true;
}

int put_int(void* val, socklen_t* len, int v) {
  if (val == nullptr || len == nullptr || *len < sizeof(int)) return fail(EINVAL);
  std::memcpy(val, &v, sizeof v);
  *len = sizeof(int);
  return 0;
}

void set_bit(uint64_t* opts, int name, bool on) {
  if (on) {
    *opts |= uint64_t(1) << name;
  } else {
    *opts &= ~(uint64_t(1) << name);
  }
}

int copy_addr(const sockaddr* src, sockaddr* dst, socklen_t* len) {
  if (dst == nullptr || len == nullptr) return fail(EFAULT);
  const socklen_t size = src->sa_family == AF_IB    ? sizeof(sockaddr_ib)
                         : src->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                      : sizeof(sockaddr_in);
  std::memcpy(dst, src, std::min(size, *len));
  *len = size;
  return 0;
}

}  // namespace

int rs_setsockopt(int s, int level, int name, const void* val, socklen_t len) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  std::lock_guard<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr && level != SOL_RDMA) return ds_setsockopt(rs, level, name, val, len);
  int v = 0;
  switch (level) {
    case SOL_SOCKET:
      if (name == SO_LINGER) {
        if (val == nullptr || len < sizeof(linger)) return fail(EINVAL);
        std::memcpy(&rs->linger_opt, val, sizeof(linger));
        return 0;
      }
      if (!int_arg(val, len, &v)) return fail(EINVAL);
      switch (name) {
        case SO_REUSEADDR:
          if (set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof v) != 0 && errno != ENOSYS) {
            return -1;
          }
          break;
        case SO_RCVBUF:
          if (rs->rbuf == nullptr) rs->rbuf_size = std::max<uint32_t>(uint32_t(v) << 1, kSndLowat << 1);
          break;
        case SO_SNDBUF:
          if (rs->sbuf == nullptr) rs->sbuf_size = std::max<uint32_t>(uint32_t(v) << 1, kSndLowat << 1);
          break;
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          break;
        default:
          return fail(ENOTSUP);
      }
      set_bit(&rs->so_opts, name, v != 0);
      return 0;
    case IPPROTO_TCP:
      if (!int_arg(val, len, &v)) return fail(EINVAL);
      switch (name) {
        case TCP_KEEPIDLE:
          if (v <= 0) return fail(EINVAL);
          rs->keepidle_s = v;
          return 0;
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
        case TCP_MAXSEG:
        case TCP_CONGESTION:
          return 0;  // a reliable connection has no use for them, as in rdma-core
        case TCP_NODELAY:
          set_bit(&rs->tcp_opts, name, v != 0);  // every rsend goes out at once anyway
          return 0;
        default:
          return fail(ENOTSUP);
      }
    case IPPROTO_IPV6:
      if (name != IPV6_V6ONLY) return fail(ENOTSUP);
      if (!int_arg(val, len, &v)) return fail(EINVAL);
      return set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof v);
    case SOL_RDMA:
      if (rs->state >= kRsOpening) return fail(EINVAL);
      if (name == RDMA_ROUTE) {
        // The CM builds the path itself (softverbs has no SA); a given
        // route is checked for size and otherwise not used.
        return val != nullptr && len >= sizeof(ibv_path_data) ? 0 : fail(EINVAL);
      }
      if (!int_arg(val, len, &v) || v < 0) return fail(EINVAL);
      switch (name) {
        case RDMA_SQSIZE:
          rs->sq_size = uint16_t(std::min<uint32_t>(uint32_t(v), kQpMaxSize));
          return 0;
        case RDMA_RQSIZE:
          rs->rq_size = uint16_t(std::min<uint32_t>(uint32_t(v), kQpMaxSize));
          return 0;
        case RDMA_INLINE:
          rs->sq_inline = std::min<uint32_t>(uint32_t(v), kQpMaxSize);
          return 0;
        case RDMA_IOMAPSIZE:
          rs->target_iomap_size = rsproto::scale_to_value(rsproto::value_to_scale(uint32_t(v), 8), 8);
          return 0;
        default:
          return fail(ENOTSUP);
      }
    default:
      return fail(ENOTSUP);
  }
}

int rs_getsockopt(int s, int level, int name, void* val, socklen_t* len) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  std::lock_guard<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr && level != SOL_RDMA) return ds_getsockopt(rs, level, name, val, len);
  switch (level) {
    case SOL_SOCKET:
      switch (name) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          return put_int(val, len, (rs->so_opts >> name) & 1);
        case SO_RCVBUF:
          return put_int(val, len, int(rs->rbuf_size));
        case SO_SNDBUF:
          return put_int(val, len, int(rs->sbuf_size));
        case SO_LINGER:
          if (val == nullptr || len == nullptr || *len < sizeof(linger)) return fail(EINVAL);
          std::memcpy(val, &rs->linger_opt, sizeof(linger));
          *len = sizeof(linger);
          return 0;
        case SO_ERROR: {
          const int e = rs->err;
          if (put_int(val, len, e) != 0) return -1;
          rs->err = 0;
          return 0;
        }
        case SO_TYPE:
          return put_int(val, len, SOCK_STREAM);
        default:
          return fail(ENOTSUP);
      }
    case IPPROTO_TCP:
      switch (name) {
        case TCP_NODELAY:
          return put_int(val, len, (rs->tcp_opts >> name) & 1);
        case TCP_KEEPIDLE:
          return put_int(val, len, rs->keepidle_s);
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
          return put_int(val, len, 1);
        case TCP_MAXSEG: {
          // The path MTU (IBV_MTU_256 = 1 ... 4096 = 5), 2048 before a route.
          const int mtu = rs->id->route.num_paths != 0 && rs->id->route.path_rec != nullptr
                              ? 1 << (7 + rs->id->route.path_rec->mtu)
                              : 2048;
          return put_int(val, len, mtu);
        }
        default:
          return fail(ENOTSUP);
      }
    case SOL_RDMA:
      switch (name) {
        case RDMA_SQSIZE:
          return put_int(val, len, rs->sq_size);
        case RDMA_RQSIZE:
          return put_int(val, len, rs->rq_size);
        case RDMA_INLINE:
          return put_int(val, len, int(rs->sq_inline));
        case RDMA_IOMAPSIZE:
          return put_int(val, len, int(rs->target_iomap_size));
        default:
          return fail(ENOTSUP);
      }
    default:
      return fail(ENOTSUP);
  }
}

int rs_fcntl(int s, int cmd, long arg) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  std::lock_guard<std::mutex> lk(rs->mu);
  switch (cmd) {
    case F_GETFL:
      return rs->fs_flags | O_RDWR;
    case F_SETFL:
      rs->fs_flags = int(arg) & O_NONBLOCK;
      return 0;
    case F_GETFD:
      return rs->fd_flags;
    case F_SETFD:
      rs->fd_flags = int(arg) & FD_CLOEXEC;
      return 0;
    default:
      return fail(ENOTSUP);
  }
}

int rs_getpeername(int s, sockaddr* addr, socklen_t* len) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  std::lock_guard<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr) return getpeername(rs->dg->udp_sock, addr, len);
  if ((rs->state & (kRsConnected | kRsAccepting | kRsDisconnected)) == 0) return fail(ENOTCONN);
  return copy_addr(&rs->id->route.addr.dst_addr, addr, len);
}

int rs_getsockname(int s, sockaddr* addr, socklen_t* len) {
  Rsocket* rs = rs_lookup(s);
  if (rs == nullptr) return fail(EBADF);
  std::lock_guard<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr) return getsockname(rs->dg->udp_sock, addr, len);
  sockaddr_storage any{};
  const sockaddr* src = &rs->id->route.addr.src_addr;
  if (src->sa_family != AF_INET && src->sa_family != AF_INET6 && src->sa_family != AF_IB) {
    any.ss_family = sa_family_t(rs->domain);
    src = reinterpret_cast<const sockaddr*>(&any);
  }
  return copy_addr(src, addr, len);
}

}  // namespace softverbs::cm
