// XRC Extended Transport Header (IBA Annex A14): the XRC SRQ at the
// responder that an XRC request's receive WQE (and memory protection
// domain) comes from. It follows the BTH in every XRC request packet;
// responses carry none.
//
// Contract: 4 bytes, big-endian; the first byte is reserved (written 0,
// ignored), the other three the 24-bit XRCSRQ. encode()/decode() touch
// exactly Xrceth::kBytes bytes (REQUIRES: that many are there). Value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

struct Xrceth {
  static constexpr size_t kBytes = 4;
  using SrqnField = Field<1, 0, 24>;
  static_assert(SrqnField::kEnd == kBytes);

  uint32_t srqn = 0;  // 24 bits

  void encode(uint8_t* out) const {
    out[0] = 0;  // reserved
    SrqnField::set(out, srqn);
  }
  [[nodiscard]] static Xrceth decode(const uint8_t* in) { return Xrceth{SrqnField::get(in)}; }
  friend bool operator==(const Xrceth&, const Xrceth&) = default;
};

}  // namespace softverbs::wire
