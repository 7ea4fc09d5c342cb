// Logging to stderr, filtered by SOFTVERBS_LOG=error|warn|info|debug (default warn).
//
// Thread-safe. Messages about bad input from the network or from peers go
// through SV_LOG_RATELIMITED so a flood of bad packets cannot flood stderr.
#pragma once

#include <atomic>
#include <cstdint>

namespace softverbs::log {

enum class Level : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

bool enabled(Level level);
[[gnu::format(printf, 2, 3)]] void write(Level level, const char* fmt, ...);

// True at most `per_second` times a second for one call site.
bool rate_allows(std::atomic<uint64_t>& window, unsigned per_second);

}  // namespace softverbs::log

#define SV_LOG(level, ...)                                                      \
  do {                                                                          \
    if (::softverbs::log::enabled(::softverbs::log::Level::level))              \
      ::softverbs::log::write(::softverbs::log::Level::level, __VA_ARGS__);     \
  } while (0)

#define SV_LOG_RATELIMITED(level, ...)                                          \
  do {                                                                          \
    static std::atomic<uint64_t> sv_window_{0};                                 \
    if (::softverbs::log::enabled(::softverbs::log::Level::level) &&            \
        ::softverbs::log::rate_allows(sv_window_, 10))                          \
      ::softverbs::log::write(::softverbs::log::Level::level, __VA_ARGS__);     \
  } while (0)
