// Atomic Acknowledge Extended Transport Header (IBA 9.3.6): the value the
// target held before an atomic operation.
//
// Contract: 8 bytes, big-endian; encode()/decode() touch exactly
// AtomicAckEth::kBytes bytes (REQUIRES: that many are there). Value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

struct AtomicAckEth {
  static constexpr size_t kBytes = 8;
  using OrigField = BeField<0, 8>;
  static_assert(OrigField::kEnd == kBytes);

  uint64_t orig = 0;

  void encode(uint8_t* out) const { OrigField::set(out, orig); }
  [[nodiscard]] static AtomicAckEth decode(const uint8_t* in) {
    return AtomicAckEth{OrigField::get(in)};
  }
  friend bool operator==(const AtomicAckEth&, const AtomicAckEth&) = default;
};

}  // namespace softverbs::wire
