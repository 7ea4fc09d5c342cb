#include "mad/topology.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

namespace softverbs::mad {
namespace {

// Two switches joined by two links, four CAs, links listed from one end or
// both, in ibsim's layout.
constexpr char kTwoSwitches[] = R"(# a comment
Switch	8 "sw-a"
[1]	"ca-1"[1]
[2]	"ca-2"[1]	w=1
[7]	"sw-b"[7]
[8]	"sw-b"[8]

Switch 8 "sw-b"	# trailing comment
[1]	"ca-3"[1]
[2]	"ca-4"[2]
[7]	"sw-a"[7]

Hca	2 "ca-1"
[1]	"sw-a"[1]

Hca	1 "ca-2"

Hca	1 "ca-3"
Hca	2 "ca-4"
)";

TEST(Topology, ParsesNodesPortsAndSymmetricLinks) {
  TopologyParse p = parse_topology(kTwoSwitches);
  ASSERT_TRUE(p.ok()) << p.error;
  const Topology& t = p.topology;
  ASSERT_EQ(t.nodes.size(), 6u);
  const int a = t.find("sw-a"), b = t.find("sw-b"), c4 = t.find("ca-4"), c2 = t.find("ca-2");
  EXPECT_TRUE(t.nodes[a].is_switch());
  EXPECT_EQ(t.nodes[a].num_ports, 8);
  EXPECT_EQ(t.nodes[a].ports.size(), 9u);
  EXPECT_EQ(t.nodes[a].ports[8].node, b);  // listed from sw-a only
  EXPECT_EQ(t.nodes[b].ports[8].node, a);
  EXPECT_EQ(t.nodes[b].ports[8].port, 8);
  EXPECT_EQ(t.nodes[c4].ports[2].node, b);  // listed from sw-b only
  EXPECT_EQ(t.nodes[c4].ports[1].node, -1);
  EXPECT_EQ(t.nodes[c2].ports[1].width, 1);  // w=1: 1x
  EXPECT_EQ(t.nodes[a].ports[1].width, 2);   // default 4x
  EXPECT_EQ(t.nodes[a].ports[0].node, -1);   // port 0 is never linked
  EXPECT_EQ(t.local_ca(), t.find("ca-1"));
  // The device's CA is the first whose port 1 has a link.
  EXPECT_EQ(parse_topology("Switch 2 \"s\"\n[2] \"b\"[1]\n\nHca 2 \"a\"\n[2] \"s\"[1]\nHca 1 \"b\"\n").topology.local_ca(), 2);
  EXPECT_EQ(parse_topology("Hca 2 \"a\"\nHca 1 \"b\"\n").topology.local_ca(), 0);
  // Derived GUIDs are stable and unique; a CA's port GUIDs follow its node GUID.
  std::map<uint64_t, int> seen;
  for (const TopoNode& n : t.nodes) EXPECT_TRUE(seen.emplace(n.node_guid, 0).second) << n.name;
  EXPECT_EQ(t.nodes[c4].port_guid(2), t.nodes[c4].node_guid + 2);
  EXPECT_EQ(t.nodes[a].port_guid(3), t.nodes[a].node_guid);
  EXPECT_EQ(parse_topology(kTwoSwitches).topology.nodes[a].node_guid, t.nodes[a].node_guid);
}

// ibnetdiscover's own output: GUID lines before each header, port GUIDs in
// parentheses, comments after the links.
TEST(Topology, ReadsIbnetdiscoverOutput) {
  constexpr char kDiscovered[] = R"(#
# Topology file: generated on Mon Dec  7 04:00:00 2026
vendid=0x2c9
devid=0xb924
sysimgguid=0x8f10400411a08
switchguid=0x8f10400411a08(8f10400411a08)
Switch	24 "S-0008f10400411a08"		# "ISR9024 Voltaire" base port 0 lid 6 lmc 0
[1]	"H-0008f10403960558"[1](8f10403960559) 		# "mthca0" lid 2 4xSDR

vendid=0x2c9
devid=0x5a44
sysimgguid=0x8f10403960558
caguid=0x8f10403960558
Ca	2 "H-0008f10403960558"		# "mthca0"
[1](8f10403960559) 	"S-0008f10400411a08"[1]		# lid 2 lmc 0 "ISR9024 Voltaire" lid 6 4xSDR
)";
  TopologyParse p = parse_topology(kDiscovered);
  ASSERT_TRUE(p.ok()) << p.error;
  const TopoNode& sw = p.topology.nodes[0];
  const TopoNode& ca = p.topology.nodes[1];
  EXPECT_EQ(sw.node_guid, 0x8f10400411a08ull);
  EXPECT_EQ(sw.num_ports, 24);
  EXPECT_EQ(sw.vendor_id, 0x2c9u);
  EXPECT_EQ(sw.device_id, 0xb924);
  EXPECT_EQ(ca.node_guid, 0x8f10403960558ull);
  EXPECT_EQ(ca.port_guid(1), 0x8f10403960559ull);
  EXPECT_EQ(ca.ports[1].node, 0);
  EXPECT_EQ(sw.ports[1].node, 1);
}

