// A subnet described by a topology file in the format ibnetdiscover prints
// and the IB simulator ibsim reads (issue 19): node records, each a header
// line `Switch|Hca|Ca <ports> "<name>"` followed by its connected ports
// `[<port>](<guid>)? "<remote name>"[<remote port>]...`, with the optional
// `switchguid=`/`caguid=`/`nodeguid=`/`sysimgguid=`/`vendid=`/`devid=` lines
// before a header, `#` comments, and `include <file>`; comments of the form
// `# softverbs: qos_ca_...` (qos_sw0_, qos_swe_, qos_) give the ports' QoS
// tables (mad/topology_qos.h).
//
// A plain value, constant after parsing: every process that names the same
// file derives the same nodes, ports, links and GUIDs, so the mutable part
// (LIDs, port states, forwarding tables: shm/subnet_state.h) can be shared
// by index.
//
// Invariants:
//  1. Links are symmetric: nodes[a].ports[p] names (b, q) iff
//     nodes[b].ports[q] names (a, p); a record may list a link from one end
//     only.
//  2. Port 0 is a switch's management port and is never linked; a CA's port
//     0 does not exist (ports[0] stays unlinked).
//  3. GUIDs are unique over nodes (and a CA's ports).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "shm/port_qos.h"

namespace softverbs::mad {

inline constexpr unsigned kTopoMaxNodes = 64;
inline constexpr unsigned kTopoMaxPorts = 64;  // per node (a switch's radix)

struct TopoLink {
  int node = -1;      // index of the node at the other end, -1: no link
  uint8_t port = 0;   // its port number
  uint8_t width = 2;  // IBA LinkWidthActive: 1 = 1x, 2 = 4x, 8 = 12x
};

struct TopoNode {
  enum class Type : uint8_t { kCa = 1, kSwitch = 2 };
  Type type = Type::kCa;
  std::string name;         // the record's quoted id
  uint8_t num_ports = 0;
  uint64_t node_guid = 0;   // host order
  uint64_t sys_guid = 0;
  uint32_t vendor_id = 0;
  uint16_t device_id = 0;
  std::vector<TopoLink> ports;  // indexed by port number, size num_ports + 1
  bool is_switch() const { return type == Type::kSwitch; }
  // A switch has one port GUID (its port 0's); a CA one per port.
  uint64_t port_guid(unsigned port) const { return is_switch() ? node_guid : node_guid + port; }
};

// The tables a set of ports boots with (mad/topology_qos.h: the file's
// "# softverbs: qos_*" lines); without them, shm::default_qos().
struct BootQos {
  bool given = false;
  shm::QosTables tables = shm::default_qos();
};

struct Topology {
  std::vector<TopoNode> nodes;
  BootQos ca_qos;   // every CA port (qos_ca_*)
  BootQos sw0_qos;  // every switch's port 0 (qos_sw0_*)
  BootQos swe_qos;  // every switch's ports 1..n (qos_swe_*)
  int find(std::string_view name) const;
  // The CA whose port 1 is the device's port: the first CA of the file
  // whose port 1 has a link (ibnetdiscover lists CAs in no set order), else
  // the first CA.
  int local_ca() const;
};

// A digest of everything the subnet state is indexed by (nodes, ports,
// links, GUIDs): two files that differ in it never share state.
uint64_t topology_hash(const Topology& t);

struct TopologyParse {
  Topology topology;
  std::string error;  // empty on success; else "line N: what"
  bool ok() const { return error.empty(); }
};

// Returns the text of an included file as the file names it (false:
// unreadable).
using IncludeReader = std::function<bool(const std::string& path, std::string* text)>;

TopologyParse parse_topology(std::string_view text, IncludeReader read_include = nullptr);
// Reads and parses the file at `path` (includes relative to its folder).
TopologyParse load_topology(const std::string& path);

}  // namespace softverbs::mad
