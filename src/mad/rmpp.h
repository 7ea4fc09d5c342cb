// Whole-message RMPP (IBA 13.6) as the kernel's MAD layer presents it to
// userspace (drivers/infiniband/core/mad_rmpp.c, user_mad.c): an agent
// registered with RMPP version 1 hands umad_send a message longer than one
// MAD (its class header, then all the data), the kernel cuts it into
// segments, and the receiving agent, also registered with RMPP, reads the
// reassembled message in one piece: the first segment's MAD (its RMPP
// header as the sender's kernel wrote it) followed by every segment's data.
// Between processes on one port nothing is cut: these functions give the
// bytes and length the receiver would see.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mad/mad_layout.h"

namespace softverbs::mad {

// IBA 13.6.2.1 RMPP header, after the common MAD header.
using RmppVersion = BeField<24, 1>;
using RmppType = BeField<25, 1>;
using RmppRespTime = Field<26, 0, 5>;
using RmppFlags = Field<26, 5, 3>;
using RmppStatus = BeField<27, 1>;
using RmppSegmentNumber = BeField<28, 4>;
using RmppPayloadLength = BeField<32, 4>;  // PayloadLength / NewWindowLast
inline constexpr size_t kRmppHeaderEnd = 36;
inline constexpr uint8_t kRmppTypeData = 1;
inline constexpr uint8_t kRmppFlagActive = 1;
inline constexpr uint8_t kRmppFlagFirst = 2;
inline constexpr uint8_t kRmppFlagLast = 4;

// The classes that carry an RMPP header (mad.c's ib_is_mad_class_rmpp):
// SA, device management, BIS, vendor range 2.
bool rmpp_class(uint8_t mgmt_class);
// Where a class's data starts, its header repeated in every segment
// (ib_get_mad_data_offset): SA 56, vendor range 2 40, device management 64.
size_t class_header_bytes(uint8_t mgmt_class);

struct RmppSend {
  int error = 0;        // EINVAL: the kernel's write() would refuse it
  bool active = false;  // an RMPP transfer (the sender set the Active flag)
  size_t length = 0;    // the message's bytes as sent (class header + data)
};

// What umad_send of `len` bytes at `mad` by an agent with `rmpp_version`
// becomes: at most kMadBytes without RMPP; with it, an Active message of any
// length (at least its class header), whose RMPP header is then the first
// segment's (version, Data, Active|First[|Last], segment 1, PayloadLength
// of the whole transfer, every segment's class header counted), or a
// single MAD whose RMPP header the kernel leaves zero (its copy starts after
// it). REQUIRES: `mad` holds max(len, kMadBytes) bytes, zero past len.
RmppSend prepare_send(uint8_t* mad, size_t len, uint8_t rmpp_version);

// The length the receiving agent reads of a message `send` produced: the
// whole message for an RMPP receiver of an Active one, else one MAD; 0 when
// the receiver cannot take it (a multi-segment message for an agent without
// RMPP, which would have to run the protocol itself).
size_t received_length(const RmppSend& send, bool receiver_rmpp);

}  // namespace softverbs::mad
