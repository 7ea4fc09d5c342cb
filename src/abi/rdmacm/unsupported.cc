// Functions of librdmacm.so.1 that softverbs does not offer yet, failing the
// documented way: -1 (or NULL) with errno set, and a debug log line naming
// the function. They must exist: every consumer binds them at load
// (BIND_NOW), and a program that never calls them must run.
//
//   - rsockets (rsocket, rbind, ..., riowrite): ENOSYS, librdmacm's own
//     errno for a socket call it cannot carry out.
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include <cerrno>
#include <cstdarg>

#include "abi/rdmacm/abi.h"
#include "util/log.h"

namespace softverbs::rdmacm_abi {

int unsupported(const char* fn, int err) {
  SV_LOG(kDebug, "%s: not supported by softverbs' librdmacm (%s)", fn, err == ENOSYS ? "ENOSYS" : "EOPNOTSUPP");
  errno = err;
  return -1;
}

}  // namespace softverbs::rdmacm_abi

using softverbs::rdmacm_abi::unsupported;

namespace {
int no_rsockets(const char* fn) { return unsupported(fn, ENOSYS); }
}  // namespace


SV_EXPORT int rsocket(int, int, int) { return no_rsockets(__func__); }
SV_EXPORT int rbind(int, const sockaddr*, socklen_t) { return no_rsockets(__func__); }
SV_EXPORT int rlisten(int, int) { return no_rsockets(__func__); }
SV_EXPORT int raccept(int, sockaddr*, socklen_t*) { return no_rsockets(__func__); }
SV_EXPORT int rconnect(int, const sockaddr*, socklen_t) { return no_rsockets(__func__); }
SV_EXPORT int rshutdown(int, int) { return no_rsockets(__func__); }
SV_EXPORT int rclose(int) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rrecv(int, void*, size_t, int) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rrecvmsg(int, msghdr*, int) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rsend(int, const void*, size_t, int) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return no_rsockets(__func__);
}
SV_EXPORT ssize_t rsendmsg(int, const msghdr*, int) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rread(int, void*, size_t) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rreadv(int, const iovec*, int) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rwrite(int, const void*, size_t) { return no_rsockets(__func__); }
SV_EXPORT ssize_t rwritev(int, const iovec*, int) { return no_rsockets(__func__); }
SV_EXPORT int rpoll(pollfd*, nfds_t, int) { return no_rsockets(__func__); }
SV_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) { return no_rsockets(__func__); }
SV_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) { return no_rsockets(__func__); }
SV_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) { return no_rsockets(__func__); }
SV_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) { return no_rsockets(__func__); }
SV_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) { return no_rsockets(__func__); }
SV_EXPORT int rfcntl(int, int, ...) { return no_rsockets(__func__); }
SV_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return no_rsockets(__func__); }
SV_EXPORT int riounmap(int, void*, size_t) { return no_rsockets(__func__); }
SV_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
  return static_cast<size_t>(no_rsockets(__func__));
}
