// Shared by the C entry points of librdmacm.so.1.
//
// Only this directory spells rdma_* and r* (rsocket) functions. Each entry
// point keeps librdmacm's contract: 0 or -1 with errno, NULL with errno for
// the constructors.
#pragma once

#include <rdma/rdma_cma.h>

#include <cerrno>

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace softverbs::rdmacm_abi {

// A function softverbs' librdmacm does not offer yet: a debug log line
// naming it (SOFTVERBS_LOG=debug), errno `err` (ENOSYS: not written yet;
// EOPNOTSUPP: a feature the device lacks), and -1 to return.
int unsupported(const char* fn, int err);

}  // namespace softverbs::rdmacm_abi
