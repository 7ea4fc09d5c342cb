#include "wire/roce_udp.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "wire/icrc.h"
#include "wire/packet.h"
#include "wire/testdata/icrc_vectors.h"

namespace softverbs::wire {
namespace {

std::vector<uint8_t> bytes(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

// Builds a datagram the way the UDP fabric will: IB packet behind room for
// the encapsulation, then roce_encapsulate().
std::vector<uint8_t> make(const RoceUdpHeader& e, const TransportHeaders& h,
                          std::span<const uint8_t> payload) {
  const size_t head = encap_length(e.version);
  std::vector<uint8_t> d(head + PacketBuilder::packet_length(h.bth.opcode, uint32_t(payload.size())));
  PacketBuilder b(std::span<uint8_t>(d).subspan(head));
  EXPECT_EQ(b.build(h, payload), PacketError::kOk);
  EXPECT_EQ(roce_encapsulate(d, e), EncapError::kOk);
  return d;
}

RoceUdpHeader v4_send_only_encap() {
  RoceUdpHeader e;
  e.src = gid_from_ipv4(192, 168, 1, 1);
  e.dst = gid_from_ipv4(192, 168, 1, 2);
  e.ipv4_id = 0x1234;
  e.hop_limit = 64;
  e.src_port = 0xc000;
  return e;
}

TransportHeaders v4_send_only_headers() {
  TransportHeaders h;
  h.bth.opcode = Opcode::kRcSendOnly;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = 0x11;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0x123456);
  return h;
}

const uint8_t kHello[] = {'h', 'e', 'l', 'l', 'o'};

TEST(RoceUdp, BuildsGoldenIpv4SendOnly) {
  EXPECT_EQ(make(v4_send_only_encap(), v4_send_only_headers(), kHello),
            bytes(testdata::kV4SendOnly));
  RoceUdpHeader e = v4_send_only_encap();
  e.udp_checksum = UdpChecksum::kCompute;
  EXPECT_EQ(make(e, v4_send_only_headers(), kHello), bytes(testdata::kV4SendOnlyUdpChecksum));
}

TEST(RoceUdp, BuildsGoldenIpv4WriteOnlyImmediate) {
  RoceUdpHeader e;
  e.src = gid_from_ipv4(10, 0, 0, 1);
  e.dst = gid_from_ipv4(10, 0, 0, 2);
  e.traffic_class = 0x68;
  e.ipv4_id = 0xbeef;
  e.hop_limit = 17;
  e.src_port = 0xd00d;
  TransportHeaders h;
  h.bth.opcode = Opcode::kRcRdmaWriteOnlyWithImmediate;
  h.bth.solicited = true;
  h.bth.pkey = 0x8001;
  h.bth.dest_qp = 0xabcdef;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0xffffff);
  h.reth = Reth{0x00007f0012345678, 0xcafebabe, 16};
  h.immdt = ImmDt{0xdeadbeef};
  uint8_t payload[16];
  for (int i = 0; i < 16; ++i) payload[i] = uint8_t(i);
  EXPECT_EQ(make(e, h, payload), bytes(testdata::kV4WriteOnlyImm));
}

TEST(RoceUdp, BuildsGoldenIpv6UdSendOnlyImmediate) {
  RoceUdpHeader e;
  e.version = IpVersion::kV6;
  e.src = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  e.dst = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x66, 0x77};
  e.traffic_class = 0x1a;
  e.flow_label = 0xabcde;
  e.hop_limit = 255;
  e.src_port = 0xe123;  // kAuto: IPv6 gets a UDP checksum
  TransportHeaders h;
  h.bth.opcode = Opcode::kUdSendOnlyWithImmediate;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = 1;
  h.bth.psn = Psn(0x100);
  h.deth = Deth{0x11111111, 0x42};
  h.immdt = ImmDt{0x01020304};
  const uint8_t payload[] = {'p', 'a', 'y', 'l', 'o', 'a', 'd'};
  EXPECT_EQ(make(e, h, payload), bytes(testdata::kV6UdSendOnlyImm));
}

