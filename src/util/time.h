// Clocks and the IBA encodings of time.
#pragma once

#include <cstdint>
#include <ctime>

namespace softverbs {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The adapter's clock, which completion timestamps and
// ibv_query_rt_values_ex read: CLOCK_MONOTONIC_RAW in ns, so one tick is one
// ns (hca_core_clock 1 GHz) and every process of the host reads the same
// clock, unslewed by NTP.
inline constexpr uint64_t kAdapterClockKhz = 1'000'000;
inline uint64_t adapter_clock_ticks() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline constexpr uint64_t kForever = ~0ull;

// IBA 9.7.6.1.3 / C9-140: Local ACK Timeout = 4.096 us * 2^timeout; 0 means infinite.
constexpr uint64_t local_ack_timeout_ns(uint8_t timeout) {
  if (timeout == 0) return kForever;
  if (timeout > 31) timeout = 31;
  return 4096ull << timeout;
}

// IBA Table 45 (RNR NAK timer field encoding), in microseconds. Code 0 is 655.36 ms.
constexpr uint64_t rnr_timer_ns(uint8_t code) {
  constexpr uint32_t kMicros[32] = {
      655360, 10,    20,    30,    40,    60,    80,     120,    160,    240,   320,
      480,    640,   960,   1280,  1920,  2560,  3840,   5120,   7680,   10240, 15360,
      20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return static_cast<uint64_t>(kMicros[code & 31]) * 1000ull;
}

}  // namespace softverbs
