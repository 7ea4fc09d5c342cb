// Device memory (ibv_alloc_dm): memory of the adapter that the application
// reaches only through the DM's copy functions and MRs registered on it.
//
// A DM is a memfd of its own, mapped in the owning process: peers on the host
// fabric reach its MRs like any registered memory (map, cma, bounce), the
// UDP fabric's responder through the owner's mapping; the kernel frees it
// with the last fd and mapping, so a process that dies leaks nothing.
//
// Thread-safety: copies may run concurrently with each other and with RDMA
// on the DM's MRs (as on hardware, overlapping writes race); free() must not
// race the DM's other calls.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "fabric/fabrics.h"
#include "util/status.h"

namespace softverbs::verbs {

class Context;

// The largest ibv_alloc_dm (max_dm_size); larger requests fail with ENOMEM.
inline constexpr uint64_t kMaxDmSize = 1ull << 20;
// The strictest alignment a DM offers (log2): its pages'.
inline constexpr uint32_t kMaxDmLogAlign = 12;

struct Dm {
  ibv_dm ibv{};  // first: ibv_dm pointers are this object
  Context* ctx = nullptr;
  char* base = nullptr;  // where the DM is mapped here
  uint64_t length = 0;   // what was asked for: the range copies and MRs may use
  fabric::RegionExport backing;
  std::atomic<uint32_t> mrs{0};  // free() fails with EBUSY while > 0

  static Dm* from(ibv_dm* d) { return reinterpret_cast<Dm*>(d); }
  static Result<Dm*> alloc(Context* ctx, const ibv_alloc_dm_attr& attr);
  Status free();
  // EINVAL when [offset, offset + length) leaves the DM.
  Status copy_to(uint64_t offset, const void* src, size_t length);
  Status copy_from(void* dst, uint64_t offset, size_t length) const;
  bool contains(uint64_t offset, uint64_t n) const { return offset <= length && n <= length - offset; }
};
static_assert(offsetof(Dm, ibv) == 0);

}  // namespace softverbs::verbs
