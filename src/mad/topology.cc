#include "mad/topology.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "mad/topology_qos.h"
#include "util/text.h"

namespace softverbs::mad {
namespace {

constexpr unsigned kMaxIncludeDepth = 8;
// Derived GUIDs: a fixed OUI-like prefix over a hash of the node's name, the
// low byte left for a CA's port numbers (port GUID = node GUID + port).
constexpr uint64_t kDerivedGuidPrefix = 0x0005ad0000000000ull;

uint64_t derived_guid(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return kDerivedGuidPrefix | ((h & 0xffffffffull) << 8);
}

// The line without its comment: a '#' outside a quoted name.
std::string_view strip_comment(std::string_view s) {
  bool quoted = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"') quoted = !quoted;
    else if (s[i] == '#' && !quoted) return s.substr(0, i);
  }
  return s;
}

bool parse_number(std::string_view s, uint64_t* v, int base = 0) {
  if (s.empty()) return false;
  std::string t(s);
  char* end = nullptr;
  errno = 0;
  *v = std::strtoull(t.c_str(), &end, base);
  return errno == 0 && end != t.c_str() && *end == '\0';
}

// A cursor over one line.
struct Cursor {
  std::string_view s;
  void skip_space() {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  }
  bool eat(char c) {
    skip_space();
    if (s.empty() || s.front() != c) return false;
    s.remove_prefix(1);
    return true;
  }
  // Up to (not including) `c`; false if `c` never comes.
  bool until(char c, std::string_view* out) {
    const size_t at = s.find(c);
    if (at == std::string_view::npos) return false;
    *out = s.substr(0, at);
    s.remove_prefix(at + 1);
    return true;
  }
  bool quoted(std::string_view* out) { return eat('"') && until('"', out) && !out->empty(); }
  bool bracketed_number(uint64_t* v) {
    std::string_view t;
    return eat('[') && until(']', &t) && parse_number(trim(t), v, 10);
  }
  // An optional "(guid)" right after a port number; its value is not needed
  // (a port's GUID follows from its node).
  bool optional_paren() {
    if (s.empty() || s.front() != '(') return true;
    std::string_view t;
    s.remove_prefix(1);
    return until(')', &t);
  }
  std::string_view word() {
    skip_space();
    size_t n = 0;
    while (n < s.size() && !std::isspace(static_cast<unsigned char>(s[n]))) ++n;
    std::string_view w = s.substr(0, n);
    s.remove_prefix(n);
    return w;
  }
};

struct PendingLink {
  int node;
  unsigned port;
  std::string remote;
  unsigned remote_port;
  uint8_t width;
  unsigned line;
};

struct Pending {  // the key=value lines that precede a node's header
  uint64_t node_guid = 0, sys_guid = 0, vendor_id = 0, device_id = 0;
};

// IBA LinkWidthActive for the widths ibnetdiscover and ibsim write.
bool width_code(uint64_t lanes, uint8_t* code) {
  switch (lanes) {
    case 1: *code = 1; return true;
    case 4: *code = 2; return true;
    case 8: *code = 4; return true;
    case 12: *code = 8; return true;
    case 2: *code = 16; return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(const IncludeReader& reader) : reader_(reader) {}

  bool text(std::string_view text, unsigned depth) {
    std::istringstream in{std::string(text)};
    std::string raw;
    unsigned line_no = 0;
    while (std::getline(in, raw)) {
      ++line_no;
      if (depth == 0) line_ = line_no;
      if (!qos_directive(trim(raw))) return false;
      if (!line(trim(strip_comment(raw)), depth)) return false;
    }
    current_ = -1;
    return true;
  }

  bool finish() {
    for (const PendingLink& l : links_) {
      line_ = l.line;
      const int r = topo_.find(l.remote);
      if (r < 0) return fail("link to unknown node \"" + l.remote + "\"");
      TopoNode& a = topo_.nodes[static_cast<size_t>(l.node)];
      TopoNode& b = topo_.nodes[static_cast<size_t>(r)];
      if (l.remote_port == 0 || l.remote_port > b.num_ports)
        return fail("\"" + b.name + "\" has no port " + std::to_string(l.remote_port));
      if (l.node == r && l.port == l.remote_port) return fail("a port linked to itself");
      TopoLink& pa = a.ports[l.port];
      TopoLink& pb = b.ports[l.remote_port];
      const bool same = pa.node == r && pa.port == l.remote_port && pb.node == l.node && pb.port == l.port;
      if (!same && (pa.node >= 0 || pb.node >= 0))
        return fail("port " + std::to_string(l.port) + " of \"" + a.name + "\" or port " +
                    std::to_string(l.remote_port) + " of \"" + b.name + "\" is already linked elsewhere");
      pa = {r, static_cast<uint8_t>(l.remote_port), l.width};
      pb = {l.node, static_cast<uint8_t>(l.port), l.width};
    }
    line_ = 0;
    // Each set's options, what they leave out from the qos_* defaults, as
    // opensm builds them.
    for (auto [set, boot] : {std::pair{QosSet::kCa, &topo_.ca_qos}, std::pair{QosSet::kSwitchPort0, &topo_.sw0_qos},
                             std::pair{QosSet::kSwitchExternal, &topo_.swe_qos}}) {
      const QosOptions o = with_defaults(qos_[set], qos_[QosSet::kDefaults]);
      if (!o.any) continue;
      std::string what;
      if (!qos_tables(o, &boot->tables, &what, qos_set_prefix(set))) return fail(what);
      boot->given = true;
    }
    if (topo_.nodes.empty()) return fail("no nodes");
    if (topo_.local_ca() < 0) return fail("no CA (the device's port is a CA's port 1)");
    for (size_t i = 0; i < topo_.nodes.size(); ++i) {
      const TopoNode& n = topo_.nodes[i];
      for (size_t j = 0; j < i; ++j) {
        const TopoNode& m = topo_.nodes[j];
        const uint64_t n_hi = n.node_guid + (n.is_switch() ? 0 : n.num_ports);
        const uint64_t m_hi = m.node_guid + (m.is_switch() ? 0 : m.num_ports);
        if (n.node_guid <= m_hi && m.node_guid <= n_hi)
          return fail("\"" + n.name + "\" and \"" + m.name + "\" share a GUID");
      }
    }
    return true;
  }

  Topology& topology() { return topo_; }
  std::string error() const { return error_; }

 private:
  bool fail(const std::string& what) {
    error_ = line_ != 0 ? "line " + std::to_string(line_) + ": " + what : what;
    return false;
  }

  // "# softverbs: qos_..." (mad/topology_qos.h); any other comment is only
  // a comment.
  bool qos_directive(std::string_view l) {
    if (l.empty() || l.front() != '#') return true;
    l = trim(l.substr(1));
    if (l.substr(0, kQosDirective.size()) != kQosDirective) return true;
    std::string what;
    return parse_qos_directive(l.substr(kQosDirective.size()), &qos_, &what) || fail(what);
  }

  bool line(std::string_view l, unsigned depth) {
    if (l.empty()) {
      current_ = -1;  // a blank line ends a record
      return true;
    }
    if (l.front() == '[') return port_line(l);
    Cursor c{l};
    const std::string_view first = c.word();
    if (first == "include") {
      if (depth >= kMaxIncludeDepth) return fail("includes nested too deep");
      const std::string path(trim(c.s));
      std::string text;
      if (!reader_ || !reader_(path, &text)) return fail("cannot read included file \"" + path + "\"");
      return text.empty() || this->text(text, depth + 1);
    }
    if (first == "do") return fail("ibsim console commands ('do') are not supported");
    if (first == "Switch" || first == "Hca" || first == "Ca") return header(first == "Switch", c);
    if (first == "Rt") return fail("routers are not supported");
    const size_t eq = first.find('=');
    if (eq != std::string_view::npos) return key_value(first.substr(0, eq), trim(l.substr(eq + 1)));
    return fail("cannot parse \"" + std::string(l) + "\"");
  }

  bool key_value(std::string_view key, std::string_view value) {
    // ibnetdiscover writes "switchguid=0x...(0x...)": the part before '('.
    value = value.substr(0, value.find('('));
    uint64_t v;
    if (!parse_number(trim(value), &v, 0)) return fail("bad value for " + std::string(key));
    if (key == "switchguid" || key == "caguid" || key == "nodeguid") pending_.node_guid = v;
    else if (key == "sysimgguid") pending_.sys_guid = v;
    else if (key == "vendid") pending_.vendor_id = v;
    else if (key == "devid") pending_.device_id = v;
    // Anything else (a newer ibnetdiscover's extra keys) describes nothing we model.
    return true;
  }

  bool header(bool is_switch, Cursor& c) {
    uint64_t ports;
    if (!parse_number(c.word(), &ports, 10) || ports == 0 || ports >= kTopoMaxPorts)
      return fail("a node has 1 to " + std::to_string(kTopoMaxPorts - 1) + " ports");
    std::string_view name;
    if (!c.quoted(&name)) return fail("a node header ends in its \"name\"");
    if (topo_.find(name) >= 0) return fail("node \"" + std::string(name) + "\" defined twice");
    if (topo_.nodes.size() >= kTopoMaxNodes) return fail("more than " + std::to_string(kTopoMaxNodes) + " nodes");
    TopoNode n;
    n.type = is_switch ? TopoNode::Type::kSwitch : TopoNode::Type::kCa;
    n.name = std::string(name);
    n.num_ports = static_cast<uint8_t>(ports);
    n.node_guid = pending_.node_guid != 0 ? pending_.node_guid : derived_guid(name);
    n.sys_guid = pending_.sys_guid != 0 ? pending_.sys_guid : n.node_guid;
    n.vendor_id = static_cast<uint32_t>(pending_.vendor_id & 0xffffff);
    n.device_id = static_cast<uint16_t>(pending_.device_id);
    n.ports.resize(ports + 1);
    pending_ = {};
    topo_.nodes.push_back(std::move(n));
    current_ = static_cast<int>(topo_.nodes.size() - 1);
    return true;
  }

  bool port_line(std::string_view l) {
    if (current_ < 0) return fail("a port line outside a node record");
    const TopoNode& n = topo_.nodes[static_cast<size_t>(current_)];
    Cursor c{l};
    uint64_t port, remote_port;
    std::string_view remote;
    if (!c.bracketed_number(&port) || !c.optional_paren() || !c.quoted(&remote) ||
        !c.bracketed_number(&remote_port) || !c.optional_paren())
      return fail("a port line is [port] \"remote\"[port]");
    if (port == 0 || port > n.num_ports) return fail("\"" + n.name + "\" has no port " + std::to_string(port));
    uint8_t width = 2;
    for (std::string_view w = c.word(); !w.empty(); w = c.word()) {
      uint64_t lanes;
      if (w.substr(0, 2) == "w=" && !(parse_number(w.substr(2), &lanes, 10) && width_code(lanes, &width)))
        return fail("bad link width " + std::string(w));
      // Anything else (s=, ibnetdiscover's "lid 2 4xSDR" once its '#' is gone) is ignored.
    }
    links_.push_back({current_, static_cast<unsigned>(port), std::string(remote),
                      static_cast<unsigned>(remote_port), width, line_});
    return true;
  }

  const IncludeReader& reader_;
  Topology topo_;
  std::vector<PendingLink> links_;
  Pending pending_;
  QosFileOptions qos_;
  int current_ = -1;
  unsigned line_ = 0;
  std::string error_;
};

bool read_file(const std::string& path, std::string* text) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  *text = s.str();
  return true;
}

}  // namespace

