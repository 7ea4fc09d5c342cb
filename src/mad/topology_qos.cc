#include "mad/topology_qos.h"

#include <cctype>
#include <cstdlib>
#include <string>
#include <utility>

#include "util/text.h"

namespace softverbs::mad {
namespace {

bool number(std::string_view s, unsigned max, unsigned* v) {
  s = trim(s);
  if (s.empty() || s.size() > 3) return false;
  unsigned n = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  if (n > max) return false;
  *v = n;
  return true;
}

// "VL:weight,VL:weight,..." into a table of kVlArbCap entries.
bool vlarb_list(std::string_view s, shm::VlArbEntry* table, std::string* error) {
  unsigned i = 0;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    const std::string_view entry = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    const size_t colon = entry.find(':');
    unsigned vl = 0, weight = 0;
    if (colon == std::string_view::npos || !number(entry.substr(0, colon), 14, &vl) ||
        !number(entry.substr(colon + 1), 255, &weight)) {
      *error = "a VLArb entry is VL:weight (VL 0-14, weight 0-255), not \"" + std::string(entry) + "\"";
      return false;
    }
    if (i >= shm::kVlArbCap) {
      *error = "more than " + std::to_string(shm::kVlArbCap) + " VLArb entries (the port's VLArbHighCap/LowCap)";
      return false;
    }
    table[i++] = {static_cast<uint8_t>(vl), static_cast<uint8_t>(weight)};
  }
  return true;
}

bool fail(std::string* error, std::string what) {
  *error = std::move(what);
  return false;
}

}  // namespace

bool parse_qos_option(std::string_view text, QosOptions* o, std::string* error, std::string_view prefix) {
  text = trim(text);
  const size_t space = text.find_first_of(" \t");
  const std::string_view name = text.substr(0, space);
  const std::string_view value = space == std::string_view::npos ? std::string_view{} : trim(text.substr(space));
  const std::string_view field = name.starts_with(prefix) ? name.substr(prefix.size()) : std::string_view{};
  const std::string n_str(name);
  unsigned n = 0;
  if (field == "max_vls") {
    if (!number(value, 15, &n) || n == 0) return fail(error, n_str + " is 1 to 15");
    o->max_vls = static_cast<int>(n);
  } else if (field == "high_limit") {
    if (!number(value, 255, &n)) return fail(error, n_str + " is 0 to 255");
    o->high_limit = static_cast<int>(n);
  } else if (field == "sl2vl") {
    std::string_view s = value;
    unsigned sl = 0;
    for (; sl < 16 && !s.empty(); ++sl) {
      const size_t comma = s.find(',');
      if (!number(s.substr(0, comma), 15, &n)) break;
      o->sl2vl[sl] = static_cast<uint8_t>(n);
      s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    }
    if (sl != 16 || !s.empty()) return fail(error, n_str + " is 16 VLs (0-15), SL0's first");
    o->has_sl2vl = true;
  } else if (field == "vlarb_low" || field == "vlarb_high") {
    const bool low = field == "vlarb_low";
    shm::VlArbEntry* table = low ? o->low : o->high;
    for (unsigned i = 0; i < shm::kVlArbCap; ++i) table[i] = {};
    std::string what;
    if (!vlarb_list(value, table, &what)) return fail(error, n_str + ": " + what);
    (low ? o->has_low : o->has_high) = true;
  } else {
    const std::string p(prefix);
    return fail(error, "unknown QoS option \"" + n_str + "\" (" + p + "max_vls, " + p + "high_limit, " + p +
                           "vlarb_high, " + p + "vlarb_low, " + p + "sl2vl)");
  }
  o->any = true;
  return true;
}

std::string_view qos_set_prefix(QosSet s) {
  switch (s) {
    case QosSet::kCa: return "qos_ca_";
    case QosSet::kSwitchPort0: return "qos_sw0_";
    case QosSet::kSwitchExternal: return "qos_swe_";
    case QosSet::kDefaults: break;
  }
  return "qos_";
}

