// The IP header's DSCP/ECN byte of a RoCEv2 datagram: the path's GRH traffic
// class (ah_attr.grh.traffic_class), as rxe and RoCE NICs put it there, so a
// switch's QoS classifies softverbs' traffic as it would theirs. Given per
// datagram as ancillary data (IP_TOS, IPV6_TCLASS) rather than per socket:
// QPs of any class share the fabric's sockets. Traffic class 0 adds nothing,
// so the common case sends exactly what it did. The ICRC masks the byte
// (src/wire/icrc.cc), as switches may rewrite it.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>

#include "wire/roce_udp.h"

namespace softverbs::fabric::udp {

// Fills `c`, a zeroed control message with room for an int, with the
// DSCP/ECN byte `tc`.
inline void write_tos_cmsg(wire::IpVersion version, uint8_t tc, cmsghdr* c) {
  c->cmsg_level = version == wire::IpVersion::kV4 ? IPPROTO_IP : IPPROTO_IPV6;
  c->cmsg_type = version == wire::IpVersion::kV4 ? IP_TOS : IPV6_TCLASS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int value = tc;
  std::memcpy(CMSG_DATA(c), &value, sizeof value);
}

class TosControl {
 public:
  // Points `m`'s control data at this (one buffer serves every message of a
  // batch: they share a traffic class). REQUIRES: this outlives the send.
  void attach(wire::IpVersion version, uint8_t tc, msghdr* m) {
    if (tc == 0) return;
    std::memset(buf_, 0, sizeof buf_);
    m->msg_control = buf_;
    m->msg_controllen = sizeof buf_;
    write_tos_cmsg(version, tc, CMSG_FIRSTHDR(m));
  }

 private:
  alignas(cmsghdr) unsigned char buf_[CMSG_SPACE(sizeof(int))];
};

}  // namespace softverbs::fabric::udp
