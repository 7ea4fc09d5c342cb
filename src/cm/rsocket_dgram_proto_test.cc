// The datagram rsocket headers, byte for byte as rdma-core's librdmacm
// (rsocket.c, struct ds_header and struct ds_udp_header) lays them out.
#include "cm/rsocket_dgram_proto.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace softverbs::cm::dsproto {
namespace {

// rdma-core's layouts, as the C compiler packs them: natural alignment, no
// packing attribute. A header here is what rdma-core writes with a memcpy
// of the struct's first `length` bytes.
struct RdmaCoreDsHeader {
  uint8_t version;
  uint8_t length;
  uint16_t port;  // __be16
  union {
    uint32_t ipv4;  // __be32
    struct {
      uint32_t flowinfo;  // __be32
      uint8_t addr[16];
    } ipv6;
  } addr;
};
static_assert(offsetof(RdmaCoreDsHeader, port) == 2);
static_assert(offsetof(RdmaCoreDsHeader, addr) == 4);
static_assert(sizeof(RdmaCoreDsHeader) == kIpv6HdrLen);

struct RdmaCoreUdpHeader {
  uint32_t tag;  // __be32
  uint8_t version;
  uint8_t op;
  uint8_t length;
  uint8_t reserved;
  uint32_t qpn;  // __be32
  union {
    uint32_t ipv4;
    uint8_t ipv6[16];
  } addr;
};
static_assert(offsetof(RdmaCoreUdpHeader, qpn) == 8);
static_assert(offsetof(RdmaCoreUdpHeader, addr) == 12);
static_assert(sizeof(RdmaCoreUdpHeader) == kUdpIpv6HdrLen);

// In storage of sockaddr_storage's size, as the library's callers pass them.
sockaddr_storage v4_storage(const char* a, uint16_t port) {
  sockaddr_storage ss{};
  auto* s = reinterpret_cast<sockaddr_in*>(&ss);
  s->sin_family = AF_INET;
  s->sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, a, &s->sin_addr), 1);
  return ss;
}

sockaddr_in6 v6(const char* a, uint16_t port, uint32_t flowinfo) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_port = htons(port);
  s.sin6_flowinfo = htonl(flowinfo);
  EXPECT_EQ(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
  return s;
}

std::vector<uint8_t> bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

TEST(DsHeader, Ipv4IsEightBytesAsRdmaCoreFormatsIt) {
  const sockaddr_storage ss = v4_storage("10.1.2.3", 7174);
  const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
  uint8_t out[kMaxHdrLen];
  ASSERT_EQ(format_header(reinterpret_cast<const sockaddr*>(&a), out), 8);
  EXPECT_EQ(bytes(out, 8), (std::vector<uint8_t>{4, 8, 0x1c, 0x06, 10, 1, 2, 3}));

  RdmaCoreDsHeader rc{};  // ds_format_hdr
  rc.version = 4;
  rc.length = 8;
  rc.port = a.sin_port;
  rc.addr.ipv4 = a.sin_addr.s_addr;
  EXPECT_EQ(bytes(out, 8), bytes(&rc, 8));
}

TEST(DsHeader, Ipv6IsTwentyFourBytesWithFlowinfo) {
  const sockaddr_in6 a = v6("fd00::1:2", 7174, 0xabcde);
  uint8_t out[kMaxHdrLen];
  ASSERT_EQ(format_header(reinterpret_cast<const sockaddr*>(&a), out), 24);
  const std::vector<uint8_t> want{6,    24,   0x1c, 0x06, 0x00, 0x0a, 0xbc, 0xde, 0xfd, 0, 0, 0, 0, 0, 0, 0,
                                  0,    0,    0,    0,    0,    1,    0,    2};
  EXPECT_EQ(bytes(out, 24), want);

  RdmaCoreDsHeader rc{};
  rc.version = 6;
  rc.length = 24;
  rc.port = a.sin6_port;
  rc.addr.ipv6.flowinfo = a.sin6_flowinfo;
  std::memcpy(rc.addr.ipv6.addr, &a.sin6_addr, 16);
  EXPECT_EQ(bytes(out, 24), bytes(&rc, 24));
}

