// A protection domain: an id that MRs, QPs, SRQs and AHs carry, checked by
// mem_ops on every access.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

namespace softverbs::verbs {

class Context;

struct Pd {
  ibv_pd ibv{};
  Context* ctx = nullptr;
  uint32_t id = 0;
  std::atomic<uint32_t> users{0};  // MRs, QPs, SRQs, AHs: dealloc_pd fails with EBUSY while > 0

  static Pd* from(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }
};
static_assert(offsetof(Pd, ibv) == 0);

}  // namespace softverbs::verbs
