#include "mad/topology_qos.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "mad/subnet_boot_qos.h"
#include "mad/topology.h"
#include "shm/subnet_state.h"

namespace softverbs::mad {
namespace {

constexpr char kNet[] = R"(Hca 1 "h"
[1] "s"[1]
Switch 8 "s"
)";

TEST(TopologyQos, OpensmOptionsMakeTheTables) {
  const std::string text = std::string(R"(# softverbs: qos_ca_max_vls 4
#softverbs:   qos_ca_high_limit 2
# softverbs: qos_ca_vlarb_high 1:8,0:0
# softverbs: qos_ca_vlarb_low 0:1,2:3
# softverbs: qos_ca_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,15
# softverbs is mentioned in an ordinary comment
)") + kNet;
  TopologyParse p = parse_topology(text);
  ASSERT_TRUE(p.ok()) << p.error;
  ASSERT_TRUE(p.topology.ca_qos.given);
  const shm::QosTables& t = p.topology.ca_qos.tables;
  EXPECT_EQ(t.oper_vls, 3);  // VL0-3
  EXPECT_EQ(t.vl_high_limit, 2);
  const uint8_t sl2vl[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 15};
  for (unsigned sl = 0; sl < 16; ++sl) EXPECT_EQ(t.sl_to_vl[sl], sl2vl[sl]) << sl;
  EXPECT_EQ(t.low[0], (shm::VlArbEntry{0, 1}));
  EXPECT_EQ(t.low[1], (shm::VlArbEntry{2, 3}));
  EXPECT_EQ(t.low[2], (shm::VlArbEntry{}));
  EXPECT_EQ(t.high[0], (shm::VlArbEntry{1, 8}));
  EXPECT_EQ(t.high[1], (shm::VlArbEntry{}));
  // The tables are part of the subnet state's digest.
  EXPECT_NE(topology_hash(p.topology), topology_hash(parse_topology(kNet).topology));
}

TEST(TopologyQos, WithoutOptionsTheBootTables) {
  TopologyParse p = parse_topology(kNet);
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_FALSE(p.topology.ca_qos.given);
  EXPECT_EQ(p.topology.ca_qos.tables, shm::default_qos());
}

TEST(TopologyQos, FewerVlsRebuildTheBootTablesForThem) {
  QosOptions o;
  std::string error;
  ASSERT_TRUE(parse_qos_option("qos_ca_max_vls 3", &o, &error)) << error;  // VL0-1: the largest that fits
  shm::QosTables t;
  ASSERT_TRUE(qos_tables(o, &t, &error)) << error;
  EXPECT_EQ(t.oper_vls, 2);
  for (unsigned sl = 0; sl < 16; ++sl) EXPECT_EQ(t.sl_to_vl[sl], sl % 2);
  EXPECT_EQ(t.low[1], (shm::VlArbEntry{1, 64}));
  EXPECT_EQ(t.low[2], (shm::VlArbEntry{}));
  ASSERT_TRUE(parse_qos_option("qos_ca_max_vls 15", &o, &error));
  ASSERT_TRUE(qos_tables(o, &t, &error));
  EXPECT_EQ(t.oper_vls, shm::kVlCap);  // no more than VLCap
}

TEST(TopologyQos, RejectsWhatThePortCouldNotTake) {
  auto error_of = [](const std::string& lines) {
    TopologyParse p = parse_topology(lines + kNet);
    return p.error;
  };
  EXPECT_EQ(error_of("# softverbs: qos_ca_max_vls 0\n"), "line 1: qos_ca_max_vls is 1 to 15");
  EXPECT_EQ(error_of("# softverbs: qos_ca_high_limit 256\n"), "line 1: qos_ca_high_limit is 0 to 255");
  EXPECT_EQ(error_of("\n# softverbs: qos_ca_sl2vl 0,1\n"), "line 2: qos_ca_sl2vl is 16 VLs (0-15), SL0's first");
  EXPECT_EQ(error_of("# softverbs: qos_ca_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,15,0\n"),
            "line 1: qos_ca_sl2vl is 16 VLs (0-15), SL0's first");
  EXPECT_EQ(error_of("# softverbs: qos_ca_vlarb_low 0:1,2\n"),
            "line 1: qos_ca_vlarb_low: a VLArb entry is VL:weight (VL 0-14, weight 0-255), not \"2\"");
  EXPECT_EQ(error_of("# softverbs: qos_ca_vlarb_high 15:1\n"),
            "line 1: qos_ca_vlarb_high: a VLArb entry is VL:weight (VL 0-14, weight 0-255), not \"15:1\"");
  EXPECT_EQ(error_of("# softverbs: qos_ca_vlarb_low 0:1,1:1,2:1,3:1,4:1,5:1,6:1,7:1,0:1\n"),
            "line 1: qos_ca_vlarb_low: more than 8 VLArb entries (the port's VLArbHighCap/LowCap)");
  EXPECT_EQ(error_of("# softverbs: qos_sw0_sl2vl 0\n"), "line 1: qos_sw0_sl2vl is 16 VLs (0-15), SL0's first");
  EXPECT_EQ(error_of("\n\n# softverbs: qos_swe_max_vls 16\n"), "line 3: qos_swe_max_vls is 1 to 15");
  EXPECT_EQ(error_of("# softverbs: qos_swe_vlarb_low 0:256\n"),
            "line 1: qos_swe_vlarb_low: a VLArb entry is VL:weight (VL 0-14, weight 0-255), not \"0:256\"");
  EXPECT_EQ(error_of("# softverbs: qos_high_limit x\n"), "line 1: qos_high_limit is 0 to 255");
  // The topology has no routers, so their set names nothing.
  EXPECT_NE(error_of("# softverbs: qos_rtr_max_vls 2\n").find("unknown QoS option \"qos_rtr_max_vls\""),
            std::string::npos);
  EXPECT_NE(error_of("# softverbs: qos_swe_vl_arb 0:1\n").find("unknown QoS option \"qos_swe_vl_arb\""),
            std::string::npos);
  EXPECT_EQ(error_of("# softverbs: qos_swe_max_vls 2\n# softverbs: qos_swe_vlarb_high 2:1\n"),
            "qos_swe_vlarb_high: VL2 has a weight but is not operational (VL0-1)");
  EXPECT_EQ(error_of("# softverbs: qos_sw0_max_vls 1\n# softverbs: qos_sl2vl 0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n"),
            "qos_sw0_sl2vl: SL1 on VL1, which is not operational (VL0-0)");
  // Checked once the whole file is read: the order of the lines does not matter.
  EXPECT_EQ(error_of("# softverbs: qos_ca_vlarb_low 0:1,3:1\n# softverbs: qos_ca_max_vls 2\n"),
            "qos_ca_vlarb_low: VL3 has a weight but is not operational (VL0-1)");
  EXPECT_EQ(error_of("# softverbs: qos_ca_max_vls 2\n# softverbs: qos_ca_vlarb_low 0:1,3:0\n"), "");  // weight 0: skipped
  EXPECT_EQ(error_of("# softverbs: qos_ca_max_vls 1\n# softverbs: qos_ca_sl2vl 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1\n"),
            "qos_ca_sl2vl: SL15 on VL1, which is not operational (VL0-0)");
}

constexpr char kSwitchSets[] = R"(# softverbs: qos_sw0_max_vls 2
# softverbs: qos_sw0_sl2vl 0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1
# softverbs: qos_swe_max_vls 4
# softverbs: qos_swe_high_limit 5
# softverbs: qos_swe_vlarb_high 3:16
# softverbs: qos_swe_vlarb_low 0:2,1:2,2:4
# softverbs: qos_swe_sl2vl 3,2,1,0,3,2,1,0,3,2,1,0,3,2,1,15
)";

