// ACK Extended Transport Header (IBA 9.3.5): the syndrome and MSN a
// responder returns in ACKNOWLEDGE, ATOMIC ACKNOWLEDGE and read responses.
//
// Contract:
//   1. 4 bytes, big-endian: Syndrome (8 bits) then MSN (24 bits).
//      encode()/decode() touch exactly Aeth::kBytes bytes (REQUIRES: that
//      many are there).
//   2. Syndrome: bit 7 reserved (0), bits 6..5 the type (ACK, RNR NAK,
//      reserved, NAK), bits 4..0 the credit code, RNR timer or NAK code.
//      A syndrome with bit 7 set decodes as AethType::kReserved.
//   3. The 5-bit accessors (credit_code, rnr_timer, nak_code) return the low
//      bits whatever the type; REQUIRES: check type() first.
//   4. Value type; the credit and timer tables are constant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::wire {

enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

// IBA 9.3.5 NAK codes (syndrome 011xxxxx).
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};

// Credit code 31: "invalid" — the responder reports no end-to-end credits
// (e.g. its QP uses an SRQ); the requester must then ignore credit limits.
inline constexpr uint8_t kCreditCodeInvalid = 0x1f;

struct Aeth {
  static constexpr size_t kBytes = 4;
  using SyndromeField = BeField<0, 1>;
  using MsnField = Field<1, 0, 24>;
  static_assert(MsnField::kEnd == kBytes);

  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits: count of completed request messages

  [[nodiscard]] static constexpr Aeth ack(uint8_t credit_code, uint32_t msn) {
    return make(AethType::kAck, credit_code, msn);
  }
  // timer: the 5-bit RNR NAK timer code (see rnr_timer_us()).
  [[nodiscard]] static constexpr Aeth rnr_nak(uint8_t timer, uint32_t msn) {
    return make(AethType::kRnrNak, timer, msn);
  }
  [[nodiscard]] static constexpr Aeth nak(NakCode code, uint32_t msn) {
    return make(AethType::kNak, static_cast<uint8_t>(code), msn);
  }

  [[nodiscard]] constexpr AethType type() const {
    if ((syndrome & 0x80) != 0) return AethType::kReserved;  // IBA 9.3.5: bit 7 reserved
    return static_cast<AethType>((syndrome >> 5) & 0x3);
  }
  [[nodiscard]] constexpr uint8_t value5() const { return syndrome & 0x1f; }
  [[nodiscard]] constexpr uint8_t credit_code() const { return value5(); }
  [[nodiscard]] constexpr uint8_t rnr_timer() const { return value5(); }
  [[nodiscard]] constexpr NakCode nak_code() const { return static_cast<NakCode>(value5()); }

  void encode(uint8_t* out) const {
    SyndromeField::set(out, syndrome);
    MsnField::set(out, msn);
  }
  [[nodiscard]] static Aeth decode(const uint8_t* in) {
    return Aeth{SyndromeField::get(in), MsnField::get(in)};
  }
  friend bool operator==(const Aeth&, const Aeth&) = default;

 private:
  static constexpr Aeth make(AethType t, uint8_t value, uint32_t msn) {
    return Aeth{static_cast<uint8_t>((static_cast<uint8_t>(t) << 5) | (value & 0x1f)),
                msn & 0xffffff};
  }
};

// IBA 9.7.7 credit encoding: code 0..30 -> number of receive WQEs
// (0, 1, 2, 3, 4, 6, 8, 12, ... 32768). REQUIRES: code < 31.
[[nodiscard]] uint32_t credit_count(uint8_t code);
// The largest code whose credit_count() does not exceed `available`.
[[nodiscard]] uint8_t credit_code_for(uint32_t available);
// RNR NAK timer code -> microseconds (code 0 is the longest, 655.36 ms).
[[nodiscard]] uint32_t rnr_timer_us(uint8_t code);

}  // namespace softverbs::wire
