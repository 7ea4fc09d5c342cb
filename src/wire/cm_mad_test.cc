// Golden bytes of every CM message: each expected MAD is written byte by
// byte from the IBA tables (chapter 12), not from the codec's descriptors.
#include "wire/cm_mad.h"

#include <gtest/gtest.h>

#include <array>
#include <initializer_list>
#include <vector>

#include "wire/cma_hdr.h"

namespace softverbs::wire::cm {
namespace {

using Mad = std::array<uint8_t, kMadBytes>;

// The common header of a CM Send: base version 1, class 0x07, class
// version 2, method Send, TID 0x0102030405060708, the attribute.
Mad golden_header(uint16_t attr) {
  Mad m{};
  const uint8_t hdr[24] = {1, 0x07, 2, 0x03, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
                           uint8_t(attr >> 8), uint8_t(attr), 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < 24; ++i) m[i] = hdr[i];
  return m;
}

void put(Mad& m, size_t off, std::initializer_list<uint8_t> bytes) {
  for (uint8_t b : bytes) m[off++] = b;
}

MadHeader header() {
  MadHeader h;
  h.tid = 0x0102030405060708;
  return h;
}

template <class M>
Mad encoded(const M& msg) {
  Mad out;
  out.fill(0xee);  // every byte must be written
  encode(header(), msg, out.data());
  return out;
}

void expect_same(const Mad& got, const Mad& want) {
  for (size_t i = 0; i < kMadBytes; ++i) EXPECT_EQ(got[i], want[i]) << "byte " << i;
}

TEST(CmMad, HeaderRoundTripsAndReadsTheResponseBit) {
  MadHeader h = header();
  h.method = 0x81;
  h.status = 0x1234;
  h.attr_id = 0x0013;
  h.attr_mod = 0xdeadbeef;
  uint8_t b[kMadHeaderBytes];
  h.encode(b);
  EXPECT_EQ(b[3], 0x81);
  EXPECT_EQ(MadHeader::decode(b), h);
}

TEST(CmMad, ReqGoldenBytes) {
  Req r;
  r.local_comm_id = 0x11223344;
  r.service_id = 0x0000000001061234;  // RDMA_PS_TCP, port 0x1234
  r.local_ca_guid = 0x0102030405060708;
  r.local_qkey = 0xa1b2c3d4;
  r.local_qpn = 0x123456;
  r.responder_resources = 4;
  r.initiator_depth = 3;
  r.remote_cm_response_timeout = 20;
  r.transport_service_type = 0;
  r.end_to_end_flow_control = true;
  r.starting_psn = 0xabcdef;
  r.local_cm_response_timeout = 20;
  r.retry_count = 7;
  r.pkey = 0xffff;
  r.path_mtu = 3;
  r.rnr_retry_count = 7;
  r.max_cm_retries = 15;
  r.srq = true;
  r.primary.local_lid = 1;
  r.primary.remote_lid = 2;
  r.primary.local_gid[15] = 0xaa;
  r.primary.remote_gid[0] = 0xfe;
  r.primary.flow_label = 0x12345;
  r.primary.packet_rate = 3;
  r.primary.hop_limit = 64;
  r.primary.subnet_local = true;
  r.primary.local_ack_timeout = 18;
  r.alternate.sl = 5;
  r.alternate.local_ack_timeout = 1;
  r.private_data[0] = 0x5a;
  r.private_data[91] = 0xa5;

  Mad want = golden_header(0x0010);
  put(want, 24, {0x11, 0x22, 0x33, 0x44});
  put(want, 32, {0, 0, 0, 0, 0x01, 0x06, 0x12, 0x34});
  put(want, 40, {1, 2, 3, 4, 5, 6, 7, 8});
  put(want, 52, {0xa1, 0xb2, 0xc3, 0xd4});
  put(want, 56, {0x12, 0x34, 0x56, 0x04});   // QPN, responder resources
  put(want, 63, {0x03});                     // initiator depth
  put(want, 67, {0xa1});                     // timeout 20 | RC | EE flow control
  put(want, 68, {0xab, 0xcd, 0xef, 0xa7});   // PSN, timeout 20 | retry 7
  put(want, 72, {0xff, 0xff, 0x37, 0xf8});   // P_Key; MTU 3 | RNR 7; retries 15 | SRQ
  put(want, 76, {0x00, 0x01, 0x00, 0x02});   // LIDs
  want[95] = 0xaa;                           // local GID 80..95
  want[96] = 0xfe;                           // remote GID 96..111
  put(want, 112, {0x12, 0x34, 0x50, 0x03});  // flow label; packet rate
  put(want, 116, {0x00, 0x40, 0x08, 0x90});  // TC, hop limit, SL | subnet local, ACK timeout 18
  put(want, 162, {0x50, 0x08});              // alternate SL 5; ACK timeout 1
  want[164] = 0x5a;
  want[255] = 0xa5;
  Mad got = encoded(r);
  expect_same(got, want);
  EXPECT_EQ(decode_req(got.data()), r);
  EXPECT_EQ(req_service_id(got.data()), r.service_id);
}

TEST(CmMad, RepGoldenBytes) {
  Rep r;
  r.local_comm_id = 0x01020304;
  r.remote_comm_id = 0x11223344;
  r.local_qkey = 0x0;
  r.local_qpn = 0x000abc;
  r.starting_psn = 0x654321;
  r.responder_resources = 16;
  r.initiator_depth = 8;
  r.target_ack_delay = 15;
  r.failover_accepted = 3;
  r.end_to_end_flow_control = true;
  r.rnr_retry_count = 7;
  r.srq = true;
  r.local_ca_guid = 0x1122334455667788;
  r.private_data[195] = 0x77;
  Mad want = golden_header(0x0013);
  put(want, 24, {1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44});
  put(want, 36, {0x00, 0x0a, 0xbc});
  put(want, 44, {0x65, 0x43, 0x21, 0x00});  // PSN, reserved
  put(want, 48, {0x10, 0x08, 0x7f, 0xf0});  // resources, depth; delay 15 | failover 3 | EE; RNR 7 | SRQ
  put(want, 52, {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88});
  want[255] = 0x77;
  Mad got = encoded(r);
  expect_same(got, want);
  EXPECT_EQ(decode_rep(got.data()), r);
  EXPECT_EQ(remote_comm_id(got.data()), 0x11223344u);
}

TEST(CmMad, RejGoldenBytes) {
  Rej r;
  r.local_comm_id = 0xaabbccdd;
  r.remote_comm_id = 0x11223344;
  r.message_rejected = Rej::kRejectedReq;
  r.reason = Rej::kConsumerReject;
  r.private_data[0] = 1;
  r.private_data[147] = 2;
  Mad want = golden_header(0x0012);
  put(want, 24, {0xaa, 0xbb, 0xcc, 0xdd, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 28});
  want[108] = 1;
  want[255] = 2;
  Mad got = encoded(r);
  expect_same(got, want);
  EXPECT_EQ(decode_rej(got.data()), r);

  r.message_rejected = Rej::kRejectedRep;
  r.ari_length = 1;
  r.reason = Rej::kInvalidServiceId;
  r.ari[0] = 9;
  got = encoded(r);
  EXPECT_EQ(got[32], 0x40);  // 2 bits MSB first
  EXPECT_EQ(got[33], 0x02);  // 7 bits MSB first
  EXPECT_EQ(got[35], 8);
  EXPECT_EQ(got[36], 9);
  EXPECT_EQ(decode_rej(got.data()), r);
}

TEST(CmMad, MraGoldenBytes) {
  Mra m;
  m.local_comm_id = 5;
  m.remote_comm_id = 6;
  m.message_mraed = Mra::kMraedRep;
  m.service_timeout = 31;
  Mad want = golden_header(0x0011);
  put(want, 24, {0, 0, 0, 5, 0, 0, 0, 6, 0x40, 0xf8});
  Mad got = encoded(m);
  expect_same(got, want);
  EXPECT_EQ(decode_mra(got.data()), m);
}

TEST(CmMad, RtuDreqDrepGoldenBytes) {
  Rtu rtu;
  rtu.local_comm_id = 7;
  rtu.remote_comm_id = 8;
  rtu.private_data[223] = 0x33;
  Mad want = golden_header(0x0014);
  put(want, 24, {0, 0, 0, 7, 0, 0, 0, 8});
  want[255] = 0x33;
  Mad got = encoded(rtu);
  expect_same(got, want);
  EXPECT_EQ(decode_rtu(got.data()), rtu);

  Dreq dreq;
  dreq.local_comm_id = 9;
  dreq.remote_comm_id = 10;
  dreq.remote_qpn = 0xfedcba;
  want = golden_header(0x0015);
  put(want, 24, {0, 0, 0, 9, 0, 0, 0, 10, 0xfe, 0xdc, 0xba, 0});
  got = encoded(dreq);
  expect_same(got, want);
  EXPECT_EQ(decode_dreq(got.data()), dreq);

  Drep drep;
  drep.local_comm_id = 10;
  drep.remote_comm_id = 9;
  want = golden_header(0x0016);
  put(want, 24, {0, 0, 0, 10, 0, 0, 0, 9});
  got = encoded(drep);
  expect_same(got, want);
  EXPECT_EQ(decode_drep(got.data()), drep);
}

TEST(CmMad, SidrGoldenBytes) {
  SidrReq q;
  q.request_id = 0x01020304;
  q.pkey = 0xffff;
  q.service_id = 0x0000000002111234;  // RDMA_PS_UDP
  Mad want = golden_header(0x0017);
  put(want, 24, {1, 2, 3, 4, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x12, 0x34});
  Mad got = encoded(q);
  expect_same(got, want);
  EXPECT_EQ(decode_sidr_req(got.data()), q);
  EXPECT_EQ(sidr_req_service_id(got.data()), q.service_id);

  SidrRep p;
  p.request_id = 0x01020304;
  p.status = SidrRep::kNoService;
  p.qpn = 0x000123;
  p.service_id = 0x0000000002111234;
  p.qkey = 0x01234567;
  p.private_data[0] = 0xee;
  want = golden_header(0x0018);
  put(want, 24, {1, 2, 3, 4, 1, 0, 0, 0, 0x00, 0x01, 0x23, 0x00});
  put(want, 36, {0, 0, 0, 0, 0x02, 0x11, 0x12, 0x34, 0x01, 0x23, 0x45, 0x67});
  want[120] = 0xee;
  got = encoded(p);
  expect_same(got, want);
  EXPECT_EQ(decode_sidr_rep(got.data()), p);
}

// ECE (IBA 1.4's VendorID, Linux cm.c): 24 bits in REQ bytes 5..7, in REP
// the byte after each of QPN, EECN and PSN, in SIDR_REP bytes 6..7 and 11;
// the options travel in the header's AttributeModifier.
TEST(CmMad, EceGoldenBytes) {
  MadHeader h = header();
  h.attr_mod = 0x80000001;
  Req q;
  q.local_comm_id = 0x11223344;
  q.vendor_id = 0xabcdef;
  Mad want = golden_header(0x0010);
  put(want, 20, {0x80, 0, 0, 0x01});
  put(want, 24, {0x11, 0x22, 0x33, 0x44, 0x00, 0xab, 0xcd, 0xef});
  Mad got;
  got.fill(0xee);
  encode(h, q, got.data());
  expect_same(got, want);
  EXPECT_EQ(decode_req(got.data()), q);
  EXPECT_EQ(MadHeader::decode(got.data()).attr_mod, 0x80000001u);

  Rep p;
  p.local_qpn = 0x123456;
  p.local_eecn = 0x0;
  p.starting_psn = 0x654321;
  p.vendor_id = 0x0002c9;
  want = golden_header(0x0013);
  put(want, 20, {0x80, 0, 0, 0x01});
  put(want, 36, {0x12, 0x34, 0x56, 0x00, 0, 0, 0, 0x02, 0x65, 0x43, 0x21, 0xc9});
  got.fill(0xee);
  encode(h, p, got.data());
  expect_same(got, want);
  EXPECT_EQ(decode_rep(got.data()), p);

  SidrRep s;
  s.qpn = 0x000123;
  s.vendor_id = 0x0015b3;
  want = golden_header(0x0018);
  put(want, 20, {0x80, 0, 0, 0x01});
  put(want, 28, {0, 0, 0x00, 0x15, 0x00, 0x01, 0x23, 0xb3});
  got.fill(0xee);
  encode(h, s, got.data());
  expect_same(got, want);
  EXPECT_EQ(decode_sidr_rep(got.data()), s);
}

TEST(CmMad, CmaHeaderIpv4) {
  CmaHeader h;
  h.ip_version = 4;
  h.src_port = 0xabcd;
  h.src[12] = 127;
  h.src[15] = 1;
  h.dst[12] = 10;
  h.dst[15] = 2;
  uint8_t b[CmaHeader::kBytes];
  h.encode(b);
  const std::vector<uint8_t> want = {0, 0x40, 0xab, 0xcd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 127, 0, 0, 1,
                                     0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2};
  EXPECT_EQ(std::vector<uint8_t>(b, b + sizeof b), want);
  EXPECT_EQ(CmaHeader::decode(b), h);
}

TEST(CmMad, Timeouts) {
  EXPECT_EQ(timeout_ns(0), 4096u);
  EXPECT_EQ(timeout_ns(20), 4096ull << 20);  // about 4.3 s
  EXPECT_EQ(timeout_ns(40), 4096ull << 31);
}

}  // namespace
}  // namespace softverbs::wire::cm
