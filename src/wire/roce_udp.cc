#include "wire/roce_udp.h"

#include <cstring>

#include "wire/field.h"
#include "wire/icrc.h"

namespace softverbs::wire {
namespace {

constexpr uint8_t kProtoUdp = 17;

// RFC 791 IPv4 header.
namespace v4 {
using Version = Field<0, 0, 4>;
using Ihl = Field<0, 4, 4>;
using Tos = BeField<1, 1>;
using TotalLength = BeField<2, 2>;
using Id = BeField<4, 2>;
using DontFragment = Field<6, 1, 1>;
using MoreFragments = Field<6, 2, 1>;
using FragmentOffset = Field<6, 3, 13>;
using Ttl = BeField<8, 1>;
using Protocol = BeField<9, 1>;
using Checksum = BeField<10, 2>;
constexpr size_t kSrc = 12;
constexpr size_t kDst = 16;
}  // namespace v4

// RFC 8200 IPv6 header.
namespace v6 {
using Version = Field<0, 0, 4>;
using TrafficClass = Field<0, 4, 8>;
using FlowLabel = Field<1, 4, 20>;
using PayloadLength = BeField<4, 2>;
using NextHeader = BeField<6, 1>;
using HopLimit = BeField<7, 1>;
constexpr size_t kSrc = 8;
constexpr size_t kDst = 24;
}  // namespace v6

// RFC 768 UDP header.
namespace udp {
using SrcPort = BeField<0, 2>;
using DstPort = BeField<2, 2>;
using Length = BeField<4, 2>;
using Checksum = BeField<6, 2>;
}  // namespace udp

// RFC 1071 one's-complement sum of 16-bit big-endian words, not yet folded.
uint64_t sum16(const uint8_t* p, size_t n, uint64_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += uint64_t{p[i]} << 8 | p[i + 1];
  if (n % 2 != 0) acc += uint64_t{p[n - 1]} << 8;
  return acc;
}

uint16_t fold(uint64_t acc) {
  while (acc >> 16 != 0) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

// The UDP checksum field value for `seg` (UDP header + data, checksum field
// as it stands), over the IPv4 or IPv6 pseudo header. Returns the folded sum:
// 0xffff means "verifies" when the field is filled in.
uint16_t udp_sum(IpVersion v, const uint8_t* ip, std::span<const uint8_t> seg) {
  uint64_t acc = 0;
  if (v == IpVersion::kV4) {
    acc = sum16(ip + v4::kSrc, 8);  // source and destination addresses
  } else {
    acc = sum16(ip + v6::kSrc, 32);
  }
  acc += kProtoUdp + seg.size();  // RFC 768 / RFC 8200 8.1: protocol and length
  return fold(sum16(seg.data(), seg.size(), acc));
}

void write_ipv4(uint8_t* ip, const RoceUdpHeader& h, size_t total) {
  std::memset(ip, 0, kIpv4HeaderBytes);
  v4::Version::set(ip, 4);
  v4::Ihl::set(ip, kIpv4HeaderBytes / 4);
  v4::Tos::set(ip, h.traffic_class);
  v4::TotalLength::set(ip, total);
  v4::Id::set(ip, h.ipv4_id);
  v4::DontFragment::set(ip, h.dont_fragment);
  v4::Ttl::set(ip, h.hop_limit);
  v4::Protocol::set(ip, kProtoUdp);
  std::memcpy(ip + v4::kSrc, h.src.data() + 12, 4);
  std::memcpy(ip + v4::kDst, h.dst.data() + 12, 4);
  v4::Checksum::set(ip, static_cast<uint16_t>(~fold(sum16(ip, kIpv4HeaderBytes))));
}

void write_ipv6(uint8_t* ip, const RoceUdpHeader& h, size_t payload) {
  std::memset(ip, 0, kIpv6HeaderBytes);
  v6::Version::set(ip, 6);
  v6::TrafficClass::set(ip, h.traffic_class);
  v6::FlowLabel::set(ip, h.flow_label);
  v6::PayloadLength::set(ip, payload);
  v6::NextHeader::set(ip, kProtoUdp);
  v6::HopLimit::set(ip, h.hop_limit);
  std::memcpy(ip + v6::kSrc, h.src.data(), 16);
  std::memcpy(ip + v6::kDst, h.dst.data(), 16);
}

RoceDatagram fail(EncapError e) {
  RoceDatagram d;
  d.error = e;
  return d;
}

}  // namespace

const char* encap_error_name(EncapError e) {
  switch (e) {
    case EncapError::kOk: return "ok";
    case EncapError::kTruncated: return "truncated";
    case EncapError::kBadIpVersion: return "bad IP version";
    case EncapError::kBadIpHeaderLength: return "bad IPv4 header length";
    case EncapError::kBadIpChecksum: return "bad IPv4 header checksum";
    case EncapError::kFragmented: return "fragmented";
    case EncapError::kNotUdp: return "not UDP";
    case EncapError::kBadUdpLength: return "bad UDP length";
    case EncapError::kWrongPort: return "wrong UDP port";
    case EncapError::kBadUdpChecksum: return "bad UDP checksum";
    case EncapError::kTooLong: return "datagram too long";
    case EncapError::kIcrc: return "IB packet too short for an ICRC";
  }
  return "unknown error";
}

size_t roce_write_headers(std::span<uint8_t> out, const RoceUdpHeader& h, size_t ib_length) {
  const size_t head = encap_length(h.version);
  const size_t ip_len = head - kUdpHeaderBytes;
  if (out.size() < head || head + ib_length > 0xffff) return 0;
  uint8_t* ip = out.data();
  const size_t udp_len = kUdpHeaderBytes + ib_length;
  if (h.version == IpVersion::kV4)
    write_ipv4(ip, h, head + ib_length);
  else
    write_ipv6(ip, h, udp_len);
  uint8_t* u = ip + ip_len;
  udp::SrcPort::set(u, h.src_port);
  udp::DstPort::set(u, h.dst_port);
  udp::Length::set(u, udp_len);
  udp::Checksum::set(u, 0);
  return head;
}

EncapError roce_encapsulate(std::span<uint8_t> datagram, const RoceUdpHeader& h) {
  const size_t head = encap_length(h.version);
  const size_t ip_len = head - kUdpHeaderBytes;
  if (datagram.size() > 0xffff) return EncapError::kTooLong;
  if (datagram.size() < head) return EncapError::kTruncated;
  uint8_t* ip = datagram.data();
  const size_t udp_len = datagram.size() - ip_len;
  if (h.version == IpVersion::kV4)
    write_ipv4(ip, h, datagram.size());
  else
    write_ipv6(ip, h, udp_len);

  uint8_t* u = ip + ip_len;
  udp::SrcPort::set(u, h.src_port);
  udp::DstPort::set(u, h.dst_port);
  udp::Length::set(u, udp_len);
  udp::Checksum::set(u, 0);

  // The ICRC masks the UDP checksum, so it may be computed first; the UDP
  // checksum covers the ICRC, so it must come last.
  if (icrc_generate(datagram) != IcrcStatus::kOk) return EncapError::kIcrc;

  const bool want_sum = h.udp_checksum == UdpChecksum::kCompute ||
                        (h.udp_checksum == UdpChecksum::kAuto && h.version == IpVersion::kV6);
  if (want_sum) {
    uint16_t sum = static_cast<uint16_t>(~udp_sum(h.version, ip, {u, udp_len}));
    if (sum == 0) sum = 0xffff;  // RFC 768: a computed zero is sent as all ones
    udp::Checksum::set(u, sum);
  }
  return EncapError::kOk;
}

RoceDatagram roce_parse(std::span<const uint8_t> bytes, uint16_t dst_port) {
  if (bytes.empty()) return fail(EncapError::kTruncated);
  const uint8_t* ip = bytes.data();
  RoceDatagram d;
  RoceUdpHeader& h = d.header;
  size_t ip_len = 0;
  size_t total = 0;
  switch (ip[0] >> 4) {
    case 4: {
      if (bytes.size() < kIpv4HeaderBytes) return fail(EncapError::kTruncated);
      ip_len = size_t{v4::Ihl::get(ip)} * 4;
      if (ip_len < kIpv4HeaderBytes) return fail(EncapError::kBadIpHeaderLength);
      if (bytes.size() < ip_len) return fail(EncapError::kTruncated);
      if (fold(sum16(ip, ip_len)) != 0xffff) return fail(EncapError::kBadIpChecksum);
      total = v4::TotalLength::get(ip);
      if (v4::MoreFragments::get(ip) != 0 || v4::FragmentOffset::get(ip) != 0)
        return fail(EncapError::kFragmented);
      if (v4::Protocol::get(ip) != kProtoUdp) return fail(EncapError::kNotUdp);
      h.version = IpVersion::kV4;
      h.traffic_class = v4::Tos::get(ip);
      h.hop_limit = v4::Ttl::get(ip);
      h.ipv4_id = v4::Id::get(ip);
      h.dont_fragment = v4::DontFragment::get(ip) != 0;
      h.src = gid_from_ipv4(ip[v4::kSrc], ip[v4::kSrc + 1], ip[v4::kSrc + 2], ip[v4::kSrc + 3]);
      h.dst = gid_from_ipv4(ip[v4::kDst], ip[v4::kDst + 1], ip[v4::kDst + 2], ip[v4::kDst + 3]);
      break;
    }
    case 6: {
      if (bytes.size() < kIpv6HeaderBytes) return fail(EncapError::kTruncated);
      ip_len = kIpv6HeaderBytes;
      total = ip_len + v6::PayloadLength::get(ip);
      // Extension headers (and jumbograms) are not RoCEv2 traffic we accept.
      if (v6::NextHeader::get(ip) != kProtoUdp) return fail(EncapError::kNotUdp);
      h.version = IpVersion::kV6;
      h.traffic_class = v6::TrafficClass::get(ip);
      h.flow_label = v6::FlowLabel::get(ip);
      h.hop_limit = v6::HopLimit::get(ip);
      std::memcpy(h.src.data(), ip + v6::kSrc, 16);
      std::memcpy(h.dst.data(), ip + v6::kDst, 16);
      break;
    }
    default:
      return fail(EncapError::kBadIpVersion);
  }
  if (total < ip_len + kUdpHeaderBytes || total > bytes.size()) return fail(EncapError::kTruncated);

  const uint8_t* u = ip + ip_len;
  const size_t udp_len = total - ip_len;
  if (udp::Length::get(u) != udp_len) return fail(EncapError::kBadUdpLength);
  h.src_port = udp::SrcPort::get(u);
  h.dst_port = udp::DstPort::get(u);
  if (h.dst_port != dst_port) return fail(EncapError::kWrongPort);
  h.udp_checksum_value = udp::Checksum::get(u);
  h.udp_checksum = h.udp_checksum_value == 0 ? UdpChecksum::kZero : UdpChecksum::kCompute;
  if (h.udp_checksum_value != 0 && udp_sum(h.version, ip, {u, udp_len}) != 0xffff)
    return fail(EncapError::kBadUdpChecksum);

  d.datagram = bytes.first(total);
  d.ib = bytes.subspan(ip_len + kUdpHeaderBytes, udp_len - kUdpHeaderBytes);
  d.error = EncapError::kOk;
  return d;
}

}  // namespace softverbs::wire
