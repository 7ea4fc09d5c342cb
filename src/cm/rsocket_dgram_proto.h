// Datagram rsockets' wire headers (rdma-core librdmacm/rsocket.c, the ds_*
// part), as pure functions over bytes, so a softverbs host and rdma-core's
// librdmacm on hardware understand each other's datagrams.
//
//   1. Every datagram a UD QP carries starts with a DsHeader naming the
//      sender's address, since UD gives the receiver only a QPN:
//        IPv4 (8 bytes):  version 4, length 8,  port (be16), IPv4 address
//        IPv6 (24 bytes): version 6, length 24, port (be16), flowinfo (as
//                         sin6_flowinfo holds it), IPv6 address
//      The port, addresses and flowinfo are copied as the sockaddr holds
//      them (network byte order).
//   2. Until a sender knows the receiver's QPN it sends over UDP, to the
//      receiver's UDP socket (bound to the rsocket's address): a DsUdpHeader
//      then the data. Tag 0x55555555 (be32), version 4 or 6 (matching the
//      UDP source address's family), op (0 data, 7 control), length 16 or
//      28, a reserved byte, the sender's QPN (be32, low 24 bits), then 4 or
//      16 address bytes. The receiver answers a data message with a control
//      message carrying its own QPN, learns the sender's QPN, and hands the
//      data to its own QP with a DsHeader naming the UDP source.
//   3. rdma-core fills the IPv6 UDP header's 16 address bytes from the
//      DsHeader's flowinfo and the first 12 bytes of the address (it copies
//      16 bytes from the flowinfo field on); nobody reads them, but we write
//      the same bytes so the two stay byte-for-byte alike.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softverbs::cm::dsproto {

inline constexpr uint8_t kIpv4HdrLen = 8;   // DS_IPV4_HDR_LEN
inline constexpr uint8_t kIpv6HdrLen = 24;  // DS_IPV6_HDR_LEN
inline constexpr size_t kMaxHdrLen = kIpv6HdrLen;
inline constexpr uint32_t kUdpTag = 0x55555555;  // DS_UDP_TAG
inline constexpr uint8_t kUdpIpv4HdrLen = 16;    // DS_UDP_IPV4_HDR_LEN
inline constexpr uint8_t kUdpIpv6HdrLen = 28;    // DS_UDP_IPV6_HDR_LEN
inline constexpr size_t kMaxUdpHdrLen = kUdpIpv6HdrLen;
inline constexpr uint8_t kOpData = 0;  // RS_OP_DATA
inline constexpr uint8_t kOpCtrl = 7;  // RS_OP_CTRL
// The Q_Key of every datagram rsocket QP (RDMA_UDP_QKEY).
inline constexpr uint32_t kQkey = 0x01234567;

// Writes the DsHeader for `addr` (AF_INET or AF_INET6) into `out`; returns
// its length.
inline uint8_t format_header(const sockaddr* addr, uint8_t out[kMaxHdrLen]) {
  if (addr->sa_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(addr);
    out[0] = 4;
    out[1] = kIpv4HdrLen;
    std::memcpy(out + 2, &sin->sin_port, 2);
    std::memcpy(out + 4, &sin->sin_addr, 4);
    return kIpv4HdrLen;
  }
  const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(addr);
  out[0] = 6;
  out[1] = kIpv6HdrLen;
  std::memcpy(out + 2, &sin6->sin6_port, 2);
  std::memcpy(out + 4, &sin6->sin6_flowinfo, 4);
  std::memcpy(out + 8, &sin6->sin6_addr, 16);
  return kIpv6HdrLen;
}

// The header length a received datagram of `len` bytes (GRH excluded)
// starts with, or 0 if it starts with no valid DsHeader (ds_valid_recv).
inline uint8_t header_len(const uint8_t* p, size_t len) {
  if (len < kIpv4HdrLen) return 0;
  if (p[0] == 4 && p[1] == kIpv4HdrLen) return kIpv4HdrLen;
  if (p[0] == 6 && p[1] == kIpv6HdrLen && len >= kIpv6HdrLen) return kIpv6HdrLen;
  return 0;
}

// The sender's address a valid DsHeader names (ds_set_src).
inline void source_of(const uint8_t* hdr, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  if (hdr[0] == 4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(out);
    sin->sin_family = AF_INET;
    std::memcpy(&sin->sin_port, hdr + 2, 2);
    std::memcpy(&sin->sin_addr, hdr + 4, 4);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(out);
    sin6->sin6_family = AF_INET6;
    std::memcpy(&sin6->sin6_port, hdr + 2, 2);
    std::memcpy(&sin6->sin6_flowinfo, hdr + 4, 4);
    std::memcpy(&sin6->sin6_addr, hdr + 8, 16);
  }
}

struct UdpHeader {
  uint8_t version = 4;
  uint8_t op = kOpData;
  uint8_t length = kUdpIpv4HdrLen;
  uint32_t qpn = 0;
};

// The UDP header a QP whose DsHeader is `qp_hdr` sends; returns its length.
inline uint8_t format_udp_header(const uint8_t* qp_hdr, uint8_t op, uint32_t qpn, uint8_t out[kMaxUdpHdrLen]) {
  out[0] = uint8_t(kUdpTag >> 24);
  out[1] = uint8_t(kUdpTag >> 16);
  out[2] = uint8_t(kUdpTag >> 8);
  out[3] = uint8_t(kUdpTag);
  out[4] = qp_hdr[0];
  out[5] = op;
  out[7] = 0;
  qpn &= 0xFFFFFF;
  out[8] = uint8_t(qpn >> 24);
  out[9] = uint8_t(qpn >> 16);
  out[10] = uint8_t(qpn >> 8);
  out[11] = uint8_t(qpn);
  if (qp_hdr[0] == 4) {
    out[6] = kUdpIpv4HdrLen;
    std::memcpy(out + 12, qp_hdr + 4, 4);
    return kUdpIpv4HdrLen;
  }
  out[6] = kUdpIpv6HdrLen;
  std::memcpy(out + 12, qp_hdr + 4, 16);  // invariant 3: flowinfo + 12 address bytes
  return kUdpIpv6HdrLen;
}

// False unless `p` (`len` bytes from a UDP source of `family`) starts with a
// valid UDP header (udp_svc_valid_udp_hdr).
inline bool parse_udp_header(const uint8_t* p, size_t len, sa_family_t family, UdpHeader* h) {
  if (len < kUdpIpv4HdrLen) return false;
  const uint32_t tag = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
  if (tag != kUdpTag) return false;
  h->version = p[4];
  h->op = p[5];
  h->length = p[6];
  h->qpn = (uint32_t(p[8]) << 24 | uint32_t(p[9]) << 16 | uint32_t(p[10]) << 8 | p[11]) & 0xFFFFFF;
  const bool v4 = h->version == 4 && family == AF_INET && h->length == kUdpIpv4HdrLen;
  const bool v6 = h->version == 6 && family == AF_INET6 && h->length == kUdpIpv6HdrLen;
  return (v4 || v6) && len >= h->length;
}

}  // namespace softverbs::cm::dsproto
