// FLUSH Extended Transport Header (IBA 1.5, Annex A19): what a FLUSH asks the
// responder to make its earlier writes reach, and over how much memory. It
// follows the BTH of a FLUSH request, before the RETH.
//
// Contract: 4 bytes, big-endian; bits 3..0 are the placement type (a mask:
// kGlobalVisibility, kPersistence), bits 5..4 the selectivity (kRange: the
// RETH's range; kWholeRegion: the whole region its R_Key names); the rest is
// reserved (written 0, ignored). encode()/decode() touch exactly
// Feth::kBytes bytes (REQUIRES: that many are there). Value type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

struct Feth {
  static constexpr size_t kBytes = 4;
  using Word = BeField<0, 4>;
  static constexpr uint8_t kGlobalVisibility = 1u << 0;
  static constexpr uint8_t kPersistence = 1u << 1;
  static constexpr uint8_t kRange = 0;
  static constexpr uint8_t kWholeRegion = 1;

  uint8_t placement = 0;    // 4 bits
  uint8_t selectivity = 0;  // 2 bits

  void encode(uint8_t* out) const {
    Word::set(out, static_cast<uint32_t>(placement & 0xfu) | static_cast<uint32_t>(selectivity & 0x3u) << 4);
  }
  [[nodiscard]] static Feth decode(const uint8_t* in) {
    const uint32_t w = static_cast<uint32_t>(Word::get(in));
    return Feth{static_cast<uint8_t>(w & 0xfu), static_cast<uint8_t>((w >> 4) & 0x3u)};
  }
  friend bool operator==(const Feth&, const Feth&) = default;
};

}  // namespace softverbs::wire