TEST(DsHeader, SourceRoundTripsAndValidation) {
  const sockaddr_in6 a = v6("::1", 40000, 7);
  uint8_t h[kMaxHdrLen];
  format_header(reinterpret_cast<const sockaddr*>(&a), h);
  EXPECT_EQ(header_len(h, 24), 24);
  EXPECT_EQ(header_len(h, 23), 0);  // shorter than its header
  sockaddr_storage back;
  source_of(h, &back);
  EXPECT_EQ(std::memcmp(&back, &a, sizeof a), 0);

  const uint8_t bad_len[8] = {4, 24, 0, 0, 0, 0, 0, 0};
  const uint8_t bad_version[8] = {5, 8, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(header_len(bad_len, 8), 0);
  EXPECT_EQ(header_len(bad_version, 8), 0);
  EXPECT_EQ(header_len(h, 7), 0);
}

TEST(DsUdpHeader, Ipv4AsRdmaCoreSendsIt) {
  const sockaddr_storage ss = v4_storage("127.0.0.1", 7174);
  const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
  uint8_t qp_hdr[kMaxHdrLen];
  format_header(reinterpret_cast<const sockaddr*>(&a), qp_hdr);
  uint8_t out[kMaxUdpHdrLen];
  ASSERT_EQ(format_udp_header(qp_hdr, kOpData, 0xAB123456, out), 16);
  EXPECT_EQ(bytes(out, 16),
            (std::vector<uint8_t>{0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0, 0x00, 0x12, 0x34, 0x56, 127, 0, 0, 1}));

  RdmaCoreUdpHeader rc{};  // ds_sendv_udp
  rc.tag = htonl(kUdpTag);
  rc.version = 4;
  rc.op = kOpData;
  rc.length = 16;
  rc.qpn = htonl(0xAB123456 & 0xFFFFFF);
  rc.addr.ipv4 = a.sin_addr.s_addr;
  EXPECT_EQ(bytes(out, 16), bytes(&rc, 16));

  UdpHeader h;
  ASSERT_TRUE(parse_udp_header(out, 16, AF_INET, &h));
  EXPECT_EQ(h.op, kOpData);
  EXPECT_EQ(h.qpn, 0x123456u);
  EXPECT_EQ(h.length, 16);
  EXPECT_FALSE(parse_udp_header(out, 16, AF_INET6, &h));  // the family must match the UDP source
  EXPECT_FALSE(parse_udp_header(out, 15, AF_INET, &h));
  out[0] = 0x54;
  EXPECT_FALSE(parse_udp_header(out, 16, AF_INET, &h));
}

TEST(DsUdpHeader, Ipv6CopiesSixteenBytesFromTheFlowinfoOn) {
  const sockaddr_in6 a = v6("fd00::9", 7174, 0x12345);
  uint8_t qp_hdr[kMaxHdrLen];
  format_header(reinterpret_cast<const sockaddr*>(&a), qp_hdr);
  uint8_t out[kMaxUdpHdrLen];
  ASSERT_EQ(format_udp_header(qp_hdr, kOpCtrl, 0x42, out), 28);

  // rdma-core: memcpy(hdr.addr.ipv6, &qp->hdr.addr.ipv6, 16), which starts
  // at the flowinfo.
  RdmaCoreDsHeader q{};
  q.version = 6;
  q.length = 24;
  q.port = a.sin6_port;
  q.addr.ipv6.flowinfo = a.sin6_flowinfo;
  std::memcpy(q.addr.ipv6.addr, &a.sin6_addr, 16);
  RdmaCoreUdpHeader rc{};
  rc.tag = htonl(kUdpTag);
  rc.version = 6;
  rc.op = kOpCtrl;
  rc.length = 28;
  rc.qpn = htonl(0x42);
  std::memcpy(rc.addr.ipv6, &q.addr.ipv6, 16);
  EXPECT_EQ(bytes(out, 28), bytes(&rc, 28));

  UdpHeader h;
  ASSERT_TRUE(parse_udp_header(out, 28, AF_INET6, &h));
  EXPECT_EQ(h.op, kOpCtrl);
  EXPECT_EQ(h.qpn, 0x42u);
  EXPECT_FALSE(parse_udp_header(out, 27, AF_INET6, &h));
}

}  // namespace
}  // namespace softverbs::cm::dsproto
