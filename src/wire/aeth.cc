#include "wire/aeth.h"

#include <array>

namespace softverbs::wire {
namespace {

// IBA 9.7.7 credit encoding: 0, 1, 2, 3, then every code doubles the one two
// below it (even code 2k -> 2^k, odd code 2k+1 -> 3 * 2^(k-1)).
constexpr std::array<uint32_t, 31> build_credits() {
  std::array<uint32_t, 31> t{};
  t[0] = 0;
  t[1] = 1;
  t[2] = 2;
  t[3] = 3;
  for (size_t code = 4; code < t.size(); ++code) t[code] = t[code - 2] * 2;
  return t;
}
constexpr std::array<uint32_t, 31> kCredits = build_credits();
static_assert(kCredits[4] == 4 && kCredits[5] == 6 && kCredits[9] == 24 && kCredits[30] == 32768);

// IBA 9.7.5.2 RNR NAK timer encoding, in microseconds.
constexpr std::array<uint32_t, 32> kRnrTimerUs = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

}  // namespace

uint32_t credit_count(uint8_t code) { return code < kCredits.size() ? kCredits[code] : 0; }

uint8_t credit_code_for(uint32_t available) {
  uint8_t code = 0;
  for (uint8_t c = 1; c < kCredits.size(); ++c)
    if (kCredits[c] <= available) code = c;
  return code;
}

uint32_t rnr_timer_us(uint8_t code) { return kRnrTimerUs[code & 0x1f]; }

}  // namespace softverbs::wire
