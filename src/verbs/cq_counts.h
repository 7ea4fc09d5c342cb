// What librdmacm.so.1 may know of a CQ beyond the public verbs: how many
// entries were ever produced into it and how many the application took
// (cm/held_disconnect.h holds DISCONNECTED back until the entries that came
// before it are taken). The public verbs cannot tell whether a CQ holds
// entries without taking them.
//
// Inline over verbs::Cq, so it reads the CQ objects of the libibverbs.so.1
// of the same build: our librdmacm.so.1 never runs over another libibverbs.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "verbs/cq.h"

namespace softverbs::verbs {

inline uint64_t cq_produced(ibv_cq* cq) { return Cq::from(cq)->shared().tail.load(std::memory_order_acquire); }
inline uint64_t cq_consumed(ibv_cq* cq) { return Cq::from(cq)->shared().head.load(std::memory_order_acquire); }

}  // namespace softverbs::verbs
