// Atomic Extended Transport Header (IBA 9.3.4): COMPARE SWAP and FETCH ADD.
//
// Contract: 28 bytes, big-endian; encode()/decode() touch exactly
// AtomicEth::kBytes bytes (REQUIRES: that many are there). The 64-bit
// operands sit at offsets 12 and 20, so they are not 8-byte aligned on the
// wire: never cast, always go through the field descriptors. Value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

struct AtomicEth {
  static constexpr size_t kBytes = 28;
  using VaField = BeField<0, 8>;        // IBA 9.3.4: must be 8-byte aligned (checked
                                        // by the responder, not here)
  using RkeyField = BeField<8, 4>;
  using SwapAddField = BeField<12, 8>;  // swap value (CmpSwap) or addend (FetchAdd)
  using CompareField = BeField<20, 8>;  // compare value; unused by FetchAdd
  static_assert(CompareField::kEnd == kBytes);

  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;

  void encode(uint8_t* out) const {
    VaField::set(out, va);
    RkeyField::set(out, rkey);
    SwapAddField::set(out, swap_add);
    CompareField::set(out, compare);
  }
  [[nodiscard]] static AtomicEth decode(const uint8_t* in) {
    return AtomicEth{VaField::get(in), RkeyField::get(in), SwapAddField::get(in),
                     CompareField::get(in)};
  }
  friend bool operator==(const AtomicEth&, const AtomicEth&) = default;
};

}  // namespace softverbs::wire
