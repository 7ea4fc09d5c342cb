#include "mad/user_agent.h"

#include <gtest/gtest.h>

#include <array>
#include <cerrno>

#include "mad/mad_layout.h"

namespace softverbs::mad {
namespace {

std::array<uint8_t, kMadBytes> mad(uint8_t klass, uint8_t version, uint8_t method, uint16_t attr = 0) {
  std::array<uint8_t, kMadBytes> m{};
  m[0] = 1;
  m[1] = klass;
  m[2] = version;
  m[3] = method;
  AttributeId::set(m.data(), attr);
  return m;
}

AgentRegistration sa_server() {
  AgentRegistration r;
  r.mgmt_class = 0x03;
  r.class_version = 2;
  r.rmpp_version = 1;
  for (unsigned m : {0x01u, 0x02u, 0x12u, 0x15u}) r.method_mask[m / 64] |= uint64_t{1} << (m % 64);
  return r;
}

TEST(UserAgent, RequestsReachTheAgentOfTheirClassVersionAndMethod) {
  const AgentRegistration r = sa_server();
  EXPECT_TRUE(wants(r, mad(0x03, 2, 0x12).data()));   // GetTable
  EXPECT_TRUE(wants(r, mad(0x03, 2, 0x01).data()));   // Get
  EXPECT_FALSE(wants(r, mad(0x03, 2, 0x14).data()));  // GetTraceTable: not in its mask
  EXPECT_FALSE(wants(r, mad(0x03, 1, 0x12).data()));  // another class version
  EXPECT_FALSE(wants(r, mad(0x04, 2, 0x12).data()));  // another class
  EXPECT_FALSE(wants(r, mad(0x03, 2, 0x92).data()));  // a response goes by TID, not by mask
  AgentRegistration client = r;
  client.method_mask[0] = client.method_mask[1] = 0;  // saquery's: sends only
  EXPECT_FALSE(wants(client, mad(0x03, 2, 0x12).data()));
}

TEST(UserAgent, VendorRangeTwoAlsoMatchesTheOui) {
  AgentRegistration r;
  r.mgmt_class = 0x31;
  r.class_version = 1;
  r.oui = 0x001405;
  r.method_mask[0] = 1u << 1;
  auto m = mad(0x31, 1, 0x01);
  EXPECT_FALSE(wants(r, m.data()));
  m[37] = 0x00, m[38] = 0x14, m[39] = 0x05;
  EXPECT_TRUE(wants(r, m.data()));
}

TEST(UserAgent, ResponsesAndTrapRepressGoBackByTid) {
  EXPECT_TRUE(is_response(mad(0x03, 2, 0x81).data()));
  EXPECT_TRUE(is_response(mad(0x01, 1, 0x07).data()));   // TrapRepress
  EXPECT_FALSE(is_response(mad(0x01, 1, 0x05).data()));  // Trap
  EXPECT_EQ(tid_for_agent(0x1122334455667788ull, 0xabcd), 0x0000abcd55667788ull);
  EXPECT_EQ(tid_agent(0x0000abcd55667788ull), 0xabcdu);
}

TEST(UserAgent, TheDeviceKeepsItsSmpsButSmInfoAndThePma) {
  EXPECT_TRUE(for_user_agent(mad(0x03, 2, 0x12).data()));
  EXPECT_TRUE(for_user_agent(mad(0x09, 1, 0x01).data()));
  EXPECT_TRUE(for_user_agent(mad(0x01, 1, 0x01, 0x0020).data()));
  EXPECT_TRUE(for_user_agent(mad(0x81, 1, 0x01, 0x0020).data()));
  EXPECT_FALSE(for_user_agent(mad(0x81, 1, 0x01, 0x0011).data()));
  EXPECT_FALSE(for_user_agent(mad(0x01, 1, 0x02, 0x0015).data()));
  EXPECT_FALSE(for_user_agent(mad(0x04, 1, 0x01, 0x0012).data()));
  // A Trap(Notice) is the SM's, by either routing; its TrapRepress is a
  // response (above), never a request for an agent.
  EXPECT_TRUE(for_user_agent(mad(0x01, 1, 0x05, 0x0002).data()));
  EXPECT_TRUE(for_user_agent(mad(0x81, 1, 0x05, 0x0002).data()));
  AgentRegistration sm;
  sm.mgmt_class = 0x01;
  sm.class_version = 1;
  for (unsigned m : {0x01u, 0x02u, 0x05u, 0x07u}) sm.method_mask[0] |= uint64_t{1} << m;  // as opensm registers
  EXPECT_TRUE(wants(sm, mad(0x01, 1, 0x05, 0x0002).data()));
  EXPECT_FALSE(wants(sm, mad(0x01, 1, 0x07, 0x0002).data()));
}

TEST(UserAgent, RegistrationsTheKernelRefuses) {
  EXPECT_EQ(check_registration(sa_server()), 0);
  AgentRegistration r = sa_server();
  r.rmpp_version = 2;
  EXPECT_EQ(check_registration(r), EINVAL);
  r = sa_server();
  r.class_version = 8;
  EXPECT_EQ(check_registration(r), EINVAL);
  r.class_version = 1;
  r.mgmt_class = 0;
  EXPECT_EQ(check_registration(r), EINVAL);
  r.mgmt_class = 0x82;
  EXPECT_EQ(check_registration(r), EINVAL);
  r.mgmt_class = 0x81;
  r.rmpp_version = 1;  // SMPs have no RMPP
  EXPECT_EQ(check_registration(r), EINVAL);
  r.rmpp_version = 0;
  EXPECT_EQ(check_registration(r), 0);
  r.mgmt_class = 0x30;  // vendor range 2 without an OUI
  EXPECT_EQ(check_registration(r), EINVAL);
  r.oui = 0x001405;
  EXPECT_EQ(check_registration(r), 0);
}

TEST(UserAgent, TwoAgentsCannotClaimOneMethod) {
  AgentRegistration a = sa_server(), b = sa_server();
  EXPECT_TRUE(conflicts(a, b));
  b.method_mask[0] = uint64_t{1} << 0x14;  // only GetTraceTable
  EXPECT_FALSE(conflicts(a, b));
  b = sa_server();
  b.class_version = 1;
  EXPECT_FALSE(conflicts(a, b));
  AgentRegistration none = sa_server();
  none.method_mask[0] = 0;
  EXPECT_FALSE(conflicts(a, none));  // a client that only sends claims nothing
}

}  // namespace
}  // namespace softverbs::mad
