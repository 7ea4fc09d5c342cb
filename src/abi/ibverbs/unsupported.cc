// Public verbs softverbs does not support (yet), failing the documented way.
//
//   - Importing device memory (ibv_import_dm): DMs are not kept in the
//     context's file (context_file.h), so there is nothing to import from;
//     NULL with errno EOPNOTSUPP, and ibv_unimport_dm has nothing to release.
//   - ibv_reg_dmabuf_mr registers device (GPU) memory exported as a dma-buf
//     fd; softverbs reaches memory through process mappings only.
//   - ibv_resolve_eth_l2_from_gid resolves a RoCE peer's MAC through the
//     kernel neighbour table for hardware providers (Debian's libmlx5).
//
// pyverbs imports the DM import/unimport and dma-buf verbs, libmlx5 the
// resolver; they must exist for those to load.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "abi/ibverbs/abi.h"
#include "util/log.h"

#define SV_PUBLIC __attribute__((visibility("default")))

namespace softverbs::abi {

int unsupported(const char* verb) {
  const std::string name = std::strncmp(verb, "u_", 2) == 0 ? std::string("ibv_") + (verb + 2) : verb;
  SV_LOG(kDebug, "%s: not supported by softverbs (EOPNOTSUPP)", name.c_str());
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // namespace softverbs::abi

using softverbs::abi::unsupported;
using softverbs::abi::unsupported_ptr;

extern "C" {

SV_PUBLIC struct ibv_dm* ibv_import_dm(struct ibv_context* /*context*/, uint32_t /*dm_handle*/) {
  return unsupported_ptr<struct ibv_dm>(__func__);
}

SV_PUBLIC void ibv_unimport_dm(struct ibv_dm* /*dm*/) {}

SV_PUBLIC struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* /*pd*/, uint64_t /*offset*/, size_t /*length*/,
                                           uint64_t /*iova*/, int /*fd*/, int /*access*/) {
  return unsupported_ptr<struct ibv_mr>(__func__);
}

// rdma-core returns 0 or a negative errno value here (-EINVAL,
// -EHOSTUNREACH); errno is set as well.
SV_PUBLIC int ibv_resolve_eth_l2_from_gid(struct ibv_context* /*context*/, struct ibv_ah_attr* /*attr*/,
                                          uint8_t /*eth_mac*/[ETHERNET_LL_SIZE], uint16_t* /*vid*/) {
  unsupported(__func__);
  return -EOPNOTSUPP;
}

}  // extern "C"
