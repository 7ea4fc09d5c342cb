// One descriptor for every big-endian wire field.
//
// Contract:
//   Field<ByteOff, BitOff, Width> names `Width` bits that start `BitOff` bits
//   below the most significant bit of byte `ByteOff`, counting the way the
//   IBA figures are read: left to right, most significant first. get() and
//   set() touch only the bytes the field spans, so a header codec is a list
//   of descriptors instead of hand-written shift/mask accessors.
//   1. Pure functions over bytes; no host-endian bitfields, no alignment
//      requirement, thread-compatible (no state).
//   2. REQUIRES: the caller's buffer holds at least kEnd bytes from the
//      pointer passed in (the codec that owns the header checks its length).
//   3. set() keeps every bit outside the field and truncates the value to
//      Width bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace softverbs::wire {

template <unsigned Width>
using FieldValue = std::conditional_t<
    (Width <= 8), uint8_t,
    std::conditional_t<(Width <= 16), uint16_t,
                       std::conditional_t<(Width <= 32), uint32_t, uint64_t>>>;

template <size_t ByteOff, unsigned BitOff, unsigned Width>
struct Field {
  static_assert(Width >= 1 && Width <= 64, "a field is 1..64 bits");
  static_assert(BitOff < 8, "express whole bytes through ByteOff");
  static_assert(BitOff + Width <= 64, "a field spans at most 8 bytes");

  using value_type = FieldValue<Width>;
  static constexpr size_t kSpan = (BitOff + Width + 7) / 8;  // bytes touched
  static constexpr size_t kEnd = ByteOff + kSpan;            // one past the last byte
  static constexpr unsigned kShift = unsigned(kSpan * 8 - BitOff - Width);
  static constexpr uint64_t kMask = Width == 64 ? ~uint64_t{0} : (uint64_t{1} << Width) - 1;

  [[nodiscard]] static constexpr value_type get(const uint8_t* hdr) {
    uint64_t word = 0;
    for (size_t i = 0; i < kSpan; ++i) word = (word << 8) | hdr[ByteOff + i];
    return static_cast<value_type>((word >> kShift) & kMask);
  }

  static constexpr void set(uint8_t* hdr, uint64_t value) {
    const uint64_t field_bits = kMask << kShift;  // kShift + Width <= 64
    uint64_t word = 0;
    for (size_t i = 0; i < kSpan; ++i) word = (word << 8) | hdr[ByteOff + i];
    word = (word & ~field_bits) | ((value & kMask) << kShift);
    for (size_t i = kSpan; i-- > 0;) {
      hdr[ByteOff + i] = static_cast<uint8_t>(word);
      word >>= 8;
    }
  }
};

// A whole-byte-aligned unsigned integer of N bytes, the common case.
template <size_t ByteOff, size_t Bytes>
using BeField = Field<ByteOff, 0, unsigned(Bytes * 8)>;

}  // namespace softverbs::wire
