// Memory windows (IBA 10.6.7): a slot in the upper half of the shared key
// table, owned by this process and its PD. Binding and invalidating happen on
// a QP's send queue (transport/mw_ops.h); this is allocation and release.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "transport/send_queue.h"
#include "util/status.h"
#include "verbs/pd.h"

namespace softverbs::verbs {

struct Mw {
  ibv_mw ibv{};
  Pd* pd = nullptr;
  uint32_t slot = 0;

  static Mw* from(ibv_mw* m) { return reinterpret_cast<Mw*>(m); }
};
static_assert(offsetof(Mw, ibv) == 0);

// ibv_alloc_mw: unbound; ibv.rkey is the key a first bind increments (ibv_inc_rkey).
Result<Mw*> allocate_mw(Pd* pd, ibv_mw_type type);
// ibv_dealloc_mw(3): unbinds a bound window, then frees it.
Status deallocate_mw(Mw* mw);

// A BIND_MW WQE's fields (transport::SendWqe names where they go).
void fill_bind(transport::SendWqe& w, ibv_mw* mw, uint32_t new_rkey, const ibv_mw_bind_info& info);

}  // namespace softverbs::verbs