uint64_t topology_hash(const Topology& t) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the fields, in order
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  };
  for (const TopoNode& n : t.nodes) {
    for (char c : n.name) mix(static_cast<uint8_t>(c));
    mix(static_cast<uint64_t>(n.type) << 8 | n.num_ports);
    mix(n.node_guid);
    for (const TopoLink& l : n.ports) mix(static_cast<uint64_t>(l.node + 1) << 16 | l.port << 8 | l.width);
  }
  // The ports' boot tables are part of the state's first values.
  uint64_t set = 0;
  for (const BootQos* b : {&t.ca_qos, &t.sw0_qos, &t.swe_qos}) {
    ++set;
    if (!b->given) continue;
    const shm::QosTables& q = b->tables;
    mix(set << 16 | static_cast<uint64_t>(q.oper_vls) << 8 | q.vl_high_limit);
    for (uint8_t vl : q.sl_to_vl) mix(vl);
    for (unsigned i = 0; i < shm::kVlArbCap; ++i)
      mix(static_cast<uint64_t>(q.low[i].vl) << 24 | q.low[i].weight << 16 | q.high[i].vl << 8 | q.high[i].weight);
  }
  return h;
}

int Topology::find(std::string_view name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

int Topology::local_ca() const {
  int first = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].is_switch()) continue;
    if (nodes[i].ports[1].node >= 0) return static_cast<int>(i);
    if (first < 0) first = static_cast<int>(i);
  }
  return first;
}

TopologyParse parse_topology(std::string_view text, IncludeReader read_include) {
  Parser p(read_include);
  TopologyParse r;
  if (!p.text(text, 0) || !p.finish()) {
    r.error = p.error();
    return r;
  }
  r.topology = std::move(p.topology());
  return r;
}

TopologyParse load_topology(const std::string& path) {
  std::string text;
  if (!read_file(path, &text)) {
    TopologyParse r;
    r.error = "cannot read " + path;
    return r;
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  return parse_topology(text, [dir](const std::string& p, std::string* t) {
    return read_file(p.empty() || p[0] == '/' ? p : dir + p, t);
  });
}

}  // namespace softverbs::mad
