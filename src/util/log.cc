#include "util/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/time.h"

namespace softverbs::log {
namespace {

int level_from_env() {
  const char* v = std::getenv("SOFTVERBS_LOG");
  if (v == nullptr) return static_cast<int>(Level::kWarn);
  if (std::strcmp(v, "error") == 0) return static_cast<int>(Level::kError);
  if (std::strcmp(v, "info") == 0) return static_cast<int>(Level::kInfo);
  if (std::strcmp(v, "debug") == 0) return static_cast<int>(Level::kDebug);
  return static_cast<int>(Level::kWarn);
}

const char* name(Level level) {
  switch (level) {
    case Level::kError: return "error";
    case Level::kWarn: return "warn";
    case Level::kInfo: return "info";
    case Level::kDebug: return "debug";
  }
  return "?";
}

}  // namespace

bool enabled(Level level) {
  static const int threshold = level_from_env();
  return static_cast<int>(level) <= threshold;
}

void write(Level level, const char* fmt, ...) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "softverbs[%d] %s: ", static_cast<int>(getpid()), name(level));
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : static_cast<size_t>(m));
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  ssize_t ignored = ::write(STDERR_FILENO, buf, len);
  (void)ignored;
}

bool rate_allows(std::atomic<uint64_t>& window, unsigned per_second) {
  // window packs (second << 16) | count-in-that-second.
  const uint64_t second = now_ns() / 1'000'000'000ull;
  uint64_t cur = window.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t next;
    if ((cur >> 16) != second) {
      next = (second << 16) | 1;
    } else if ((cur & 0xffff) < per_second) {
      next = cur + 1;
    } else {
      return false;
    }
    if (window.compare_exchange_weak(cur, next, std::memory_order_relaxed)) return true;
  }
}

}  // namespace softverbs::log
