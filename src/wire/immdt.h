// Immediate Data Extended Transport Header (IBA 9.3.7).
//
// Contract: 4 bytes. `value` is the big-endian wire word read as a number,
// i.e. host order. libibverbs keeps imm_data in network order (__be32): the
// verbs layer converts with htonl/ntohl at its boundary, never here.
// encode()/decode() touch exactly ImmDt::kBytes bytes (REQUIRES: that many
// are there). Value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

struct ImmDt {
  static constexpr size_t kBytes = 4;
  using ValueField = BeField<0, 4>;

  uint32_t value = 0;

  void encode(uint8_t* out) const { ValueField::set(out, value); }
  [[nodiscard]] static ImmDt decode(const uint8_t* in) { return ImmDt{ValueField::get(in)}; }
  friend bool operator==(const ImmDt&, const ImmDt&) = default;
};

}  // namespace softverbs::wire
