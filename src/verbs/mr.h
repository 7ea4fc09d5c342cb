// Memory regions: a slot of the shared MR table (keys, PD, access, range) plus
// where the fabrics let peers reach its pages (fabric::export_region).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "fabric/fabrics.h"
#include "util/status.h"
#include "verbs/pd.h"

namespace softverbs::verbs {

struct Mr {
  ibv_mr ibv{};
  Pd* pd = nullptr;
  uint32_t slot = 0;
  fabric::RegionExport backing;
  // ibv_import_mr: names another registration's slot; dropping it (dereg or
  // unimport) leaves that registration alone (only its process ends it).
  bool imported = false;

  static Mr* from(ibv_mr* m) { return reinterpret_cast<Mr*>(m); }
};

// IBA 10.6.3 / ibv_reg_mr(3): REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE.
Status check_access_flags(unsigned access);

Result<Mr*> register_mr(Pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
Status deregister_mr(Mr* mr);
// ibv_import_mr: the registration in slot `handle`, if it is live and of
// `pd`'s protection domain. Its addr is NULL (ibv_import_mr(3)).
Result<Mr*> import_mr(Pd* pd, uint32_t handle);
// ibv_rereg_mr: new translation, PD or access for an existing region.
Status reregister_mr(Mr* mr, int flags, Pd* pd, void* addr, size_t length, unsigned access);

}  // namespace softverbs::verbs
