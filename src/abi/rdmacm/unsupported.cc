// Functions of librdmacm.so.1 that softverbs does not offer yet, failing the
// documented way: -1 (or NULL) with errno set, and a debug log line naming
// the function. They must exist: every consumer binds them at load
// (BIND_NOW), and a program that never calls them must run.
//
//   - multicast joins: EOPNOTSUPP, softverbs' CM has no SA to join through.
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>

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

SV_EXPORT int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) { return unsupported(__func__, EOPNOTSUPP); }
SV_EXPORT int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return unsupported(__func__, EOPNOTSUPP);
}
SV_EXPORT int rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return unsupported(__func__, EOPNOTSUPP); }