// IBA 1.5 ATOMIC WRITE and the READ RESPONSE ONLY that answers it (Linux
// rxe's answer), byte for byte and ICRC included, against the vectors.
TEST(RoceUdp, BuildsGoldenIpv4AtomicWriteAndItsResponse) {
  RoceUdpHeader e = v4_send_only_encap();
  e.ipv4_id = 0x2345;
  e.src_port = 0xc001;
  TransportHeaders h;
  h.bth.opcode = Opcode::kRcAtomicWrite;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = 0x123;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0xabc);
  h.reth = Reth{0x00007f00deadbee8, 0x00a1b2c3, 8};
  const uint8_t value[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  EXPECT_EQ(make(e, h, value), bytes(testdata::kV4AtomicWrite));

  RoceUdpHeader r = v4_send_only_encap();
  std::swap(r.src, r.dst);
  r.ipv4_id = 0x42;
  r.src_port = 0xc002;
  TransportHeaders a;
  a.bth.opcode = Opcode::kRcRdmaReadResponseOnly;
  a.bth.pkey = 0xffff;
  a.bth.dest_qp = 0x456;
  a.bth.psn = Psn(0xabc);
  a.aeth = Aeth::ack(0x1f, 1);
  EXPECT_EQ(make(r, a, {}), bytes(testdata::kV4AtomicWriteResponse));

  const RoceDatagram d = roce_parse(testdata::kV4AtomicWrite);
  ASSERT_EQ(d.error, EncapError::kOk) << encap_error_name(d.error);
  const PacketView v = PacketView::parse(d.ib, 4096);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(icrc_check(d.datagram), IcrcStatus::kOk);
  EXPECT_EQ(v.opcode(), Opcode::kRcAtomicWrite);
  EXPECT_EQ(v.reth().dma_length, 8u);
  EXPECT_EQ(v.payload_length(), 8u);
}

// IBA 1.5 FLUSH as Linux rxe sends it (BTH, FETH, RETH): built and parsed
// against the vector.
TEST(RoceUdp, BuildsAndParsesGoldenIpv4Flush) {
  RoceUdpHeader e = v4_send_only_encap();
  e.ipv4_id = 0x2346;
  e.src_port = 0xc001;
  TransportHeaders h;
  h.bth.opcode = Opcode::kRcFlush;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = 0x123;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0xabd);
  h.feth = Feth{Feth::kGlobalVisibility, Feth::kRange};
  h.reth = Reth{0x00007f00deadb000, 0x00a1b2c3, 4096};
  EXPECT_EQ(make(e, h, {}), bytes(testdata::kV4Flush));

  const RoceDatagram d = roce_parse(testdata::kV4Flush);
  ASSERT_EQ(d.error, EncapError::kOk) << encap_error_name(d.error);
  EXPECT_EQ(icrc_check(d.datagram), IcrcStatus::kOk);
  const PacketView v = PacketView::parse(d.ib, 4096);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.opcode(), Opcode::kRcFlush);
  EXPECT_EQ(v.feth(), (Feth{Feth::kGlobalVisibility, Feth::kRange}));
  EXPECT_EQ(v.reth(), (Reth{0x00007f00deadb000, 0x00a1b2c3, 4096}));
  EXPECT_EQ(v.payload_length(), 0u);
}

