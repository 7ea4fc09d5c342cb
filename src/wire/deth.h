// Datagram Extended Transport Header (IBA 9.3.2): Q_Key and source QP of
// every UD packet.
//
// Contract: 8 bytes, big-endian; the byte between Q_Key and SrcQP is
// reserved (written 0, ignored). encode()/decode() touch exactly
// Deth::kBytes bytes (REQUIRES: that many are there). Value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

struct Deth {
  static constexpr size_t kBytes = 8;
  using QkeyField = BeField<0, 4>;
  using SrcQpField = Field<5, 0, 24>;
  static_assert(SrcQpField::kEnd == kBytes);

  uint32_t qkey = 0;
  uint32_t src_qp = 0;  // 24 bits

  void encode(uint8_t* out) const {
    QkeyField::set(out, qkey);
    out[4] = 0;  // reserved
    SrcQpField::set(out, src_qp);
  }
  [[nodiscard]] static Deth decode(const uint8_t* in) {
    return Deth{QkeyField::get(in), SrcQpField::get(in)};
  }
  friend bool operator==(const Deth&, const Deth&) = default;
};

}  // namespace softverbs::wire