bool parse_qos_directive(std::string_view text, QosFileOptions* o, std::string* error) {
  text = trim(text);
  // The sets' prefixes all start with the defaults' one, so they are tried first.
  for (QosSet s : {QosSet::kCa, QosSet::kSwitchPort0, QosSet::kSwitchExternal})
    if (text.starts_with(qos_set_prefix(s))) return parse_qos_option(text, &(*o)[s], error, qos_set_prefix(s));
  return parse_qos_option(text, &(*o)[QosSet::kDefaults], error, "qos_");
}

QosOptions with_defaults(const QosOptions& o, const QosOptions& dflt) {
  QosOptions r = o;
  r.any = o.any || dflt.any;
  if (r.max_vls < 0) r.max_vls = dflt.max_vls;
  if (r.high_limit < 0) r.high_limit = dflt.high_limit;
  if (!r.has_sl2vl && dflt.has_sl2vl) {
    r.has_sl2vl = true;
    for (unsigned sl = 0; sl < 16; ++sl) r.sl2vl[sl] = dflt.sl2vl[sl];
  }
  if (!r.has_low && dflt.has_low) {
    r.has_low = true;
    for (unsigned i = 0; i < shm::kVlArbCap; ++i) r.low[i] = dflt.low[i];
  }
  if (!r.has_high && dflt.has_high) {
    r.has_high = true;
    for (unsigned i = 0; i < shm::kVlArbCap; ++i) r.high[i] = dflt.high[i];
  }
  return r;
}

bool qos_tables(const QosOptions& o, shm::QosTables* t, std::string* error, std::string_view prefix) {
  *t = shm::default_qos();
  if (o.max_vls > 0) {
    // The largest OperationalVLs encoding with no more VLs than asked for,
    // up to VLCap (IBA 14.2.5.6).
    uint8_t enc = 1;
    while (enc < shm::kVlCap && shm::data_vls(static_cast<uint8_t>(enc + 1)) <= static_cast<unsigned>(o.max_vls))
      ++enc;
    t->oper_vls = enc;
    const unsigned vls = shm::data_vls(enc);
    for (unsigned sl = 0; sl < 16; ++sl) t->sl_to_vl[sl] = static_cast<uint8_t>(sl % vls);
    for (unsigned i = 0; i < shm::kVlArbCap; ++i) t->low[i] = i < vls ? shm::VlArbEntry{static_cast<uint8_t>(i), 64} : shm::VlArbEntry{};
  }
  if (o.high_limit >= 0) t->vl_high_limit = static_cast<uint8_t>(o.high_limit);
  if (o.has_sl2vl)
    for (unsigned sl = 0; sl < 16; ++sl) t->sl_to_vl[sl] = o.sl2vl[sl];
  if (o.has_low)
    for (unsigned i = 0; i < shm::kVlArbCap; ++i) t->low[i] = o.low[i];
  if (o.has_high)
    for (unsigned i = 0; i < shm::kVlArbCap; ++i) t->high[i] = o.high[i];
  // What the SMA refuses in a Set, the file may not ask for either.
  const unsigned vls = shm::data_vls(t->oper_vls);
  for (unsigned sl = 0; sl < 16; ++sl)
    if (t->sl_to_vl[sl] >= vls && t->sl_to_vl[sl] != shm::kVl15)
      return fail(error, std::string(prefix) + "sl2vl: SL" + std::to_string(sl) + " on VL" + std::to_string(t->sl_to_vl[sl]) +
                             ", which is not operational (VL0-" + std::to_string(vls - 1) + ")");
  for (const shm::VlArbEntry* table : {t->low, t->high})
    for (unsigned i = 0; i < shm::kVlArbCap; ++i)
      if (table[i].weight != 0 && table[i].vl >= vls)
        return fail(error, std::string(prefix) + "vlarb_" + std::string(table == t->low ? "low" : "high") + ": VL" +
                               std::to_string(table[i].vl) + " has a weight but is not operational (VL0-" +
                               std::to_string(vls - 1) + ")");
  return true;
}

}  // namespace softverbs::mad
