#include "mad/qos_config_file.h"

#include <gtest/gtest.h>

#include <string>

namespace softverbs::mad {
namespace {

TEST(QosConfigFile, CaOptionsMakeTheTables) {
  const QosConfigParse p = parse_qos_config(R"(# the worked example of docs/QOS.md
qos TRUE
qos_ca_max_vls 4
  qos_ca_high_limit 2
qos_ca_vlarb_high 1:8,0:0
qos_ca_vlarb_low 0:1,2:3

qos_ca_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,15
)");
  ASSERT_TRUE(p.ok()) << p.error;
  ASSERT_TRUE(p.gives_tables);
  EXPECT_EQ(p.tables.oper_vls, 3);  // VL0-3
  EXPECT_EQ(p.tables.vl_high_limit, 2);
  const uint8_t sl2vl[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 15};
  for (unsigned sl = 0; sl < 16; ++sl) EXPECT_EQ(p.tables.sl_to_vl[sl], sl2vl[sl]) << sl;
  EXPECT_EQ(p.tables.low[0], (shm::VlArbEntry{0, 1}));
  EXPECT_EQ(p.tables.low[1], (shm::VlArbEntry{2, 3}));
  EXPECT_EQ(p.tables.low[2], (shm::VlArbEntry{}));
  EXPECT_EQ(p.tables.high[0], (shm::VlArbEntry{1, 8}));
}

TEST(QosConfigFile, CaOptionsFallBackToTheDefaultsAsInOpensm) {
  const QosConfigParse p = parse_qos_config(R"(qos_vlarb_low 0:1,2:3
qos_high_limit 7
qos_ca_high_limit 0
qos_sw0_max_vls 1
qos_swe_vlarb_low 0:200
qos_rtr_sl2vl 0
qos_policy_file /etc/opensm/qos-policy.conf
log_flags 0x83
sm_priority 1
)");
  ASSERT_TRUE(p.ok()) << p.error;
  ASSERT_TRUE(p.gives_tables);
  EXPECT_EQ(p.tables.low[0], (shm::VlArbEntry{0, 1}));  // qos_vlarb_low: no qos_ca_vlarb_low
  EXPECT_EQ(p.tables.low[1], (shm::VlArbEntry{2, 3}));
  EXPECT_EQ(p.tables.vl_high_limit, 0);  // qos_ca_high_limit wins over qos_high_limit
  // The switch and router sets are not the CA's: its boot VLs stay.
  EXPECT_EQ(p.tables.oper_vls, shm::default_qos().oper_vls);
  EXPECT_EQ(p.tables.sl_to_vl[9], 1);
}

TEST(QosConfigFile, QosFalseGivesNoTables) {
  const QosConfigParse p = parse_qos_config("qos FALSE\nqos_ca_vlarb_low 0:1\n");
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_FALSE(p.gives_tables);
  EXPECT_TRUE(parse_qos_config("").gives_tables);  // boot tables, as given
}

TEST(QosConfigFile, RefusesWithTheLineAndTheReason) {
  EXPECT_EQ(parse_qos_config("\nqos_ca_max_vls 0\n").error, "line 2: qos_ca_max_vls is 1 to 15");
  EXPECT_EQ(parse_qos_config("qos_high_limit 256\n").error, "line 1: qos_high_limit is 0 to 255");
  EXPECT_EQ(parse_qos_config("qos yes\n").error, "line 1: qos is TRUE or FALSE, not \"yes\"");
  EXPECT_EQ(parse_qos_config("qos_sl2vl 0,1\n").error, "line 1: qos_sl2vl is 16 VLs (0-15), SL0's first");
  EXPECT_NE(parse_qos_config("qos_ca_vlarb_lo 0:1\n").error.find("unknown QoS option \"qos_ca_vlarb_lo\""),
            std::string::npos);
  EXPECT_NE(parse_qos_config("qos_vlarb 0:1\n").error.find("unknown QoS option \"qos_vlarb\""), std::string::npos);
  EXPECT_NE(parse_qos_config("qos_ca_vlarb_low 0-1\n").error.find("VL:weight"), std::string::npos);
  // What the SMA would refuse in a Set: an SL on a VL that is not operational.
  EXPECT_EQ(parse_qos_config("qos_ca_max_vls 2\nqos_ca_sl2vl 0,1,2,0,0,0,0,0,0,0,0,0,0,0,0,0\n").error,
            "qos_ca_sl2vl: SL2 on VL2, which is not operational (VL0-1)");
  EXPECT_EQ(parse_qos_config("qos_ca_max_vls 1\nqos_ca_vlarb_high 3:1\n").error,
            "qos_ca_vlarb_high: VL3 has a weight but is not operational (VL0-0)");
}

TEST(QosConfigFile, AFileThatCannotBeRead) {
  EXPECT_NE(load_qos_config("/nonexistent/qos.conf").error.find("cannot read it"), std::string::npos);
}

}  // namespace
}  // namespace softverbs::mad