TEST(TopologyQos, SwitchSetsGiveTheSwitchesTables) {
  TopologyParse p = parse_topology(std::string(kSwitchSets) + kNet);
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_FALSE(p.topology.ca_qos.given);  // the CAs keep their boot tables
  ASSERT_TRUE(p.topology.sw0_qos.given);
  ASSERT_TRUE(p.topology.swe_qos.given);
  const shm::QosTables& sw0 = p.topology.sw0_qos.tables;
  EXPECT_EQ(sw0.oper_vls, 2);  // VL0-1
  EXPECT_EQ(sw0.sl_to_vl[1], 1);
  EXPECT_EQ(sw0.low[1], (shm::VlArbEntry{1, 64}));  // the boot list for two VLs
  EXPECT_EQ(sw0.low[2], (shm::VlArbEntry{}));
  const shm::QosTables& swe = p.topology.swe_qos.tables;
  EXPECT_EQ(swe.oper_vls, 3);
  EXPECT_EQ(swe.vl_high_limit, 5);
  EXPECT_EQ(swe.high[0], (shm::VlArbEntry{3, 16}));
  EXPECT_EQ(swe.low[2], (shm::VlArbEntry{2, 4}));
  EXPECT_EQ(swe.sl_to_vl[0], 3);
  EXPECT_EQ(swe.sl_to_vl[15], 15);
  // Each set is part of the subnet state's digest.
  const uint64_t both = topology_hash(p.topology);
  EXPECT_NE(both, topology_hash(parse_topology(kNet).topology));
  p.topology.sw0_qos.given = false;
  EXPECT_NE(both, topology_hash(p.topology));
}