TEST(RoceUdp, ParsesGoldenVectors) {
  const RoceDatagram d = roce_parse(testdata::kV4WriteOnlyImmMarked);
  ASSERT_EQ(d.error, EncapError::kOk) << encap_error_name(d.error);
  EXPECT_EQ(d.header.version, IpVersion::kV4);
  EXPECT_EQ(d.header.src, gid_from_ipv4(10, 0, 0, 1));
  EXPECT_EQ(d.header.dst, gid_from_ipv4(10, 0, 0, 2));
  EXPECT_EQ(d.header.traffic_class, 0x6b);  // ECN CE
  EXPECT_EQ(d.header.hop_limit, 3);
  EXPECT_EQ(d.header.ipv4_id, 0xbeef);
  EXPECT_TRUE(d.header.dont_fragment);
  EXPECT_EQ(d.header.src_port, 0xd00d);
  EXPECT_EQ(d.header.dst_port, kRoceV2Port);
  EXPECT_EQ(d.header.udp_checksum, UdpChecksum::kZero);
  EXPECT_EQ(icrc_check(d.datagram), IcrcStatus::kOk);
  const PacketView v = PacketView::parse(d.ib, 4096);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.opcode(), Opcode::kRcRdmaWriteOnlyWithImmediate);
  EXPECT_TRUE(v.bth().fecn && v.bth().becn);
  EXPECT_EQ(v.reth().rkey, 0xcafebabeu);
  EXPECT_EQ(v.immdt().value, 0xdeadbeefu);
  EXPECT_EQ(v.payload_length(), 16u);

  const RoceDatagram d6 = roce_parse(testdata::kV6UdSendOnlyImm);
  ASSERT_EQ(d6.error, EncapError::kOk) << encap_error_name(d6.error);
  EXPECT_EQ(d6.header.version, IpVersion::kV6);
  EXPECT_EQ(d6.header.traffic_class, 0x1a);
  EXPECT_EQ(d6.header.flow_label, 0xabcdeu);
  EXPECT_EQ(d6.header.udp_checksum, UdpChecksum::kCompute);
  EXPECT_EQ(icrc_check(d6.datagram), IcrcStatus::kOk);
  const PacketView v6 = PacketView::parse(d6.ib, 4096);
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6.deth().src_qp, 0x42u);
  EXPECT_EQ(v6.payload_length(), 7u);
  EXPECT_EQ(v6.pad_count(), 1);
}

TEST(RoceUdp, LinkPaddingAfterTheDatagramIsIgnored) {
  std::vector<uint8_t> f = bytes(testdata::kV4SendOnly);
  f.resize(f.size() + 6, 0);  // a 60-byte minimum Ethernet frame pads it
  const RoceDatagram d = roce_parse(f);
  ASSERT_EQ(d.error, EncapError::kOk);
  EXPECT_EQ(d.datagram.size(), sizeof(testdata::kV4SendOnly));
  EXPECT_EQ(icrc_check(d.datagram), IcrcStatus::kOk);
}

EncapError parse_error(std::vector<uint8_t> d, uint16_t port = kRoceV2Port) {
  return roce_parse(d, port).error;
}

// Recomputes the IPv4 header checksum after a test edits the header.
void fix_ipv4_checksum(std::vector<uint8_t>& d) {
  d[10] = d[11] = 0;
  uint32_t s = 0;
  for (size_t i = 0; i < 20; i += 2) s += uint32_t(d[i]) << 8 | d[i + 1];
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  d[10] = uint8_t(~s >> 8);
  d[11] = uint8_t(~s);
}

TEST(RoceUdp, RejectsMalformedFraming) {
  const std::vector<uint8_t> g = bytes(testdata::kV4SendOnly);
  EXPECT_EQ(parse_error({}), EncapError::kTruncated);
  EXPECT_EQ(parse_error({g.begin(), g.begin() + 19}), EncapError::kTruncated);
  EXPECT_EQ(parse_error({g.begin(), g.end() - 1}), EncapError::kTruncated);
  EXPECT_EQ(parse_error(g, 4792), EncapError::kWrongPort);

  auto d = g;
  d[0] = 0x55;
  EXPECT_EQ(parse_error(d), EncapError::kBadIpVersion);
  d = g;
  d[0] = 0x44;
  EXPECT_EQ(parse_error(d), EncapError::kBadIpHeaderLength);
  d = g;
  d[8] ^= 1;  // TTL without a checksum update
  EXPECT_EQ(parse_error(d), EncapError::kBadIpChecksum);
  d = g;
  d[6] |= 0x20;  // MF
  fix_ipv4_checksum(d);
  EXPECT_EQ(parse_error(d), EncapError::kFragmented);
  d = g;
  d[7] = 1;  // fragment offset
  fix_ipv4_checksum(d);
  EXPECT_EQ(parse_error(d), EncapError::kFragmented);
  d = g;
  d[9] = 6;  // TCP
  fix_ipv4_checksum(d);
  EXPECT_EQ(parse_error(d), EncapError::kNotUdp);
  d = g;
  d[25] -= 4;  // UDP length
  EXPECT_EQ(parse_error(d), EncapError::kBadUdpLength);

  d = bytes(testdata::kV4SendOnlyUdpChecksum);
  EXPECT_EQ(parse_error(d), EncapError::kOk);
  d[44] ^= 0x01;  // payload byte: the UDP checksum catches it
  EXPECT_EQ(parse_error(d), EncapError::kBadUdpChecksum);

  d = bytes(testdata::kV6UdSendOnlyImm);
  d[6] = 0;  // hop-by-hop extension header
  EXPECT_EQ(parse_error(d), EncapError::kNotUdp);
  d = bytes(testdata::kV6UdSendOnlyImm);
  d[5] += 4;  // payload length beyond the bytes
  EXPECT_EQ(parse_error(d), EncapError::kTruncated);
  d = bytes(testdata::kV6UdSendOnlyImm);
  d[70] ^= 0x80;  // payload byte
  EXPECT_EQ(parse_error(d), EncapError::kBadUdpChecksum);
}

