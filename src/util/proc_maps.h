// The calling process's own mappings, as /proc/self/maps lists them.
//
// Registration needs two questions answered the way the kernel would answer
// them when it pins pages: is every page of a range mapped with the needed
// permissions (a PROT_NONE reservation is "mapped" to mincore, yet cannot be
// pinned), and what kind of memory backs it (mr_backing only remaps private
// anonymous memory).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace softverbs::util {

struct Mapping {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool read = false;
  bool write = false;
  bool is_private = false;
  std::string_view name;  // "" for anonymous memory; valid only during the visit
};

// Calls `accept` for each mapping that intersects [start, end), in address
// order. Returns true only when the mappings cover the range without a hole
// and `accept` returned true for every one of them.
bool every_mapping_in(uint64_t start, uint64_t end, const std::function<bool(const Mapping&)>& accept);

// Whether the kernel could pin [addr, addr + length) for access: readable, and
// writable as well when `need_write`.
bool range_pinnable(uint64_t addr, uint64_t length, bool need_write);

}  // namespace softverbs::util
