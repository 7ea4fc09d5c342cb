#include "pattern.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>
#include <string>

namespace softverbs::integration {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t pattern_word(uint64_t seed, uint64_t word) {
  return splitmix64(seed * 0xD1B54A32D192ED03ull + word);
}

// Reports a mismatch summary; `want_at(i)` gives the expected byte at offset i.
template <typename WantAt>
bool compare_bytes(const uint8_t* got, size_t n, WantAt want_at, std::string_view what) {
  size_t bad = 0;
  size_t first = 0;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want_at(i)) {
      if (bad == 0) first = i;
      last = i;
      ++bad;
    }
  }
  if (bad == 0) return true;
  char line[256];
  std::snprintf(line, sizeof line,
                "%zu of %zu bytes differ; first at offset %zu (got 0x%02x, want 0x%02x), "
                "last at offset %zu (got 0x%02x, want 0x%02x)",
                bad, n, first, got[first], want_at(first), last, got[last], want_at(last));
  ADD_FAILURE() << what << ": " << line;
  return false;
}

}  // namespace

uint8_t pattern_byte(uint64_t seed, uint64_t index) {
  return static_cast<uint8_t>(pattern_word(seed, index >> 3) >> ((index & 7) * 8));
}

void fill_pattern(void* p, size_t n, uint64_t seed, uint64_t first_index) {
  auto* out = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) out[i] = pattern_byte(seed, first_index + i);
}

bool expect_pattern(const void* p, size_t n, uint64_t seed, std::string_view what,
                    uint64_t first_index) {
  return compare_bytes(
      static_cast<const uint8_t*>(p), n,
      [&](size_t i) { return pattern_byte(seed, first_index + i); }, what);
}

bool expect_fill(const void* p, size_t n, uint8_t value, std::string_view what) {
  return compare_bytes(
      static_cast<const uint8_t*>(p), n, [&](size_t) { return value; }, what);
}

bool expect_same(const void* got, const void* want, size_t n, std::string_view what) {
  const auto* w = static_cast<const uint8_t*>(want);
  return compare_bytes(
      static_cast<const uint8_t*>(got), n, [&](size_t i) { return w[i]; }, what);
}

std::vector<size_t> standard_sizes(uint64_t seed, int random_count) {
  std::vector<size_t> sizes = {0, 1, 4095, 4096, 4097, kMiB};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> dist(2, 200000);
  for (int i = 0; i < random_count; ++i) sizes.push_back(dist(rng));
  return sizes;
}

Layout make_layout(const std::vector<size_t>& sizes, size_t gap, size_t skew) {
  Layout l;
  size_t at = 0;
  for (size_t size : sizes) {
    at = round_up(at + gap, 64) + skew;
    l.offsets.push_back(at);
    at += size;
  }
  l.total = at + gap;
  return l;
}

bool expect_guard_outside(const void* base, size_t total, std::vector<Span> spans,
                          std::string_view what) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.offset < b.offset; });
  const auto* p = static_cast<const uint8_t*>(base);
  bool ok = true;
  size_t at = 0;
  for (const Span& s : spans) {
    if (s.offset > at) {
      ok = expect_fill(p + at, s.offset - at, kGuardByte,
                       std::string(what) + " guard bytes [" + std::to_string(at) + ", " +
                           std::to_string(s.offset) + ")") &&
           ok;
    }
    at = std::max(at, s.offset + s.len);
  }
  if (at < total) {
    ok = expect_fill(p + at, total - at, kGuardByte,
                     std::string(what) + " guard bytes [" + std::to_string(at) + ", " +
                         std::to_string(total) + ")") &&
         ok;
  }
  return ok;
}

}  // namespace softverbs::integration
