// RDMA Extended Transport Header (IBA 9.3.3): target of an RDMA WRITE or READ.
//
// Contract: 16 bytes, big-endian; encode() writes and decode() reads exactly
// Reth::kBytes bytes (REQUIRES: that many are there). Value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

struct Reth {
  static constexpr size_t kBytes = 16;
  using VaField = BeField<0, 8>;
  using RkeyField = BeField<8, 4>;
  using DmaLengthField = BeField<12, 4>;  // whole message length, not this packet's
  static_assert(DmaLengthField::kEnd == kBytes);

  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;

  void encode(uint8_t* out) const {
    VaField::set(out, va);
    RkeyField::set(out, rkey);
    DmaLengthField::set(out, dma_length);
  }
  [[nodiscard]] static Reth decode(const uint8_t* in) {
    return Reth{VaField::get(in), RkeyField::get(in), DmaLengthField::get(in)};
  }
  friend bool operator==(const Reth&, const Reth&) = default;
};

}  // namespace softverbs::wire
