// Sizes of the device's shared tables. They are the device's hard limits and
// what ibv_query_device reports; the segment layout is computed from them.
#pragma once

#include <cstdint>

namespace softverbs::shm {

inline constexpr uint32_t kMaxProcesses = 1024;
inline constexpr uint32_t kQpSlotBits = 14;                // QPN = gen(10 bits) | slot(14 bits)
inline constexpr uint32_t kMaxQpSlots = 1u << kQpSlotBits;  // slots 0 and 1 are the reserved QPNs
inline constexpr uint32_t kMaxCqs = 16384;
inline constexpr uint32_t kMaxSrqs = 4096;
inline constexpr uint32_t kMaxXrcds = 256;
inline constexpr uint32_t kMrSlotBits = 16;                 // the key table: MRs, then memory windows
inline constexpr uint32_t kMaxMrs = 1u << kMrSlotBits;      // slots of the key table, both kinds
inline constexpr uint32_t kFirstMwSlot = kMaxMrs / 2;       // windows take the upper half (mem_ops.h: keys)

inline constexpr uint32_t kMaxQpWr = 16384;
inline constexpr uint32_t kMaxSrqWr = 16384;
inline constexpr uint32_t kMaxSrqRingMoves = 14;  // log2(kMaxSrqWr): each move at least doubles
static_assert(1u << kMaxSrqRingMoves == kMaxSrqWr);
inline constexpr uint32_t kMaxSge = 32;
inline constexpr uint32_t kMaxCqe = 1u << 20;
inline constexpr uint32_t kMaxInlineData = 1024;
inline constexpr uint32_t kMaxRdAtomic = 16;  // also the depth of the atomic replay ring
inline constexpr uint64_t kMaxMrSize = 1ull << 40;
inline constexpr uint32_t kMaxMsgSize = 1u << 31;

// Multicast (ibv_attach_mcast): groups of the port, and QPs in each; the
// total is their product (max_total_mcast_qp_attach).
inline constexpr uint32_t kMaxMcastGroups = 128;
inline constexpr uint32_t kMaxMcastQpAttach = 56;

inline constexpr uint32_t kBounceSlots = 4;
inline constexpr uint32_t kBounceBytes = 64 * 1024;

inline constexpr uint64_t kPageSize = 4096;
inline constexpr uint64_t kArenaBytes = 4ull << 30;  // sparse: only touched pages cost memory

}  // namespace softverbs::shm
