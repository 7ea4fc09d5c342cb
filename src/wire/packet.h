// PacketView: one received IB transport packet, classified and validated
// once. PacketBuilder: the headers of one packet to send.
//
// Contract:
//   1. A packet here is the IB transport part of a RoCEv2 UDP payload: the
//      BTH, the opcode's extension headers, payload, 0..3 pad bytes and the
//      4-byte ICRC (IBA 9.2, 7.8). Its length is known; nothing past it is
//      ever read.
//   2. PacketView::parse() never reads out of bounds, whatever the bytes.
//      On failure error() says why and the view answers no header (every
//      decoder returns a zeroed struct, payload() is empty).
//   3. parse() does not check the ICRC (it needs the IP and UDP headers; see
//      icrc.h) nor anything that needs QP state (PSN window, opcode sequence,
//      FIRST/MIDDLE carrying exactly one MTU).
//   4. A PacketView borrows the bytes: it is valid while they are.
//   5. Value types, thread-compatible; no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/aeth.h"
#include "wire/atmack.h"
#include "wire/atmeth.h"
#include "wire/bth.h"
#include "wire/deth.h"
#include "wire/feth.h"
#include "wire/ieth.h"
#include "wire/immdt.h"
#include "wire/opcode.h"
#include "wire/reth.h"
#include "wire/xrceth.h"

namespace softverbs::wire {

enum class PacketError : uint8_t {
  kOk = 0,
  kTruncatedBth,        // fewer bytes than a BTH
  kUnknownOpcode,       // not an opcode of RC, UC or UD
  kUnsupportedOpcode,   // a named opcode softverbs does not accept (none at present)
  kBadTver,             // BTH TVer is not 0
  kTruncatedHeaders,    // shorter than the opcode's headers plus the ICRC
  kBadPadCount,         // pad exceeds the payload area or misaligns it
  kUnexpectedPayload,   // bytes between headers and ICRC for a payload-less opcode
  kPayloadExceedsMtu,   // more payload than the path MTU
  kBufferTooSmall,      // PacketBuilder: the packet does not fit the buffer
};

[[nodiscard]] const char* packet_error_name(PacketError e);

class PacketView {
 public:
  PacketView() = default;

  // Classifies `packet` (BTH through ICRC) and validates what the bytes alone
  // can tell. REQUIRES: path_mtu > 0 (pass the port's MTU for UD).
  [[nodiscard]] static PacketView parse(std::span<const uint8_t> packet, uint32_t path_mtu);

  [[nodiscard]] PacketError error() const { return error_; }
  [[nodiscard]] bool ok() const { return error_ == PacketError::kOk; }

  [[nodiscard]] const OpcodeInfo& info() const { return *info_; }
  [[nodiscard]] Opcode opcode() const { return opcode_; }
  [[nodiscard]] bool has(Header h) const { return info_->has(h); }

  [[nodiscard]] Bth bth() const { return ok() ? Bth::decode(data_) : Bth{}; }
  [[nodiscard]] Reth reth() const { return get<Reth>(Header::kReth); }
  [[nodiscard]] Aeth aeth() const { return get<Aeth>(Header::kAeth); }
  [[nodiscard]] AtomicEth atomic_eth() const { return get<AtomicEth>(Header::kAtomicEth); }
  [[nodiscard]] AtomicAckEth atomic_ack_eth() const {
    return get<AtomicAckEth>(Header::kAtomicAckEth);
  }
  [[nodiscard]] ImmDt immdt() const { return get<ImmDt>(Header::kImmDt); }
  [[nodiscard]] Ieth ieth() const { return get<Ieth>(Header::kIeth); }
  [[nodiscard]] Deth deth() const { return get<Deth>(Header::kDeth); }
  [[nodiscard]] Xrceth xrceth() const { return get<Xrceth>(Header::kXrceth); }
  [[nodiscard]] Feth feth() const { return get<Feth>(Header::kFeth); }

  [[nodiscard]] std::span<const uint8_t> payload() const { return {data_ + info_->length, payload_len_}; }
  [[nodiscard]] uint32_t payload_length() const { return payload_len_; }
  [[nodiscard]] uint8_t pad_count() const { return pad_; }
  // The whole packet, BTH through ICRC.
  [[nodiscard]] std::span<const uint8_t> bytes() const { return {data_, len_}; }

 private:
  template <class H>
  H get(Header h) const {
    return has(h) ? H::decode(data_ + info_->offset_of(h)) : H{};
  }

  static const OpcodeInfo kNone;  // what a failed view answers: no headers
  const uint8_t* data_ = nullptr;
  size_t len_ = 0;
  const OpcodeInfo* info_ = &kNone;
  Opcode opcode_ = Opcode::kRcSendOnly;
  uint32_t payload_len_ = 0;
  uint8_t pad_ = 0;
  PacketError error_ = PacketError::kTruncatedBth;
};

// The headers PacketBuilder writes; only those the BTH opcode carries are
// used. bth.pad_count and bth.tver are overwritten by the builder.
struct TransportHeaders {
  Bth bth;
  Reth reth;
  Aeth aeth;
  AtomicEth atomic_eth;
  AtomicAckEth atomic_ack_eth;
  ImmDt immdt;
  Ieth ieth;
  Deth deth;
  Xrceth xrceth;
  Feth feth;
};

// Bytes of the largest IB packet sent or accepted: a 4096-byte payload with
// the longest headers, pad and ICRC.
inline constexpr size_t kMaxPacketBytes = 4096 + 64;

// Pad bytes that align a payload to 4 bytes (IBA 9.2, PadCnt).
[[nodiscard]] constexpr uint8_t pad_for(uint32_t payload_len) {
  return static_cast<uint8_t>((4 - (payload_len & 3)) & 3);
}

class PacketBuilder {
 public:
  // REQUIRES: `buffer` outlives the builder.
  explicit PacketBuilder(std::span<uint8_t> buffer) : buf_(buffer) {}

  // Lays out a packet for h.bth.opcode with payload_len payload bytes at the
  // start of the buffer: writes BTH (pad count set, TVer 0) and every
  // extension header the opcode carries, zeroes the pad and the ICRC slot.
  // The caller then fills payload() and computes the ICRC (icrc.h).
  [[nodiscard]] PacketError build(const TransportHeaders& h, uint32_t payload_len);
  // As above, then copies `payload` in.
  [[nodiscard]] PacketError build(const TransportHeaders& h, std::span<const uint8_t> payload);

  // REQUIRES: the last build() returned kOk.
  [[nodiscard]] std::span<uint8_t> payload() const { return buf_.subspan(header_len_, payload_len_); }
  [[nodiscard]] size_t length() const { return length_; }  // BTH through ICRC
  [[nodiscard]] size_t icrc_offset() const { return length_ - kIcrcBytes; }
  [[nodiscard]] std::span<uint8_t> packet() const { return buf_.first(length_); }

  // Bytes a packet of this opcode and payload occupies, ICRC included; 0 if
  // the opcode is not valid.
  [[nodiscard]] static size_t packet_length(Opcode op, uint32_t payload_len);

 private:
  std::span<uint8_t> buf_;
  size_t header_len_ = 0;
  uint32_t payload_len_ = 0;
  size_t length_ = 0;
};

}  // namespace softverbs::wire
