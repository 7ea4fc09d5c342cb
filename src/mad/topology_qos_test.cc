#include "mad/topology_qos.h"

#include <gtest/gtest.h>

#include <string>

#include "mad/topology.h"

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
  ASSERT_TRUE(p.topology.has_ca_qos);
  const shm::QosTables& t = p.topology.ca_qos;
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
  EXPECT_FALSE(p.topology.has_ca_qos);
  EXPECT_EQ(p.topology.ca_qos, shm::default_qos());
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
  EXPECT_NE(error_of("# softverbs: qos_sw0_sl2vl 0\n").find("unknown QoS option \"qos_sw0_sl2vl\""), std::string::npos);
  // Checked once the whole file is read: the order of the lines does not matter.
  EXPECT_EQ(error_of("# softverbs: qos_ca_vlarb_low 0:1,3:1\n# softverbs: qos_ca_max_vls 2\n"),
            "qos_ca_vlarb_low: VL3 has a weight but is not operational (VL0-1)");
  EXPECT_EQ(error_of("# softverbs: qos_ca_max_vls 2\n# softverbs: qos_ca_vlarb_low 0:1,3:0\n"), "");  // weight 0: skipped
  EXPECT_EQ(error_of("# softverbs: qos_ca_max_vls 1\n# softverbs: qos_ca_sl2vl 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1\n"),
            "qos_ca_sl2vl: SL15 on VL1, which is not operational (VL0-0)");
}

}  // namespace
}  // namespace softverbs::mad
