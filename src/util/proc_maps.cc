#include "util/proc_maps.h"

#include <cstdio>

namespace softverbs::util {

bool every_mapping_in(uint64_t start, uint64_t end, const std::function<bool(const Mapping&)>& accept) {
  if (start >= end) return true;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return false;
  char line[512];
  uint64_t covered = start;
  bool ok = true;
  while (ok && covered < end && std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long lo = 0, hi = 0;
    char perms[8] = {};
    int name_at = 0;
    if (std::sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &name_at) < 3) continue;
    if (hi <= covered) continue;
    if (lo > covered) {
      ok = false;  // a hole
      break;
    }
    std::string_view name(line + name_at);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    if (!name.empty() && name.back() == '\n') name.remove_suffix(1);
    const Mapping m{lo, hi, perms[0] == 'r', perms[1] == 'w', perms[3] == 'p', name};
    ok = accept(m);
    covered = hi;
  }
  std::fclose(f);
  return ok && covered >= end;
}

bool range_pinnable(uint64_t addr, uint64_t length, bool need_write) {
  constexpr uint64_t kPage = 4096;
  const uint64_t start = addr & ~(kPage - 1);
  const uint64_t end = (addr + length + kPage - 1) & ~(kPage - 1);
  return every_mapping_in(start, end, [&](const Mapping& m) { return m.read && (m.write || !need_write); });
}

}  // namespace softverbs::util
