// The opcode table: the single source of truth about every BTH opcode.
//
// Contract:
//   1. Opcode mirrors the IBTA OpCode field (IBA 9.2): the top three bits
//      name the transport (RC 0x00, UC 0x20, RD 0x40, UD 0x60, CNP 0x80,
//      XRC 0xA0), the low five bits the operation.
//   2. opcode_info(op) is valid for all 256 byte values. An entry whose
//      flags lack OpFlag::kValid is an opcode softverbs does not accept on
//      the wire: undefined codes (RD's included — softverbs has no RD QPs)
//      have name == nullptr.
//   3. Header offsets are counted from the first byte of the BTH; a header
//      the opcode does not carry has offset 0. length is BTH plus every
//      extension header, i.e. where the payload starts.
//   4. The table is built at compile time from a compact per-opcode
//      description (opcode.cc) and is immutable: thread-safe to read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace softverbs::wire {

enum class Opcode : uint8_t {
  // IBA 9.2 OpCode values: Reliable Connection.
  kRcSendFirst = 0x00,
  kRcSendMiddle = 0x01,
  kRcSendLast = 0x02,
  kRcSendLastWithImmediate = 0x03,
  kRcSendOnly = 0x04,
  kRcSendOnlyWithImmediate = 0x05,
  kRcRdmaWriteFirst = 0x06,
  kRcRdmaWriteMiddle = 0x07,
  kRcRdmaWriteLast = 0x08,
  kRcRdmaWriteLastWithImmediate = 0x09,
  kRcRdmaWriteOnly = 0x0a,
  kRcRdmaWriteOnlyWithImmediate = 0x0b,
  kRcRdmaReadRequest = 0x0c,
  kRcRdmaReadResponseFirst = 0x0d,
  kRcRdmaReadResponseMiddle = 0x0e,
  kRcRdmaReadResponseLast = 0x0f,
  kRcRdmaReadResponseOnly = 0x10,
  kRcAcknowledge = 0x11,
  kRcAtomicAcknowledge = 0x12,
  kRcCompareSwap = 0x13,
  kRcFetchAdd = 0x14,
  kRcSendLastWithInvalidate = 0x16,
  kRcSendOnlyWithInvalidate = 0x17,
  kRcFlush = 0x1c,        // IBA 1.5: answered here, never sent (rdma-core 44 has no verb)
  kRcAtomicWrite = 0x1d,  // IBA 1.5: eight bytes stored as one

  // Unreliable Connection: sends and writes only.
  kUcSendFirst = 0x20,
  kUcSendMiddle = 0x21,
  kUcSendLast = 0x22,
  kUcSendLastWithImmediate = 0x23,
  kUcSendOnly = 0x24,
  kUcSendOnlyWithImmediate = 0x25,
  kUcRdmaWriteFirst = 0x26,
  kUcRdmaWriteMiddle = 0x27,
  kUcRdmaWriteLast = 0x28,
  kUcRdmaWriteLastWithImmediate = 0x29,
  kUcRdmaWriteOnly = 0x2a,
  kUcRdmaWriteOnlyWithImmediate = 0x2b,

  // Unreliable Datagram: single-packet sends.
  kUdSendOnly = 0x64,
  kUdSendOnlyWithImmediate = 0x65,

  // Extended Reliable Connection (IBA Annex A14): RC's codes; requests carry an XRCETH.
  kXrcSendFirst = 0xa0,
  kXrcSendMiddle = 0xa1,
  kXrcSendLast = 0xa2,
  kXrcSendLastWithImmediate = 0xa3,
  kXrcSendOnly = 0xa4,
  kXrcSendOnlyWithImmediate = 0xa5,
  kXrcRdmaWriteFirst = 0xa6,
  kXrcRdmaWriteMiddle = 0xa7,
  kXrcRdmaWriteLast = 0xa8,
  kXrcRdmaWriteLastWithImmediate = 0xa9,
  kXrcRdmaWriteOnly = 0xaa,
  kXrcRdmaWriteOnlyWithImmediate = 0xab,
  kXrcRdmaReadRequest = 0xac,
  kXrcRdmaReadResponseFirst = 0xad,
  kXrcRdmaReadResponseMiddle = 0xae,
  kXrcRdmaReadResponseLast = 0xaf,
  kXrcRdmaReadResponseOnly = 0xb0,
  kXrcAcknowledge = 0xb1,
  kXrcAtomicAcknowledge = 0xb2,
  kXrcCompareSwap = 0xb3,
  kXrcFetchAdd = 0xb4,
  kXrcSendLastWithInvalidate = 0xb6,
  kXrcSendOnlyWithInvalidate = 0xb7,
};

// Extension headers, in the order IBA 9.2 places them after the BTH.
enum class Header : uint8_t {
  kRdeth = 0,     // IBA 9.3.1, 4 bytes (RD only; never valid here)
  kDeth,          // IBA 9.3.2, 8 bytes
  kXrceth,        // IBA Annex A14, 4 bytes (XRC requests)
  kFeth,          // IBA 1.5 Annex A19, 4 bytes (FLUSH: before its RETH)
  kReth,          // IBA 9.3.3, 16 bytes
  kAtomicEth,     // IBA 9.3.4, 28 bytes
  kAeth,          // IBA 9.3.5, 4 bytes
  kAtomicAckEth,  // IBA 9.3.6, 8 bytes
  kImmDt,         // IBA 9.3.7, 4 bytes
  kIeth,          // IBA 9.3.8, 4 bytes
};
inline constexpr size_t kHeaderCount = 10;