TEST(Topology, IncludesAnotherFile) {
  auto reader = [](const std::string& path, std::string* text) {
    if (path != "cas.net") return false;
    *text = "Hca 1 \"h\"\n[1] \"s\"[2]\n";
    return true;
  };
  TopologyParse p = parse_topology("Switch 4 \"s\"\n\ninclude cas.net\n", reader);
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(p.topology.nodes[0].ports[2].node, 1);
  EXPECT_FALSE(parse_topology("include missing.net\n", reader).ok());
}

TEST(Topology, RejectsBadFilesWithTheLine) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"Switch 8 \"s\"\n[9] \"h\"[1]\nHca 1 \"h\"\n", "line 2: \"s\" has no port 9"},
      {"Switch 8 \"s\"\n[1] \"h\"[2]\n\nHca 1 \"h\"\n", "line 2: \"h\" has no port 2"},
      {"Switch 8 \"s\"\n[1] \"nobody\"[1]\n\nHca 1 \"h\"\n", "line 2: link to unknown node \"nobody\""},
      {"Hca 1 \"h\"\nHca 1 \"h\"\n", "line 2: node \"h\" defined twice"},
      {"Switch 8 \"s\"\n[1] \"h\"[1]\n[2] \"h\"[1]\nHca 1 \"h\"\n", "is already linked elsewhere"},
      {"Switch 0 \"s\"\n", "line 1: a node has 1 to 63 ports"},
      {"Switch 8 s\n", "line 1: a node header ends in its \"name\""},
      {"[1] \"h\"[1]\n", "line 1: a port line outside a node record"},
      {"Switch 8 \"s\"\n[1 \"h\"[1]\n", "line 2: a port line is [port] \"remote\"[port]"},
      {"Switch 8 \"s\"\n[1] \"h\"[1] w=3\nHca 1 \"h\"\n", "line 2: bad link width w=3"},
      {"Switch 8 \"s\"\n", "no CA"},
      {"", "no nodes"},
      {"do stop\n", "not supported"},
      {"Rt 2 \"r\"\n", "routers are not supported"},
      {"caguid=0x1\nHca 2 \"a\"\ncaguid=0x2\nHca 2 \"b\"\n", "share a GUID"},
      {"what is this\n", "line 1: cannot parse"},
  };
  for (const Case& c : cases) {
    TopologyParse p = parse_topology(c.text);
    EXPECT_FALSE(p.ok()) << c.text;
    EXPECT_NE(p.error.find(c.error), std::string::npos) << c.text << " gave: " << p.error;
  }
}

// ibsim's own example nets (Debian's ibsim-utils) load as they are.
TEST(Topology, LoadsIbsimExamples) {
  const std::string dir = "/usr/share/doc/ibsim-utils/net-examples/";
  if (!load_topology(dir + "net").ok() && access((dir + "net").c_str(), R_OK) != 0)
    GTEST_SKIP() << "ibsim-utils is not installed";
  for (const char* name : {"net", "net.1", "net.2sw2path", "net.2sw2path4hca", "net.2sw2path4hca2port"}) {
    TopologyParse p = load_topology(dir + name);
    EXPECT_TRUE(p.ok()) << name << ": " << p.error;
  }
  TopologyParse p = load_topology(dir + "net.2sw2path4hca");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.topology.nodes.size(), 6u);
  EXPECT_EQ(p.topology.nodes[static_cast<size_t>(p.topology.find("Switch1"))].ports[5].node, p.topology.find("Switch2"));
}

TEST(Topology, LoadReportsAMissingFile) {
  TopologyParse p = load_topology("/nonexistent/topology.net");
  EXPECT_FALSE(p.ok());
  EXPECT_NE(p.error.find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace softverbs::mad
