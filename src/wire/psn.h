// Packet Sequence Numbers: 24-bit values with serial-number comparison.
//
// Contract:
//   1. A Psn always holds a value below 2^24 (IBA 9.2: the BTH PSN is 24 bits);
//      every constructor and arithmetic result is reduced modulo 2^24.
//   2. psn_diff(a, b) is the signed distance from b to a in [-2^23, 2^23).
//      a is "ahead of" b when 0 < psn_diff(a, b) < 2^23 (IBA 9.7.1: the valid
//      PSN window is half the sequence space). There is deliberately no
//      operator< — serial order is not a total order.
//   3. Value type, constexpr, thread-compatible.
#pragma once

#include <cstdint>

namespace softverbs::wire {

class Psn {
 public:
  static constexpr uint32_t kBits = 24;
  static constexpr uint32_t kModulus = 1u << kBits;
  static constexpr uint32_t kMask = kModulus - 1;
  static constexpr uint32_t kHalf = kModulus / 2;  // 2^23: the serial window

  constexpr Psn() = default;
  constexpr explicit Psn(uint32_t v) : v_(v & kMask) {}

  [[nodiscard]] constexpr uint32_t value() const { return v_; }

  friend constexpr bool operator==(Psn a, Psn b) = default;

 private:
  uint32_t v_ = 0;
};

// a + n modulo 2^24; n may be negative.
[[nodiscard]] constexpr Psn psn_add(Psn a, int64_t n) {
  return Psn(static_cast<uint32_t>(static_cast<uint64_t>(a.value()) + static_cast<uint64_t>(n)));
}

// Signed distance from b to a, in [-2^23, 2^23).
[[nodiscard]] constexpr int32_t psn_diff(Psn a, Psn b) {
  const uint32_t d = (a.value() - b.value()) & Psn::kMask;
  return d >= Psn::kHalf ? static_cast<int32_t>(d) - static_cast<int32_t>(Psn::kModulus)
                         : static_cast<int32_t>(d);
}

// True when a is strictly ahead of b within half the sequence space.
[[nodiscard]] constexpr bool psn_after(Psn a, Psn b) { return psn_diff(a, b) > 0; }
// True when a is strictly behind b (an older, e.g. duplicate, packet).
[[nodiscard]] constexpr bool psn_before(Psn a, Psn b) { return psn_diff(a, b) < 0; }

constexpr Psn& operator++(Psn& p) { return p = psn_add(p, 1); }

}  // namespace softverbs::wire