inline constexpr size_t kBthBytes = 12;  // IBA 9.2
inline constexpr size_t kIcrcBytes = 4;  // IBA 7.8.1
inline constexpr std::array<uint8_t, kHeaderCount> kHeaderBytes = {4, 8, 4, 4, 16, 28, 4, 8, 4, 4};

[[nodiscard]] constexpr uint16_t header_bit(Header h) {
  return static_cast<uint16_t>(1u << static_cast<unsigned>(h));
}

// Per-opcode properties. ONLY is FIRST|LAST, as IBA 9.7 treats a single-packet
// message as both the first and the last packet of its message.
struct OpFlag {
  static constexpr uint32_t kValid = 1u << 0;        // defined by IBA, accepted here
  static constexpr uint32_t kRequest = 1u << 1;      // requester -> responder
  static constexpr uint32_t kResponse = 1u << 2;     // responder -> requester
  static constexpr uint32_t kPayload = 1u << 3;      // may carry payload (else none, pad 0)
  static constexpr uint32_t kSend = 1u << 4;
  static constexpr uint32_t kWrite = 1u << 5;
  static constexpr uint32_t kRead = 1u << 6;         // read request or read response
  static constexpr uint32_t kAtomic = 1u << 7;       // atomic request or atomic ACK
  static constexpr uint32_t kAck = 1u << 8;          // ACKNOWLEDGE or ATOMIC ACKNOWLEDGE
  static constexpr uint32_t kFirst = 1u << 9;
  static constexpr uint32_t kMiddle = 1u << 10;
  static constexpr uint32_t kLast = 1u << 11;
  static constexpr uint32_t kOnly = kFirst | kLast;
  static constexpr uint32_t kImmediate = 1u << 12;   // carries ImmDt
  static constexpr uint32_t kInvalidate = 1u << 13;  // carries IETH
  static constexpr uint32_t kAckRequired = 1u << 14; // reliable request: must be ACKed
  static constexpr uint32_t kCompletes = 1u << 15;   // last packet of a message that
                                                     // completes a receive WQE
  static constexpr uint32_t kCompare = 1u << 16;     // the atomic compares (COMPARE_SWAP)
  // ATOMIC WRITE: a RETH and eight bytes of payload, like a WRITE ONLY, but
  // answered like a READ and never torn; a flag of its own so that nothing
  // that handles kWrite takes it for one.
  static constexpr uint32_t kAtomicWrite = 1u << 17;
  static constexpr uint32_t kFlush = 1u << 18;       // FLUSH (IBA 1.5): a FETH and a RETH
  // The bits that tell the opcodes of one transport apart: what a packet is
  // and where it sits in its message (find_opcode's key).
  static constexpr uint32_t kShape = kRequest | kResponse | kSend | kWrite | kRead | kAtomic | kAck | kFirst |
                                     kMiddle | kLast | kImmediate | kInvalidate | kCompare | kAtomicWrite | kFlush;
};

// QP types allowed to send an opcode (its transport prefix decides it).
struct QpTypes {
  static constexpr uint8_t kRc = 1u << 0;
  static constexpr uint8_t kUc = 1u << 1;
  static constexpr uint8_t kUd = 1u << 2;
  static constexpr uint8_t kXrc = 1u << 3;
};

struct OpcodeInfo {
  const char* name = nullptr;  // IBTA-style, e.g. "RC_SEND_FIRST"
  uint32_t flags = 0;          // OpFlag::k* bits
  uint16_t headers = 0;        // header_bit() of each extension header carried
  uint8_t qp_types = 0;        // QpTypes::k* bits
  uint8_t length = 0;          // bytes from BTH start to the payload
  std::array<uint8_t, kHeaderCount> offset{};  // from BTH start; 0 if absent

  [[nodiscard]] constexpr bool valid() const { return (flags & OpFlag::kValid) != 0; }
  [[nodiscard]] constexpr bool is(uint32_t f) const { return (flags & f) == f; }
  [[nodiscard]] constexpr bool any(uint32_t f) const { return (flags & f) != 0; }
  [[nodiscard]] constexpr bool only() const { return is(OpFlag::kOnly); }
  [[nodiscard]] constexpr bool has(Header h) const { return (headers & header_bit(h)) != 0; }
  [[nodiscard]] constexpr size_t offset_of(Header h) const {
    return offset[static_cast<size_t>(h)];
  }
};

extern const std::array<OpcodeInfo, 256> kOpcodeTable;

[[nodiscard]] inline const OpcodeInfo& opcode_info(Opcode op) {
  return kOpcodeTable[static_cast<uint8_t>(op)];
}

// The valid opcode of transport `qp_type` (one QpTypes bit) whose flags,
// masked by OpFlag::kShape, are `shape` — how requesters and responders pick
// the opcode of each packet they build; nullopt when the transport has none
// (a UC READ, say).
[[nodiscard]] std::optional<Opcode> find_opcode(uint8_t qp_type, uint32_t shape);

// "RC_SEND_FIRST", or "UNKNOWN" for an undefined code.
[[nodiscard]] const char* opcode_name(Opcode op);

}  // namespace softverbs::wire