TEST(RoceUdp, EncapsulateRejections) {
  std::vector<uint8_t> small(20);
  EXPECT_EQ(roce_encapsulate(small, RoceUdpHeader{}), EncapError::kTruncated);
  std::vector<uint8_t> no_ib(28 + 12);  // room for headers, BTH but no ICRC
  EXPECT_EQ(roce_encapsulate(no_ib, RoceUdpHeader{}), EncapError::kIcrc);
  std::vector<uint8_t> huge(65536);
  EXPECT_EQ(roce_encapsulate(huge, RoceUdpHeader{}), EncapError::kTooLong);
}

TEST(RoceUdp, RandomCorruptionNeverReadsOutOfBounds) {
  std::mt19937 rng(17);
  const std::vector<std::vector<uint8_t>> seeds = {bytes(testdata::kV4SendOnly),
                                                   bytes(testdata::kV4WriteOnlyImm),
                                                   bytes(testdata::kV6UdSendOnlyImm)};
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> p = seeds[rng() % seeds.size()];
    if (iter % 2) {
      const int flips = 1 + rng() % 3;
      for (int f = 0; f < flips; ++f) p[rng() % p.size()] = uint8_t(rng());
    }
    const size_t n = rng() % (p.size() + 1);
    auto exact = std::make_unique<uint8_t[]>(n == 0 ? 1 : n);
    std::copy(p.begin(), p.begin() + n, exact.get());
    const RoceDatagram d = roce_parse({exact.get(), n});
    if (d.error != EncapError::kOk) continue;
    EXPECT_LE(d.datagram.size(), n);
    (void)icrc_check(d.datagram);
    (void)PacketView::parse(d.ib, 4096).ok();
  }
}

// A UDP socket's sender has only the IB packet in hand: the headers written
// apart must give the ICRC of the whole datagram, for both IP versions.
TEST(RoceUdp, HeadersWrittenApartGiveTheDatagramsIcrc) {
  for (IpVersion v : {IpVersion::kV4, IpVersion::kV6}) {
    RoceUdpHeader e = v4_send_only_encap();
    e.udp_checksum = UdpChecksum::kZero;
    if (v == IpVersion::kV6) {
      e.version = v;
      e.src = Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
      e.dst = Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    }
    const std::vector<uint8_t> whole = make(e, v4_send_only_headers(), kHello);
    const size_t head = encap_length(v);
    const std::span<const uint8_t> ib(whole.data() + head, whole.size() - head);
    uint8_t hdr[64];
    ASSERT_EQ(head, roce_write_headers(hdr, e, ib.size()));
    EXPECT_TRUE(std::equal(hdr, hdr + head, whole.begin()));
    const std::optional<uint32_t> crc = icrc_compute({hdr, head}, ib.first(ib.size() - kIcrcBytes));
    ASSERT_TRUE(crc.has_value());
    const uint8_t* stored = ib.data() + ib.size() - kIcrcBytes;
    EXPECT_EQ(*crc, uint32_t{stored[0]} | uint32_t{stored[1]} << 8 | uint32_t{stored[2]} << 16 |
                        uint32_t{stored[3]} << 24);
  }
  uint8_t small[8];
  EXPECT_EQ(0u, roce_write_headers(small, v4_send_only_encap(), 100));
}

}  // namespace
}  // namespace softverbs::wire
