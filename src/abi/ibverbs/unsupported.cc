// Public verbs softverbs does not support (yet), failing the documented way.
//
//   - Importing objects from another process's context (ibv_import_pd/mr/dm)
//     needs a context shared through ibv_import_device's command fd; there
//     is nothing to import from, so they return NULL with errno EOPNOTSUPP,
//     and the unimport calls, which can only be given objects that an import
//     returned, have nothing to release.
//   - ibv_reg_dmabuf_mr registers device (GPU) memory exported as a dma-buf
//     fd; softverbs reaches memory through process mappings only.
//   - ibv_resolve_eth_l2_from_gid resolves a RoCE peer's MAC through the
//     kernel neighbour table for hardware providers (Debian's libmlx5).
//
// pyverbs imports the import/unimport and dma-buf verbs, libmlx5 the
// resolver; they must exist for those to load.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#define SV_PUBLIC __attribute__((visibility("default")))

extern "C" {

SV_PUBLIC struct ibv_pd* ibv_import_pd(struct ibv_context* /*context*/, uint32_t /*pd_handle*/) {
  errno = EOPNOTSUPP;
  return nullptr;
}

SV_PUBLIC void ibv_unimport_pd(struct ibv_pd* /*pd*/) {}

SV_PUBLIC struct ibv_mr* ibv_import_mr(struct ibv_pd* /*pd*/, uint32_t /*mr_handle*/) {
  errno = EOPNOTSUPP;
  return nullptr;
}

SV_PUBLIC void ibv_unimport_mr(struct ibv_mr* /*mr*/) {}

SV_PUBLIC struct ibv_dm* ibv_import_dm(struct ibv_context* /*context*/, uint32_t /*dm_handle*/) {
  errno = EOPNOTSUPP;
  return nullptr;
}

SV_PUBLIC void ibv_unimport_dm(struct ibv_dm* /*dm*/) {}

SV_PUBLIC struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* /*pd*/, uint64_t /*offset*/, size_t /*length*/,
                                           uint64_t /*iova*/, int /*fd*/, int /*access*/) {
  errno = EOPNOTSUPP;
  return nullptr;
}

// rdma-core returns 0 or a negative errno value here (-EINVAL,
// -EHOSTUNREACH); errno is set as well.
SV_PUBLIC int ibv_resolve_eth_l2_from_gid(struct ibv_context* /*context*/, struct ibv_ah_attr* /*attr*/,
                                          uint8_t /*eth_mac*/[ETHERNET_LL_SIZE], uint16_t* /*vid*/) {
  errno = EOPNOTSUPP;
  return -EOPNOTSUPP;
}

}  // extern "C"
