// FaultConfig: what a FaultInjector does to the datagrams that pass it, and
// its textual form, e.g.
//   loss=0.01,dup=0.01,reorder=0.02:8,corrupt=0.001,delay=50us,jitter=20us,seed=42
//
// Contract:
//   1. Rates are probabilities in [0,1], drawn independently per datagram.
//      Durations are non-negative, written with a unit: ns, us, ms or s.
//   2. reorder=P:W holds a datagram with probability P and releases it after
//      1..W later datagrams (uniform), or after `hold` at the latest, so a
//      held datagram never waits on traffic that does not come.
//   3. delay=D,jitter=J sends each datagram D + U(-J, +J) later, clamped at
//      zero; jitter alone therefore delays about half the datagrams.
//   4. parse_fault_config() accepts exactly the keys below, each at most
//      once, and names the offending item when it refuses a string. The empty
//      string is the inactive config.
//   5. Value type; parse and format allocate (control path only).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace softverbs::fabric::fault {

struct FaultConfig {
  double loss = 0;            // loss=P: the datagram is not sent
  double duplicate = 0;       // dup=P: it is sent twice
  double reorder = 0;         // reorder=P[:W]: see contract 2
  uint32_t reorder_window = 8;
  double corrupt = 0;         // corrupt=P: one uniformly chosen bit is flipped
  std::chrono::nanoseconds delay{0};   // delay=D
  std::chrono::nanoseconds jitter{0};  // jitter=J
  std::chrono::nanoseconds hold{std::chrono::milliseconds(1)};  // hold=D: reorder bound
  uint64_t seed = 1;          // seed=N: same seed, same input => same output
  uint32_t capacity = 256;    // capacity=N: datagrams held at once (delay + reorder)
  uint32_t max_datagram = 9216;  // max_datagram=N: bytes per held datagram

  // Whether the injector does anything at all (else it only forwards).
  [[nodiscard]] bool active() const {
    return loss > 0 || duplicate > 0 || reorder > 0 || corrupt > 0 || delay.count() > 0 ||
           jitter.count() > 0;
  }
};

struct FaultConfigParse {
  FaultConfig config;
  std::string error;  // empty on success, else a sentence naming the bad item

  [[nodiscard]] bool ok() const { return error.empty(); }
};

[[nodiscard]] FaultConfigParse parse_fault_config(std::string_view text);

// The textual form of `c`; parse_fault_config(format_fault_config(c)) gives c
// back (durations to the nanosecond, rates to 17 significant digits).
[[nodiscard]] std::string format_fault_config(const FaultConfig& c);

}  // namespace softverbs::fabric::fault
