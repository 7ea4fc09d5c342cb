#include "mad/qos_config_file.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "mad/topology_qos.h"
#include "util/log.h"
#include "util/text.h"

namespace softverbs::mad {
namespace {

// The option sets that are not a CA's, and opensm's QoS policy file (which
// names ports by GUID: an SM's business, not a port's boot tables).
bool other_port_type(std::string_view name) {
  for (std::string_view p : {"qos_sw0_", "qos_swe_", "qos_rtr_"})
    if (name.starts_with(p)) return true;
  return name == "qos_policy_file";
}

}  // namespace

QosConfigParse parse_qos_config(std::string_view text) {
  QosConfigParse r;
  QosOptions ca, dflt;
  bool qos = true;
  unsigned line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const std::string_view name = line.substr(0, line.find_first_of(" \t"));
    std::string error;
    bool ok = true;
    if (name == "qos") {
      // opensm's booleans are the words TRUE and FALSE.
      const std::string_view v = trim(line.substr(name.size()));
      if (v == "TRUE" || v == "FALSE") qos = v == "TRUE";
      else ok = false, error = "qos is TRUE or FALSE, not \"" + std::string(v) + "\"";
    } else if (name.starts_with("qos_ca_")) {
      ok = parse_qos_option(line, &ca, &error, "qos_ca_");
    } else if (name.starts_with("qos_") && !other_port_type(name)) {
      ok = parse_qos_option(line, &dflt, &error, "qos_");
    }
    if (!ok) {
      r.error = "line " + std::to_string(line_no) + ": " + error;
      return r;
    }
  }
  if (!qos) return r;
  std::string error;
  if (!qos_tables(with_defaults(ca, dflt), &r.tables, &error)) {
    r.error = error;
    return r;
  }
  r.gives_tables = true;
  return r;
}

QosConfigParse load_qos_config(const char* path) {
  std::ifstream in(path);
  if (!in) {
    QosConfigParse r;
    r.error = std::string("cannot read it: ") + std::strerror(errno);
    return r;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_qos_config(text.str());
}

const QosConfigParse* process_qos_config() {
  static const QosConfigParse* const parsed = []() -> const QosConfigParse* {
    const char* path = std::getenv("SOFTVERBS_QOS_CONFIG");
    if (path == nullptr || *path == '\0') return nullptr;
    auto* q = new QosConfigParse(load_qos_config(path));  // the process's, never freed
    if (!q->ok()) SV_LOG(kError, "SOFTVERBS_QOS_CONFIG %s: %s", path, q->error.c_str());
    return q;
  }();
  return parsed;
}

}  // namespace softverbs::mad