// opensm fills what a set leaves out from the qos_* defaults (osm_qos.c,
// qos_build_config), for every set alike; a set's own option wins.
TEST(TopologyQos, DefaultsFillEverySet) {
  TopologyParse p = parse_topology(std::string(R"(# softverbs: qos_max_vls 2
# softverbs: qos_vlarb_low 0:7,1:9
# softverbs: qos_swe_vlarb_low 1:1
# softverbs: qos_ca_max_vls 4
)") + kNet);
  ASSERT_TRUE(p.ok()) << p.error;
  for (const BootQos* b : {&p.topology.ca_qos, &p.topology.sw0_qos, &p.topology.swe_qos}) ASSERT_TRUE(b->given);
  EXPECT_EQ(p.topology.ca_qos.tables.oper_vls, 3);
  EXPECT_EQ(p.topology.ca_qos.tables.low[0], (shm::VlArbEntry{0, 7}));
  EXPECT_EQ(p.topology.ca_qos.tables.sl_to_vl[3], 3);  // the boot SL2VL for VL0-3
  EXPECT_EQ(p.topology.sw0_qos.tables.oper_vls, 2);
  EXPECT_EQ(p.topology.sw0_qos.tables.low[1], (shm::VlArbEntry{1, 9}));
  EXPECT_EQ(p.topology.sw0_qos.tables.sl_to_vl[3], 1);
  EXPECT_EQ(p.topology.swe_qos.tables.oper_vls, 2);
  EXPECT_EQ(p.topology.swe_qos.tables.low[0], (shm::VlArbEntry{1, 1}));
  EXPECT_EQ(p.topology.swe_qos.tables.low[1], (shm::VlArbEntry{}));
}

// A new subnet state boots each set's ports with its tables, a switch's
// SL2VL for every input port of an output port.
TEST(TopologyQos, SubnetStateBootsWithTheSets) {
  TopologyParse p = parse_topology(std::string(kSwitchSets) + "# softverbs: qos_ca_high_limit 9\n" + kNet);
  ASSERT_TRUE(p.ok()) << p.error;
  const Topology& t = p.topology;
  const std::string path = "/dev/shm/softverbs-topology-qos-test-" + std::to_string(getpid());
  unlink(path.c_str());
  auto st = shm::SubnetState::open(path, [&t](shm::SubnetNode* nodes) { boot_subnet_qos(t, nodes); });
  ASSERT_TRUE(st.is_ok());
  {
    shm::SubnetLock lock(*st.value());
    const shm::SubnetNode& ca = st.value()->node(static_cast<unsigned>(t.find("h")));
    EXPECT_EQ(ca.ports[1].qos.vl_high_limit, 9);
    const shm::SubnetNode& sw = st.value()->node(static_cast<unsigned>(t.find("s")));
    EXPECT_EQ(sw.ports[0].qos, t.sw0_qos.tables);
    for (unsigned port = 1; port <= 8; ++port) EXPECT_EQ(sw.ports[port].qos, t.swe_qos.tables) << port;
    for (unsigned in = 0; in <= 8; ++in) {
      uint8_t vls[16];
      shm::unpack_sl2vl(sw.sw.sl2vl[in][0], vls);
      EXPECT_EQ(vls[1], 1) << in;
      shm::unpack_sl2vl(sw.sw.sl2vl[in][5], vls);
      EXPECT_EQ(vls[0], 3) << in;
      EXPECT_EQ(vls[15], 15) << in;
    }
  }
  st.value().reset();
  unlink(path.c_str());
}

}  // namespace
}  // namespace softverbs::mad
