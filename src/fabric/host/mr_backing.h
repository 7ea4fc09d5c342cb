// Owner side of the map path: moving a registered region onto a memfd so that
// peers can map the very pages the application uses.
//
// At registration the page-aligned span of a region of private anonymous
// memory is copied into a fresh memfd that is then mapped MAP_SHARED|MAP_FIXED
// over the span: same addresses, same contents, now shareable. Peers open the
// memfd through /proc/<pid>/fd/<n> (checking its inode) and map it, so an RDMA
// WRITE is one memcpy and an atomic one CPU atomic.
//
// Invariants:
//  1. Spans of live registrations never partially overlap: a region inside a
//     live span reuses it; one that straddles a span's edge is not remapped
//     (it falls back to cross-memory attach or bounce), so no page ever has
//     two backings.
//  2. A span stays in the registry while any MR uses it. After the last one
//     goes, the memfd is closed; the pages stay mapped for the application.
//  3. In a child after fork() every span is turned back into private memory
//     (a copy), so fork keeps its copy-on-write meaning for registered memory.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>

#include "fabric/fabrics.h"
#include "util/status.h"

namespace softverbs::fabric::host {

using Backing = RegionExport;  // fd -1: not mappable

// Finds or creates the backing for [addr, addr + length). When the region
// cannot be remapped (file-backed, shared, stack, straddling), returns a
// Backing with fd == -1 and the region stays as it is.
Backing acquire_backing(uint64_t addr, uint64_t length);
void release_backing(const Backing& backing);

// Whether registration remaps at all (SOFTVERBS_REMAP=0 turns it off).
bool remap_enabled();

}  // namespace softverbs::fabric::host
