// Static-rate conversions: enum ibv_rate <-> multiples of 2.5 Gb/s <-> Mb/s.
//
// One row per rate is the single source of truth for all four functions.
// The Mb/s figures are the exact signalling-adjusted values rdma-core 44.0
// reports (e.g. FDR 14 Gb/s is 14062 Mb/s), because programs such as
// perftest compare them. Rates that are not a whole multiple of 2.5 Gb/s
// (the FDR/EDR/HDR single-lane speeds) have no multiplier.
#include <infiniband/verbs.h>

#include <array>

// Entry points leave the library; the build hides everything else.
#define SV_PUBLIC __attribute__((visibility("default")))

namespace softverbs::abi {
namespace {

struct RateRow {
  ibv_rate rate;
  int mult;  // multiple of 2.5 Gb/s, or 0 when the rate is not one
  int mbps;
};

// clang-format off
constexpr std::array<RateRow, 23> kRates{{
    {IBV_RATE_2_5_GBPS, 1, 2500},
    {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},
    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},
    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},
    {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},
    {IBV_RATE_25_GBPS, 0, 25781},
    {IBV_RATE_100_GBPS, 0, 103125},
    {IBV_RATE_200_GBPS, 0, 206250},
    {IBV_RATE_300_GBPS, 0, 309375},
    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},
    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
    {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
}};
// clang-format on

// Every enum value except IBV_RATE_MAX has exactly one row, and no two rows
// share a multiplier or a Mb/s figure (so the reverse lookups are functions).
constexpr bool rows_are_consistent() {
  for (size_t i = 0; i < kRates.size(); ++i) {
    if (kRates[i].rate == IBV_RATE_MAX || kRates[i].mbps <= 0) return false;
    for (size_t j = i + 1; j < kRates.size(); ++j) {
      if (kRates[i].rate == kRates[j].rate || kRates[i].mbps == kRates[j].mbps) return false;
      if (kRates[i].mult != 0 && kRates[i].mult == kRates[j].mult) return false;
    }
  }
  return true;
}
static_assert(rows_are_consistent());
static_assert(kRates.size() == IBV_RATE_1200_GBPS - 1, "one row per enum ibv_rate value but MAX");

constexpr const RateRow* find_rate(ibv_rate rate) {
  for (const RateRow& r : kRates)
    if (r.rate == rate) return &r;
  return nullptr;
}

}  // namespace
}  // namespace softverbs::abi

using softverbs::abi::find_rate;
using softverbs::abi::kRates;
using softverbs::abi::RateRow;

extern "C" {

// Returns -1 for a rate with no 2.5 Gb/s multiple (and for IBV_RATE_MAX).
SV_PUBLIC int ibv_rate_to_mult(enum ibv_rate rate) {
  const RateRow* r = find_rate(rate);
  return (r != nullptr && r->mult != 0) ? r->mult : -1;
}

SV_PUBLIC enum ibv_rate mult_to_ibv_rate(int mult) {
  if (mult <= 0) return IBV_RATE_MAX;
  for (const RateRow& r : kRates)
    if (r.mult == mult) return r.rate;
  return IBV_RATE_MAX;
}

SV_PUBLIC int ibv_rate_to_mbps(enum ibv_rate rate) {
  const RateRow* r = find_rate(rate);
  return r != nullptr ? r->mbps : -1;
}

SV_PUBLIC enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

}  // extern "C"
