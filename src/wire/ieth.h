// Invalidate Extended Transport Header (IBA 9.3.8): the R_Key a SEND WITH
// INVALIDATE asks the responder to invalidate.
//
// Contract: 4 bytes, big-endian; encode()/decode() touch exactly
// Ieth::kBytes bytes (REQUIRES: that many are there). Value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

struct Ieth {
  static constexpr size_t kBytes = 4;
  using RkeyField = BeField<0, 4>;

  uint32_t rkey = 0;

  void encode(uint8_t* out) const { RkeyField::set(out, rkey); }
  [[nodiscard]] static Ieth decode(const uint8_t* in) { return Ieth{RkeyField::get(in)}; }
  friend bool operator==(const Ieth&, const Ieth&) = default;
};

}  // namespace softverbs::wire
