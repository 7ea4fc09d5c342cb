#include "cm/mcast_gid.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

namespace softverbs::cm {
namespace {

sockaddr_storage addr(const char* text) {
  sockaddr_storage ss{};
  auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, text, &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
  } else {
    EXPECT_EQ(inet_pton(AF_INET6, text, &s6->sin6_addr), 1) << text;
    s6->sin6_family = AF_INET6;
  }
  return ss;
}

std::string mgid(const char* text, bool roce, rdma_port_space ps = RDMA_PS_UDP) {
  const sockaddr_storage ss = addr(text);
  const ibv_gid g = mcast_mgid(reinterpret_cast<const sockaddr*>(&ss), roce, ps);
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

bool multicast(const char* text) {
  const sockaddr_storage ss = addr(text);
  return is_multicast_addr(reinterpret_cast<const sockaddr*>(&ss));
}

TEST(McastGid, MulticastAddresses) {
  EXPECT_TRUE(multicast("224.0.0.1"));
  EXPECT_TRUE(multicast("239.1.2.3"));
  EXPECT_FALSE(multicast("223.255.255.255"));
  EXPECT_FALSE(multicast("240.0.0.1"));
  EXPECT_FALSE(multicast("127.0.0.1"));
  EXPECT_TRUE(multicast("ff0e::1"));
  EXPECT_FALSE(multicast("fe80::1"));
  EXPECT_FALSE(multicast("::ffff:239.1.2.3"));  // an IPv6 address, not multicast
  EXPECT_FALSE(is_multicast_addr(nullptr));
}

// RoCEv2: the IPv4-mapped address; IPv6 as it is.
TEST(McastGid, Roce) {
  EXPECT_EQ(mgid("239.1.2.3", true), "::ffff:239.1.2.3");
  EXPECT_EQ(mgid("224.0.0.251", true, RDMA_PS_IPOIB), "::ffff:224.0.0.251");
  EXPECT_EQ(mgid("ff0e::1234:5678", true), "ff0e::1234:5678");
}

// InfiniBand: RFC 4391's mapping, P_Key ffff, link-local scope; the low 28
// bits of IPv4 (the class D prefix dropped), the low 80 of IPv6; the RDMA
// CM's signature for RDMA_PS_UDP.
TEST(McastGid, InfiniBandIpv4) {
  EXPECT_EQ(mgid("239.1.2.3", false, RDMA_PS_IPOIB), "ff12:401b:ffff::f01:203");
  EXPECT_EQ(mgid("239.1.2.3", false, RDMA_PS_UDP), "ff12:4001:ffff::f01:203");
  EXPECT_EQ(mgid("224.0.0.1", false, RDMA_PS_IPOIB), "ff12:401b:ffff::1");
}

TEST(McastGid, InfiniBandIpv6) {
  EXPECT_EQ(mgid("ff0e::1:2:3", false, RDMA_PS_IPOIB), "ff12:601b:ffff::1:2:3");
  EXPECT_EQ(mgid("ff02:1:2:3:4:5:6:7", false, RDMA_PS_UDP), "ff12:6001:ffff:3:4:5:6:7");
  // Already an SA-assigned MGID: kept.
  EXPECT_EQ(mgid("ff12:a01b:ffff::1", false, RDMA_PS_UDP), "ff12:a01b:ffff::1");
}

TEST(McastGid, MlidInRangeAndStable) {
  const sockaddr_storage a = addr("239.1.2.3");
  const sockaddr_storage b = addr("239.1.2.4");
  const ibv_gid ga = mcast_mgid(reinterpret_cast<const sockaddr*>(&a), false, RDMA_PS_UDP);
  const ibv_gid gb = mcast_mgid(reinterpret_cast<const sockaddr*>(&b), false, RDMA_PS_UDP);
  const uint16_t la = mcast_mlid(ga, false);
  EXPECT_GE(la, 0xc000);
  EXPECT_LE(la, 0xfffe);
  EXPECT_EQ(la, mcast_mlid(ga, false));
  EXPECT_NE(la, mcast_mlid(gb, false));
  EXPECT_EQ(mcast_mlid(ga, true), 0);
}

}  // namespace
}  // namespace softverbs::cm
