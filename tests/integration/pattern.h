// pattern.h — deterministic byte patterns and byte-by-byte verification.
//
// Every transfer in the suites carries pattern data: byte i of a pattern with
// seed s is a hash of (s, i / 8), so a misplaced, repeated or short page shows
// up as a mismatch at a precise offset. Guard bytes (kGuardByte) around every
// destination catch writes outside the addressed range.
//
// Thread-safety: pure functions; the expect_* ones report through gtest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace softverbs::integration {

inline constexpr uint8_t kGuardByte = 0xA5;

uint8_t pattern_byte(uint64_t seed, uint64_t index);
// Writes pattern `seed` bytes [first_index, first_index + n) to p.
void fill_pattern(void* p, size_t n, uint64_t seed, uint64_t first_index = 0);

// Each compares all n bytes and reports (ADD_FAILURE) how many differ, the
// first and last differing offsets and their values; returns true on a match.
[[nodiscard]] bool expect_pattern(const void* p, size_t n, uint64_t seed, std::string_view what,
                                  uint64_t first_index = 0);
[[nodiscard]] bool expect_fill(const void* p, size_t n, uint8_t value, std::string_view what);
[[nodiscard]] bool expect_same(const void* got, const void* want, size_t n, std::string_view what);

// The message sizes every data-path suite covers: 0, 1, 4095, 4096, 4097,
// 1 MiB, then `random_count` sizes in [2, 200000] from a PRNG seeded with
// `seed` (fixed per test, so a failure reproduces).
std::vector<size_t> standard_sizes(uint64_t seed, int random_count = 3);

inline constexpr size_t kKiB = 1024;
inline constexpr size_t kMiB = 1024 * 1024;

// Rounds n up to a multiple of `align` (a power of two).
constexpr size_t round_up(size_t n, size_t align) { return (n + align - 1) & ~(align - 1); }

// Places `sizes` one after another in one buffer, each `gap` guard bytes after
// the previous one, and every start `skew` bytes past a 64-byte boundary (an
// odd skew exercises unaligned addresses).
struct Layout {
  std::vector<size_t> offsets;
  size_t total = 0;
};
Layout make_layout(const std::vector<size_t>& sizes, size_t gap = 64, size_t skew = 0);

// A byte range [offset, offset + len) of a buffer.
struct Span {
  size_t offset;
  size_t len;
};
// Every byte of base[0, total) outside all `spans` must still be kGuardByte.
[[nodiscard]] bool expect_guard_outside(const void* base, size_t total, std::vector<Span> spans,
                                        std::string_view what);

}  // namespace softverbs::integration
