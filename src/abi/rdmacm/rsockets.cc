// rsockets: librdmacm's socket calls, over the CM's rsocket engine
// (src/cm/rsocket*.cc): stream rsockets over RC, datagram ones over UD.
#include <fcntl.h>
#include <rdma/rsocket.h>

#include <cstdarg>

#include "abi/rdmacm/abi.h"
#include "cm/rsocket.h"

namespace cm = softverbs::cm;

SV_EXPORT int rsocket(int domain, int type, int protocol) { return cm::rs_socket(domain, type, protocol); }
SV_EXPORT int rbind(int s, const sockaddr* addr, socklen_t len) { return cm::rs_bind(s, addr, len); }
SV_EXPORT int rlisten(int s, int backlog) { return cm::rs_listen(s, backlog); }
SV_EXPORT int raccept(int s, sockaddr* addr, socklen_t* len) { return cm::rs_accept(s, addr, len); }
SV_EXPORT int rconnect(int s, const sockaddr* addr, socklen_t len) { return cm::rs_connect(s, addr, len); }
SV_EXPORT int rshutdown(int s, int how) { return cm::rs_shutdown(s, how); }
SV_EXPORT int rclose(int s) { return cm::rs_close(s); }
SV_EXPORT ssize_t rrecv(int s, void* buf, size_t len, int flags) { return cm::rs_recv(s, buf, len, flags); }
SV_EXPORT ssize_t rrecvfrom(int s, void* buf, size_t len, int flags, sockaddr* src, socklen_t* srclen) {
  iovec iov{buf, len};
  return cm::rs_recvfrom(s, &iov, 1, flags, src, srclen);
}
SV_EXPORT ssize_t rrecvmsg(int s, msghdr* msg, int flags) {
  if (msg == nullptr) {
    errno = EINVAL;
    return -1;
  }
  if (msg->msg_control != nullptr && msg->msg_controllen != 0) {
    errno = ENOTSUP;
    return -1;
  }
  auto* from = static_cast<sockaddr*>(msg->msg_name);
  return cm::rs_recvfrom(s, msg->msg_iov, int(msg->msg_iovlen), flags, from, from != nullptr ? &msg->msg_namelen : nullptr);
}
SV_EXPORT ssize_t rsend(int s, const void* buf, size_t len, int flags) { return cm::rs_send(s, buf, len, flags); }
SV_EXPORT ssize_t rsendto(int s, const void* buf, size_t len, int flags, const sockaddr* to, socklen_t tolen) {
  iovec iov{const_cast<void*>(buf), len};
  return cm::rs_sendto(s, &iov, 1, flags, to, tolen);
}
SV_EXPORT ssize_t rsendmsg(int s, const msghdr* msg, int flags) {
  if (msg == nullptr) {
    errno = EINVAL;
    return -1;
  }
  if (msg->msg_control != nullptr && msg->msg_controllen != 0) {
    errno = ENOTSUP;
    return -1;
  }
  return cm::rs_sendto(s, msg->msg_iov, int(msg->msg_iovlen), flags, static_cast<const sockaddr*>(msg->msg_name),
                       msg->msg_namelen);
}
SV_EXPORT ssize_t rread(int s, void* buf, size_t len) { return cm::rs_recv(s, buf, len, 0); }
SV_EXPORT ssize_t rreadv(int s, const iovec* iov, int iovcnt) { return cm::rs_recvv(s, iov, iovcnt, 0); }
SV_EXPORT ssize_t rwrite(int s, const void* buf, size_t len) { return cm::rs_send(s, buf, len, 0); }
SV_EXPORT ssize_t rwritev(int s, const iovec* iov, int iovcnt) { return cm::rs_sendv(s, iov, iovcnt, 0); }
SV_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) { return cm::rs_poll(fds, nfds, timeout); }
SV_EXPORT int rselect(int nfds, fd_set* r, fd_set* w, fd_set* e, timeval* timeout) {
  return cm::rs_select(nfds, r, w, e, timeout);
}
SV_EXPORT int rgetpeername(int s, sockaddr* addr, socklen_t* len) { return cm::rs_getpeername(s, addr, len); }
SV_EXPORT int rgetsockname(int s, sockaddr* addr, socklen_t* len) { return cm::rs_getsockname(s, addr, len); }
SV_EXPORT int rsetsockopt(int s, int level, int name, const void* val, socklen_t len) {
  return cm::rs_setsockopt(s, level, name, val, len);
}
SV_EXPORT int rgetsockopt(int s, int level, int name, void* val, socklen_t* len) {
  return cm::rs_getsockopt(s, level, name, val, len);
}
SV_EXPORT int rfcntl(int s, int cmd, ...) {
  long arg = 0;
  if (cmd == F_SETFL || cmd == F_SETFD) {
    va_list ap;
    va_start(ap, cmd);
    arg = va_arg(ap, int);
    va_end(ap);
  }
  return cm::rs_fcntl(s, cmd, arg);
}
SV_EXPORT off_t riomap(int s, void* buf, size_t len, int prot, int flags, off_t offset) {
  return cm::rs_iomap(s, buf, len, prot, flags, offset);
}
SV_EXPORT int riounmap(int s, void* buf, size_t len) { return cm::rs_iounmap(s, buf, len); }
SV_EXPORT size_t riowrite(int s, const void* buf, size_t count, off_t offset, int flags) {
  return cm::rs_iowrite(s, buf, count, offset, flags);
}
