#include "fabric/fault/fault_config.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <limits>

namespace softverbs::fabric::fault {
namespace {

// Bounds that keep a held datagram pool reasonable; a typo such as
// capacity=1000000000 should be refused, not allocate gigabytes.
constexpr uint32_t kMaxCapacity = 65536;
constexpr uint32_t kMaxDatagram = 65535;
constexpr uint32_t kMaxReorderWindow = 65536;

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// A whole string as a number of type T; from_chars is locale-independent,
// so "0.5" means one half whatever LC_NUMERIC says.
template <class T>
bool parse_number(std::string_view s, T* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

bool parse_probability(std::string_view s, double* out) {
  double v = 0;
  if (!parse_number(s, &v) || !(v >= 0.0 && v <= 1.0)) return false;  // rejects NaN too
  *out = v;
  return true;
}

bool parse_duration(std::string_view s, std::chrono::nanoseconds* out) {
  struct Unit {
    std::string_view suffix;
    uint64_t ns;
  };
  // "ns" and "us" before "s": a suffix match on "s" alone would take them.
  static constexpr Unit kUnits[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
  for (const Unit& u : kUnits) {
    if (!s.ends_with(u.suffix)) continue;
    uint64_t n = 0;
    if (!parse_number(s.substr(0, s.size() - u.suffix.size()), &n)) return false;
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / u.ns) return false;
    *out = std::chrono::nanoseconds(static_cast<int64_t>(n * u.ns));
    return true;
  }
  return false;
}

bool parse_bounded(std::string_view s, uint32_t lo, uint32_t hi, uint32_t* out) {
  uint32_t v = 0;
  if (!parse_number(s, &v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string format_duration(std::chrono::nanoseconds d) {
  const int64_t ns = d.count();
  const char* unit = "ns";
  int64_t n = ns;
  if (ns != 0 && ns % 1000000000 == 0) {
    n = ns / 1000000000, unit = "s";
  } else if (ns != 0 && ns % 1000000 == 0) {
    n = ns / 1000000, unit = "ms";
  } else if (ns % 1000 == 0) {
    n = ns / 1000, unit = "us";
  }
  return std::to_string(n) + unit;
}

std::string format_rate(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", p);
  return buf;
}

}  // namespace

FaultConfigParse parse_fault_config(std::string_view text) {
  FaultConfigParse r;
  FaultConfig& c = r.config;
  enum Key : unsigned {
    kLoss, kDup, kReorder, kCorrupt, kDelay, kJitter, kHold, kSeed, kCapacity, kMaxDg, kKeys
  };
  static constexpr std::string_view kNames[kKeys] = {
      "loss", "dup", "reorder", "corrupt", "delay", "jitter", "hold", "seed", "capacity",
      "max_datagram"};
  bool seen[kKeys] = {};

  auto fail = [&r](std::string msg) {
    r.config = FaultConfig{};
    r.error = "fault config: " + std::move(msg);
    return r;
  };

  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (comma + 1 == text.size()) return fail("trailing ',' after " + quoted(item));
    if (item.empty()) return fail("empty item (two ',' in a row?)");

    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return fail(quoted(item) + " is not key=value");
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);

    unsigned k = 0;
    while (k < kKeys && kNames[k] != key) ++k;
    if (k == kKeys)
      return fail("unknown key " + quoted(key) +
                  " (known: loss dup reorder corrupt delay jitter hold seed capacity "
                  "max_datagram)");
    if (seen[k]) return fail("key " + quoted(key) + " given twice");
    seen[k] = true;

    bool good = false;
    const char* want = "";
    switch (static_cast<Key>(k)) {
      case kLoss:
        good = parse_probability(value, &c.loss), want = "a probability in [0,1]";
        break;
      case kDup:
        good = parse_probability(value, &c.duplicate), want = "a probability in [0,1]";
        break;
      case kCorrupt:
        good = parse_probability(value, &c.corrupt), want = "a probability in [0,1]";
        break;
      case kReorder: {
        want = "P or P:W, P a probability in [0,1], W a window of 1..65536 datagrams";
        const size_t colon = value.find(':');
        good = parse_probability(value.substr(0, colon), &c.reorder) &&
               (colon == std::string_view::npos ||
                parse_bounded(value.substr(colon + 1), 1, kMaxReorderWindow, &c.reorder_window));
        break;
      }
      case kDelay:
        good = parse_duration(value, &c.delay), want = "a duration such as 50us (ns, us, ms, s)";
        break;
      case kJitter:
        good = parse_duration(value, &c.jitter), want = "a duration such as 20us (ns, us, ms, s)";
        break;
      case kHold:
        good = parse_duration(value, &c.hold) && c.hold.count() > 0,
        want = "a positive duration such as 1ms (ns, us, ms, s)";
        break;
      case kSeed:
        good = parse_number(value, &c.seed), want = "an unsigned 64-bit integer";
        break;
      case kCapacity:
        good = parse_bounded(value, 1, kMaxCapacity, &c.capacity), want = "an integer in 1..65536";
        break;
      case kMaxDg:
        good = parse_bounded(value, 1, kMaxDatagram, &c.max_datagram),
        want = "an integer in 1..65535";
        break;
      case kKeys:
        break;
    }
    if (!good) return fail(quoted(item) + ": " + std::string(key) + " must be " + want);
  }
  return r;
}

std::string format_fault_config(const FaultConfig& c) {
  std::string s;
  s += "loss=" + format_rate(c.loss);
  s += ",dup=" + format_rate(c.duplicate);
  s += ",reorder=" + format_rate(c.reorder) + ":" + std::to_string(c.reorder_window);
  s += ",corrupt=" + format_rate(c.corrupt);
  s += ",delay=" + format_duration(c.delay);
  s += ",jitter=" + format_duration(c.jitter);
  s += ",hold=" + format_duration(c.hold);
  s += ",seed=" + std::to_string(c.seed);
  s += ",capacity=" + std::to_string(c.capacity);
  s += ",max_datagram=" + std::to_string(c.max_datagram);
  return s;
}

}  // namespace softverbs::fabric::fault
