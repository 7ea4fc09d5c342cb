#include "wire/packet.h"

#include <cstring>

namespace softverbs::wire {

const OpcodeInfo PacketView::kNone{};

const char* packet_error_name(PacketError e) {
  switch (e) {
    case PacketError::kOk: return "ok";
    case PacketError::kTruncatedBth: return "truncated BTH";
    case PacketError::kUnknownOpcode: return "unknown opcode";
    case PacketError::kUnsupportedOpcode: return "unsupported opcode";
    case PacketError::kBadTver: return "bad transport header version";
    case PacketError::kTruncatedHeaders: return "truncated headers";
    case PacketError::kBadPadCount: return "bad pad count";
    case PacketError::kUnexpectedPayload: return "payload on a payload-less opcode";
    case PacketError::kPayloadExceedsMtu: return "payload exceeds path MTU";
    case PacketError::kBufferTooSmall: return "buffer too small";
  }
  return "unknown error";
}

PacketView PacketView::parse(std::span<const uint8_t> packet, uint32_t path_mtu) {
  PacketView v;
  const uint8_t* p = packet.data();
  const size_t len = packet.size();
  if (len < kBthBytes) return v;  // error_ starts as kTruncatedBth

  v.opcode_ = bth_opcode(p);
  const OpcodeInfo& info = opcode_info(v.opcode_);
  if (!info.valid()) {
    v.error_ = info.name != nullptr ? PacketError::kUnsupportedOpcode : PacketError::kUnknownOpcode;
    return v;
  }
  // IBA 9.2 (TVer): a packet of another transport header version is dropped.
  if (bth_tver(p) != 0) {
    v.error_ = PacketError::kBadTver;
    return v;
  }
  if (len < size_t{info.length} + kIcrcBytes) {
    v.error_ = PacketError::kTruncatedHeaders;
    return v;
  }
  const size_t area = len - info.length - kIcrcBytes;  // payload plus pad
  const uint8_t pad = bth_pad_count(p);
  if (!info.is(OpFlag::kPayload) && area != 0) {
    v.error_ = PacketError::kUnexpectedPayload;
    return v;
  }
  // IBA 9.2 (PadCnt): pad makes the payload a whole number of 4-byte words,
  // so the pad lies inside the area and the area is word-aligned.
  if (pad > area || area % 4 != 0) {
    v.error_ = PacketError::kBadPadCount;
    return v;
  }
  const size_t payload = area - pad;
  // IBA 9.7 (RC), 9.8 (UC, UD): no packet carries more payload than the PMTU.
  if (payload > path_mtu) {
    v.error_ = PacketError::kPayloadExceedsMtu;
    return v;
  }
  v.data_ = p;
  v.len_ = len;
  v.info_ = &info;
  v.payload_len_ = static_cast<uint32_t>(payload);
  v.pad_ = pad;
  v.error_ = PacketError::kOk;
  return v;
}

size_t PacketBuilder::packet_length(Opcode op, uint32_t payload_len) {
  const OpcodeInfo& info = opcode_info(op);
  if (!info.valid()) return 0;
  return size_t{info.length} + payload_len + pad_for(payload_len) + kIcrcBytes;
}

PacketError PacketBuilder::build(const TransportHeaders& h, uint32_t payload_len) {
  length_ = 0;
  const OpcodeInfo& info = opcode_info(h.bth.opcode);
  if (!info.valid())
    return info.name != nullptr ? PacketError::kUnsupportedOpcode : PacketError::kUnknownOpcode;
  if (!info.is(OpFlag::kPayload) && payload_len != 0) return PacketError::kUnexpectedPayload;
  const size_t total = packet_length(h.bth.opcode, payload_len);
  if (total > buf_.size()) return PacketError::kBufferTooSmall;

  uint8_t* p = buf_.data();
  // Only a FLUSH has a FETH; for every other opcode its offset is 0 and the
  // BTH written next covers it: no branch on the packets that are sent.
  h.feth.encode(p + info.offset_of(Header::kFeth));
  Bth bth = h.bth;
  bth.pad_count = pad_for(payload_len);
  bth.tver = 0;  // IBA 9.2: version 0
  bth.encode(p);
  if (info.has(Header::kDeth)) h.deth.encode(p + info.offset_of(Header::kDeth));
  if (info.has(Header::kXrceth)) h.xrceth.encode(p + info.offset_of(Header::kXrceth));
  if (info.has(Header::kReth)) h.reth.encode(p + info.offset_of(Header::kReth));
  if (info.has(Header::kAtomicEth)) h.atomic_eth.encode(p + info.offset_of(Header::kAtomicEth));
  if (info.has(Header::kAeth)) h.aeth.encode(p + info.offset_of(Header::kAeth));
  if (info.has(Header::kAtomicAckEth))
    h.atomic_ack_eth.encode(p + info.offset_of(Header::kAtomicAckEth));
  if (info.has(Header::kImmDt)) h.immdt.encode(p + info.offset_of(Header::kImmDt));
  if (info.has(Header::kIeth)) h.ieth.encode(p + info.offset_of(Header::kIeth));

  header_len_ = info.length;
  payload_len_ = payload_len;
  length_ = total;
  // Pad bytes are sent as zero (IBA 9.2 PadCnt); the ICRC slot starts zeroed.
  std::memset(p + header_len_ + payload_len_, 0, total - header_len_ - payload_len_);
  return PacketError::kOk;
}

PacketError PacketBuilder::build(const TransportHeaders& h, std::span<const uint8_t> payload) {
  if (payload.size() > UINT32_MAX) return PacketError::kBufferTooSmall;
  const PacketError e = build(h, static_cast<uint32_t>(payload.size()));
  if (e != PacketError::kOk) return e;
  if (!payload.empty()) std::memcpy(buf_.data() + header_len_, payload.data(), payload.size());
  return PacketError::kOk;
}

}  // namespace softverbs::wire
