// The port's QoS tables from a file of opensm options, for a port that no SM
// programs: a RoCE port (Ethernet has no SMA) or softverbs0 without a
// topology (SOFTVERBS_QOS_CONFIG, verbs/port_config.h; issue 20).
//
// The file is opensm's own options file, or any part of it: one option per
// line, name then value, `#` comments. What a CA port gets follows opensm
// (osm_qos.c): each qos_ca_* option, else the qos_* option of the same name
// (opensm's defaults for every port type). `qos FALSE` gives no tables, as
// opensm then sends none. The switch and router sets (qos_sw0_*, qos_swe_*,
// qos_rtr_*), qos_policy_file and opensm's other options are skipped, so an
// opensm.conf may be given as it is; an unknown qos_ca_* or qos_* name, a
// value out of range and tables the port could not take (an SMA would
// answer a Set of them with 0x1C) are refused with the line and the reason.
//
// What the file leaves out keeps the port's boot value (shm::default_qos for
// the OperVLs it gives), as in a topology file's qos_ca_* comments
// (mad/topology_qos.h), not opensm's built-in defaults.
#pragma once

#include <string>
#include <string_view>

#include "shm/port_qos.h"

namespace softverbs::mad {

struct QosConfigParse {
  std::string error;            // non-empty: refused (line number and reason)
  bool gives_tables = false;    // false: `qos FALSE`; the port keeps its boot tables
  shm::QosTables tables;        // the CA port's tables when gives_tables
  bool ok() const { return error.empty(); }
};

QosConfigParse parse_qos_config(std::string_view text);
// Reads `path` and parses it; an unreadable file is an error.
QosConfigParse load_qos_config(const char* path);

// SOFTVERBS_QOS_CONFIG of this process, read once (thread-safe), its error
// logged once; nullptr when it is not set. Where a process attaches
// (ibv_get_device_list, libibumad) a refused file means no device.
const QosConfigParse* process_qos_config();
inline bool qos_config_refused() {
  const QosConfigParse* q = process_qos_config();
  return q != nullptr && !q->ok();
}

}  // namespace softverbs::mad
