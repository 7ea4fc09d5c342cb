// Base Transport Header (IBA 9.2): the 12 bytes every IB transport packet
// starts with.
//
// Contract:
//   1. decode() reads exactly kBytes bytes, encode() writes exactly kBytes
//      bytes, big-endian; reserved bits are written as zero and not kept.
//   2. REQUIRES: the buffer holds at least Bth::kBytes bytes.
//   3. decode() accepts any bit pattern; judging it (opcode known, TVer 0,
//      pad count) is PacketView's job.
//   4. Value type, thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"
#include "wire/opcode.h"
#include "wire/psn.h"

namespace softverbs::wire {

struct Bth {
  static constexpr size_t kBytes = kBthBytes;

  // Field layout, IBA 9.2 figure: offsets from the first BTH byte.
  using OpcodeField = BeField<0, 1>;
  using SolicitedField = Field<1, 0, 1>;   // SE: raise a solicited event
  using MigReqField = Field<1, 1, 1>;      // M: APM migration state
  using PadCountField = Field<1, 2, 2>;    // bytes of pad after the payload
  using TverField = Field<1, 4, 4>;        // transport header version
  using PkeyField = BeField<2, 2>;         // partition key
  // Byte 4 is F, B and six reserved bits. RoCEv2 (annex A17) carries
  // congestion in the IP ECN bits: F is reserved (sent 0, ignored) and B is
  // set only by a CNP. The whole byte is variant for the ICRC (icrc.cc).
  using FecnField = Field<4, 0, 1>;
  using BecnField = Field<4, 1, 1>;
  using DestQpField = Field<5, 0, 24>;     // destination QP number
  using AckReqField = Field<8, 0, 1>;      // responder must ACK (RC)
  using PsnField = Field<9, 0, 24>;        // packet sequence number

  Opcode opcode = Opcode::kRcSendOnly;
  bool solicited = false;
  bool mig_req = false;
  uint8_t pad_count = 0;  // 0..3 bytes of pad after the payload
  uint8_t tver = 0;       // IBA 9.2: only version 0 is defined
  uint16_t pkey = 0xffff; // default partition, full membership
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;   // 24 bits
  bool ack_req = false;
  Psn psn;

  void encode(uint8_t* out) const;
  [[nodiscard]] static Bth decode(const uint8_t* in);

  friend bool operator==(const Bth&, const Bth&) = default;
};

// Cheap single-field reads for the receive path, before a full decode.
[[nodiscard]] inline Opcode bth_opcode(const uint8_t* bth) {
  return static_cast<Opcode>(Bth::OpcodeField::get(bth));
}
[[nodiscard]] inline uint8_t bth_pad_count(const uint8_t* bth) { return Bth::PadCountField::get(bth); }
[[nodiscard]] inline uint8_t bth_tver(const uint8_t* bth) { return Bth::TverField::get(bth); }
[[nodiscard]] inline uint32_t bth_dest_qp(const uint8_t* bth) { return Bth::DestQpField::get(bth); }
[[nodiscard]] inline Psn bth_psn(const uint8_t* bth) { return Psn(Bth::PsnField::get(bth)); }

}  // namespace softverbs::wire
