// The QoS tables a topology file gives its ports, for a subnet that has no
// SM to program them (issue 20). ibnetdiscover's format has no place for
// them, so they ride in comments that other readers of the file (ibsim,
// ibnetdiscover's own parsers) skip, one opensm option per line, with
// opensm's names and value syntax (docs/QOS.md):
//
//   # softverbs: qos_ca_max_vls 4
//   # softverbs: qos_ca_high_limit 2
//   # softverbs: qos_ca_vlarb_high 1:8
//   # softverbs: qos_ca_vlarb_low 0:1,2:3
//   # softverbs: qos_ca_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,15
//
// As in opensm, the prefix names the ports an option is for: qos_ca_ a
// CA's, qos_sw0_ a switch's port 0, qos_swe_ a switch's external ports, and
// qos_ (no set) opensm's defaults, which fill what a set leaves out
// (osm_qos.c, qos_build_config). What neither gives keeps the boot value
// for the set's OperVLs (SL n on VL n mod VLs, every VL once in the low
// list with weight 64), not opensm's built-in defaults. A VLArb list fills
// the table from its first entry; the entries after it are 0:0, as opensm
// sends them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shm/port_qos.h"
#include "shm/segment.h"

namespace softverbs::mad {

inline constexpr std::string_view kQosDirective = "softverbs:";

// The options as given, before they are combined into tables.
struct QosOptions {
  bool any = false;
  int max_vls = -1;     // qos_ca_max_vls, 1..15
  int high_limit = -1;  // qos_ca_high_limit, 0..255
  bool has_sl2vl = false, has_low = false, has_high = false;
  uint8_t sl2vl[16] = {};
  shm::VlArbEntry low[shm::kVlArbCap] = {};
  shm::VlArbEntry high[shm::kVlArbCap] = {};
};

// The option sets of a file, by opensm's prefixes.
enum class QosSet : uint8_t { kDefaults, kCa, kSwitchPort0, kSwitchExternal };
inline constexpr unsigned kQosSets = 4;
std::string_view qos_set_prefix(QosSet s);

struct QosFileOptions {
  QosOptions set[kQosSets];
  QosOptions& operator[](QosSet s) { return set[static_cast<unsigned>(s)]; }
  const QosOptions& operator[](QosSet s) const { return set[static_cast<unsigned>(s)]; }
};

// A directive's text after kQosDirective: the option goes to the set its
// name's prefix names. False with *error set when it does not parse (a
// router's qos_rtr_* included: the topology has no routers).
bool parse_qos_directive(std::string_view text, QosFileOptions* o, std::string* error);

// One directive's text after kQosDirective ("qos_ca_sl2vl 0,1,..."). False
// with *error set when it does not parse. `prefix` names the option set:
// opensm's CA set (qos_ca_), or its defaults for every set (qos_).
bool parse_qos_option(std::string_view text, QosOptions* o, std::string* error,
                      std::string_view prefix = "qos_ca_");

// `o`, with what it leaves out taken from `dflt`: opensm fills a qos_ca_*
// option that is not given from the qos_* one (osm_qos.c, qos_build_config).
QosOptions with_defaults(const QosOptions& o, const QosOptions& dflt);

// The tables the options make. False with *error set when the port could
// not take them (what the SMA would answer 0x1C to: a VL that is not
// operational in SL2VL or with a weight in VLArb); the error names the
// option by `prefix`.
bool qos_tables(const QosOptions& o, shm::QosTables* t, std::string* error, std::string_view prefix = "qos_ca_");

}  // namespace softverbs::mad
