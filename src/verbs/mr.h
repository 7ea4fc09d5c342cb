// Memory regions: a slot of the shared MR table (keys, PD, access, range) plus
// where the fabrics let peers reach its pages (fabric::export_region).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "fabric/fabrics.h"
#include "util/status.h"
#include "verbs/pd.h"

namespace softverbs::verbs {

struct Dm;

struct Mr {
  ibv_mr ibv{};
  Pd* pd = nullptr;
  uint32_t slot = 0;
  fabric::RegionExport backing;  // the DM's own when dm != nullptr
  Dm* dm = nullptr;              // ibv_reg_dm_mr: the device memory it covers
  // ibv_import_mr: names another registration's slot; dropping it (dereg or
  // unimport) leaves that registration alone (only its process ends it).
  bool imported = false;

  static Mr* from(ibv_mr* m) { return reinterpret_cast<Mr*>(m); }
};

// IBA 10.6.3 / ibv_reg_mr(3): REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE.
Status check_access_flags(unsigned access);

Result<Mr*> register_mr(Pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
// ibv_reg_dm_mr: [offset, offset + length) of `dm`, zero-based (remote and
// local addresses are offsets from `offset`).
Result<Mr*> register_dm_mr(Pd* pd, Dm* dm, uint64_t offset, size_t length, unsigned access);
Status deregister_mr(Mr* mr);
// ibv_import_mr: the registration in slot `handle`, if it is live and of
// `pd`'s protection domain. Its addr is NULL (ibv_import_mr(3)).
Result<Mr*> import_mr(Pd* pd, uint32_t handle);
// ibv_advise_mr(3): every SGE must lie in an ODP MR of `pd` (EINVAL if not
// ODP; EFAULT for a bad L_Key, a range outside its MR, a PREFETCH_WRITE
// without LOCAL_WRITE, or memory that is not mapped for the access).
// PREFETCH and PREFETCH_WRITE fault the pages in, synchronously; NO_FAULT
// only checks.
Status advise_mr(Pd* pd, uint32_t advice, uint32_t flags, const ibv_sge* sg_list, uint32_t num_sge);
// ibv_rereg_mr: new translation, PD or access for an existing region.
Status reregister_mr(Mr* mr, int flags, Pd* pd, void* addr, size_t length, unsigned access);

}  // namespace softverbs::verbs
