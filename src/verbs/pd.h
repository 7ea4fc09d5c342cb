// A protection domain: an id that MRs, QPs, SRQs and AHs carry, checked by
// mem_ops on every access.
//
// A parent domain (ibv_alloc_parent_domain(3)) is a Pd too, usable wherever
// one is: it carries its protection domain's id (so protection is that
// PD's), holds it (and its thread domain) busy while it exists, and may
// bring the application's allocator, which softverbs calls for the memory
// that is this process's own: a QP's send queue (kSendQueueResource). Rings
// that other processes write (receive queues, CQs) live in the device
// segment and cannot come from an application's allocator.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

namespace softverbs::verbs {

class Context;

// A thread domain (ibv_alloc_td(3)): a promise that the objects of a parent
// domain built on it are used by one thread at a time. Accepted and kept;
// softverbs takes its (uncontended) locks all the same.
struct Td {
  ibv_td ibv{};
  std::atomic<uint32_t> users{0};  // parent domains: dealloc_td fails with EBUSY while > 0

  static Td* from(ibv_td* t) { return reinterpret_cast<Td*>(t); }
};
static_assert(offsetof(Td, ibv) == 0);

// The resource_type softverbs passes to a parent domain's allocator for a
// QP's send queue (the only memory it takes from there); other values of
// ibv_parent_domain_init_attr's allocators are providers' own (mlx5dv.h).
inline constexpr uint64_t kSendQueueResource = 0x5356'0000'0000'0001ull;

struct Pd {
  ibv_pd ibv{};
  Context* ctx = nullptr;
  uint32_t id = 0;
  std::atomic<uint32_t> users{0};  // MRs, QPs, SRQs, AHs: dealloc_pd fails with EBUSY while > 0
  // Parent domain only (constant after creation).
  Pd* protection = nullptr;  // the PD it was made from; null for a plain PD
  Td* td = nullptr;
  void* (*alloc)(ibv_pd*, void*, size_t, size_t, uint64_t) = nullptr;
  void (*free)(ibv_pd*, void*, void*, uint64_t) = nullptr;
  void* pd_context = nullptr;

  static Pd* from(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }
};
static_assert(offsetof(Pd, ibv) == 0);

}  // namespace softverbs::verbs
