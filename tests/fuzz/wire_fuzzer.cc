// libFuzzer target for the receive path's parsers: wire::roce_parse (the
// bytes after the Ethernet header) and wire::PacketView::parse (the UDP
// payload), with the ICRC check behind them.
//
// Each input is tried three ways, so one corpus serves all of them:
//   1. as a whole IP datagram, as a UDP socket's raw neighbour would see it;
//   2. as a bare IB packet (what a UDP socket hands the fabric), at several
//      path MTUs;
//   3. as a bare IB packet that we frame ourselves (IPv4 and IPv6), which
//      must then parse back to exactly itself: the fuzzer gets past the IP
//      checksum and length checks that would stop it in (1).
// Any broken invariant aborts, which libFuzzer reports as a finding; the
// sanitizers catch reads outside the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/packet.h"
#include "wire/roce_udp.h"

namespace softverbs::wire {
namespace {

[[noreturn]] void broken(const char* what, int line) {
  std::fprintf(stderr, "wire_fuzzer: invariant broken (line %d): %s\n", line, what);
  std::abort();
}
#define CHECK(cond)                      \
  do {                                   \
    if (!(cond)) broken(#cond, __LINE__); \
  } while (0)

bool inside(std::span<const uint8_t> inner, std::span<const uint8_t> outer) {
  return inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

bool same_bytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

TransportHeaders headers_of(const PacketView& v) {
  TransportHeaders h;
  h.bth = v.bth();
  h.reth = v.reth();
  h.aeth = v.aeth();
  h.atomic_eth = v.atomic_eth();
  h.atomic_ack_eth = v.atomic_ack_eth();
  h.immdt = v.immdt();
  h.ieth = v.ieth();
  h.deth = v.deth();
  h.feth = v.feth();
  return h;
}

bool same_headers(const TransportHeaders& a, const TransportHeaders& b) {
  return a.bth == b.bth && a.reth == b.reth && a.aeth == b.aeth && a.atomic_eth == b.atomic_eth &&
         a.atomic_ack_eth == b.atomic_ack_eth && a.immdt == b.immdt && a.ieth == b.ieth &&
         a.deth == b.deth && a.feth == b.feth;
}

// What a failed view must answer (packet.h contract 2).
void check_failed_view(const PacketView& v) {
  CHECK(!v.ok());
  CHECK(packet_error_name(v.error()) != nullptr);
  const TransportHeaders none;
  CHECK(same_headers(headers_of(v), none));
  CHECK(v.payload().empty());
  CHECK(v.payload_length() == 0);
  CHECK(v.bytes().empty());
}

// Everything a good view claims, checked against the bytes it came from.
void check_good_view(const PacketView& v, std::span<const uint8_t> ib, uint32_t mtu) {
  const OpcodeInfo& info = v.info();
  CHECK(info.valid());
  CHECK(info.name != nullptr);
  CHECK(&info == &opcode_info(v.opcode()));
  CHECK(v.opcode() == bth_opcode(ib.data()));
  CHECK(v.bytes().data() == ib.data() && v.bytes().size() == ib.size());

  const TransportHeaders h = headers_of(v);
  CHECK(h.bth.opcode == v.opcode());
  CHECK(h.bth.tver == 0);
  CHECK(h.bth.pad_count == v.pad_count());
  CHECK(h.bth.psn == bth_psn(ib.data()));
  CHECK(h.bth.dest_qp == bth_dest_qp(ib.data()));

  // Lengths: headers + payload + pad + ICRC is the packet, 4-byte aligned.
  CHECK(size_t{info.length} + v.payload_length() + v.pad_count() + kIcrcBytes == ib.size());
  CHECK(ib.size() % 4 == 0);
  CHECK(v.pad_count() <= 3);
  CHECK(v.payload_length() <= mtu);
  CHECK(info.is(OpFlag::kPayload) || v.payload_length() == 0);
  CHECK(v.payload().size() == v.payload_length());
  CHECK(v.payload().data() == ib.data() + info.length);
  CHECK(inside(v.payload(), ib.first(ib.size() - kIcrcBytes - v.pad_count())));

  // A header the opcode lacks decodes as the default; one it has lies
  // inside the header area.
  const TransportHeaders none;
  for (size_t i = 0; i < kHeaderCount; ++i) {
    const Header hd = static_cast<Header>(i);
    if (info.has(hd)) CHECK(info.offset_of(hd) + kHeaderBytes[i] <= info.length);
  }
  if (!info.has(Header::kReth)) CHECK(h.reth == none.reth);
  if (!info.has(Header::kAeth)) CHECK(h.aeth == none.aeth);
  if (!info.has(Header::kAtomicEth)) CHECK(h.atomic_eth == none.atomic_eth);
  if (!info.has(Header::kAtomicAckEth)) CHECK(h.atomic_ack_eth == none.atomic_ack_eth);
  if (!info.has(Header::kImmDt)) CHECK(h.immdt == none.immdt);
  if (!info.has(Header::kIeth)) CHECK(h.ieth == none.ieth);
  if (!info.has(Header::kDeth)) CHECK(h.deth == none.deth);
  if (!info.has(Header::kFeth)) CHECK(h.feth == none.feth);
  // Touch every decoded field the responder would use, so the sanitizers
  // see each read.
  volatile uint64_t sink = h.reth.va ^ h.reth.rkey ^ h.reth.dma_length ^ h.aeth.syndrome ^
                           h.aeth.msn ^ h.atomic_eth.va ^ h.atomic_eth.swap_add ^
                           h.atomic_eth.compare ^ h.atomic_ack_eth.orig ^ h.immdt.value ^
                           h.ieth.rkey ^ h.deth.qkey ^ h.deth.src_qp ^ h.feth.placement ^ h.feth.selectivity;
  for (uint8_t b : v.payload()) sink = sink + b;
  (void)sink;
  (void)h.aeth.type();

  // parse(re-encode(x)) == x: the builder rebuilds the packet from the
  // decoded headers and payload, the rebuild parses to the same thing, and
  // rebuilding that is byte-identical (reserved bits and pad bytes are the
  // only things allowed to differ from the input, and they are gone).
  std::vector<uint8_t> again(ib.size());
  PacketBuilder b(again);
  CHECK(PacketBuilder::packet_length(v.opcode(), v.payload_length()) == ib.size());
  CHECK(b.build(h, v.payload()) == PacketError::kOk);
  CHECK(b.length() == ib.size());
  const PacketView w = PacketView::parse(b.packet(), mtu);
  CHECK(w.ok());
  CHECK(w.opcode() == v.opcode());
  CHECK(same_headers(headers_of(w), h));
  CHECK(same_bytes(w.payload(), v.payload()));
  CHECK(w.pad_count() == v.pad_count());
  // Outside pad and ICRC the input equals its rebuild up to reserved bits,
  // which only ever read as zero: the rebuild has no bit the input lacks.
  for (size_t i = 0; i < ib.size() - kIcrcBytes - v.pad_count(); ++i)
    CHECK((again[i] & ~ib[i]) == 0);
  std::vector<uint8_t> third(ib.size());
  PacketBuilder b3(third);
  CHECK(b3.build(headers_of(w), w.payload()) == PacketError::kOk);
  CHECK(third == again);
}

void parse_ib(std::span<const uint8_t> ib) {
  static constexpr uint32_t kMtus[] = {1, 256, 1024, 4096, 65536};
  bool was_ok = false;
  for (uint32_t mtu : kMtus) {
    const PacketView v = PacketView::parse(ib, mtu);
    if (!v.ok()) {
      // A larger MTU only ever accepts more.
      CHECK(!was_ok);
      check_failed_view(v);
      continue;
    }
    was_ok = true;
    check_good_view(v, ib, mtu);
  }
}

// The IB packet `ib` framed by roce_encapsulate must come back out of
// roce_parse unchanged, with a good ICRC.
void frame_and_parse(std::span<const uint8_t> ib, IpVersion version, UdpChecksum sum) {
  if (ib.size() < kBthBytes + kIcrcBytes) return;  // no room for an ICRC
  RoceUdpHeader h;
  h.version = version;
  h.src = version == IpVersion::kV4 ? gid_from_ipv4(10, 0, 0, 1)
                                    : Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  h.dst = version == IpVersion::kV4 ? gid_from_ipv4(10, 0, 0, 2)
                                    : Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1};
  h.traffic_class = ib[0];
  h.flow_label = 0x12345;
  h.ipv4_id = 7;
  h.src_port = static_cast<uint16_t>(0xc000 | ib.size());
  h.udp_checksum = sum;
  const size_t head = encap_length(version);
  std::vector<uint8_t> dg(head + ib.size());
  std::memcpy(dg.data() + head, ib.data(), ib.size());
  const EncapError e = roce_encapsulate(dg, h);
  if (dg.size() > 0xffff) {
    CHECK(e == EncapError::kTooLong);
    return;
  }
  CHECK(e == EncapError::kOk);
  CHECK(icrc_check(dg) == IcrcStatus::kOk);

  const RoceDatagram d = roce_parse(dg);
  CHECK(d.error == EncapError::kOk);
  CHECK(d.datagram.data() == dg.data() && d.datagram.size() == dg.size());
  // The IB part is the input, ICRC slot aside (encapsulate filled it in).
  CHECK(d.ib.size() == ib.size());
  CHECK(same_bytes(d.ib.first(ib.size() - kIcrcBytes), ib.first(ib.size() - kIcrcBytes)));
  CHECK(d.header.version == h.version && d.header.src == h.src && d.header.dst == h.dst);
  CHECK(d.header.traffic_class == h.traffic_class && d.header.hop_limit == h.hop_limit);
  CHECK(d.header.src_port == h.src_port && d.header.dst_port == h.dst_port);
  if (version == IpVersion::kV6) CHECK(d.header.flow_label == h.flow_label);
  if (version == IpVersion::kV4) CHECK(d.header.ipv4_id == h.ipv4_id);
  CHECK((d.header.udp_checksum_value != 0) ==
        (sum == UdpChecksum::kCompute || (sum == UdpChecksum::kAuto && version == IpVersion::kV6)));

  // One flipped bit anywhere the ICRC covers must be caught by it (icrc.h
  // contract 1 lists the masked bytes; IPv6 byte 0 is skipped whole, as
  // only its low nibble is masked).
  const size_t bit = (ib.size() * 7919) % ((dg.size() - kIcrcBytes) * 8);
  const size_t byte = bit / 8;
  const bool variant = byte == 1 || (version == IpVersion::kV4 && (byte == 8 || byte == 10 || byte == 11)) ||
                       (version == IpVersion::kV6 && (byte <= 3 || byte == 7)) ||
                       byte == head - 2 || byte == head - 1 || byte == head + 4;
  if (!variant) {
    dg[byte] ^= static_cast<uint8_t>(1u << (bit % 8));
    CHECK(icrc_check(dg) != IcrcStatus::kOk);
  }
}

void parse_datagram(std::span<const uint8_t> bytes) {
  const RoceDatagram d = roce_parse(bytes);
  CHECK(encap_error_name(d.error) != nullptr);
  if (d.error != EncapError::kOk) {
    CHECK(d.datagram.empty() && d.ib.empty());
    return;
  }
  // Framing: the datagram is a prefix of the input (link padding may
  // follow), the IB part its tail after IP and UDP.
  CHECK(d.datagram.data() == bytes.data() && d.datagram.size() <= bytes.size());
  CHECK(inside(d.ib, d.datagram));
  CHECK(d.ib.data() + d.ib.size() == d.datagram.data() + d.datagram.size());
  const size_t head = d.datagram.size() - d.ib.size();
  CHECK(head == ip_udp_header_length(d.datagram));
  CHECK(d.header.version == (head == kIpv6HeaderBytes + kUdpHeaderBytes ? IpVersion::kV6
                                                                        : IpVersion::kV4));
  CHECK(d.header.dst_port == kRoceV2Port);

  const IcrcStatus icrc = icrc_check(d.datagram);
  CHECK(icrc == IcrcStatus::kMalformed || d.ib.size() >= kBthBytes + kIcrcBytes);
  CHECK(icrc != IcrcStatus::kMalformed || d.ib.size() < kBthBytes + kIcrcBytes);
  parse_ib(d.ib);

  // Re-encoding what was parsed gives back the same ICRC exactly when the
  // input's ICRC was right: the encapsulation keeps every covered byte. Only
  // plain headers qualify (no IPv4 options, no reserved flag bit set).
  const bool plain = head == encap_length(d.header.version) &&
                     (d.header.version == IpVersion::kV6 || (bytes[6] & 0x80) == 0);
  if (icrc == IcrcStatus::kMalformed || !plain) return;
  std::vector<uint8_t> dg(d.datagram.begin(), d.datagram.end());
  RoceUdpHeader h = d.header;
  h.udp_checksum = h.udp_checksum_value == 0 ? UdpChecksum::kZero : UdpChecksum::kCompute;
  CHECK(roce_encapsulate(dg, h) == EncapError::kOk);
  const bool same_icrc = same_bytes(std::span(dg).last(kIcrcBytes), d.datagram.last(kIcrcBytes));
  CHECK(same_icrc == (icrc == IcrcStatus::kOk));
  const RoceDatagram again = roce_parse(dg);
  CHECK(again.error == EncapError::kOk);
  CHECK(again.datagram.size() == d.datagram.size());
}

}  // namespace
}  // namespace softverbs::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace softverbs::wire;
  const std::span<const uint8_t> in(data, size);
  parse_datagram(in);
  parse_ib(in);
  frame_and_parse(in, IpVersion::kV4, UdpChecksum::kAuto);
  frame_and_parse(in, IpVersion::kV6, UdpChecksum::kAuto);
  frame_and_parse(in, IpVersion::kV4, UdpChecksum::kCompute);
  return 0;
}
