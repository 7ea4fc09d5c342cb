// How a librdmacm.so.1 call that softverbs does not carry out fails: -1 (or
// NULL) with errno set, and a debug log line naming the function. Every
// exported function exists (consumers bind them all at load, BIND_NOW);
// those that refuse part of their input call this.
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


