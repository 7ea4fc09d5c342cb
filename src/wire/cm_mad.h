// Communication Management MADs (IBA chapter 12, and 13.4 for the common
// MAD header): the 256-byte datagrams two CMs exchange through QP1 to
// connect and disconnect RC/UC QPs (REQ, MRA, REJ, REP, RTU, DREQ, DREP)
// and to resolve a UD service (SIDR_REQ, SIDR_REP).
//
// Contract:
//   1. encode() writes exactly kMadBytes bytes: the MAD header, then the
//      message; reserved bits and bytes are written as zero. decode() reads
//      exactly kMadBytes bytes and keeps no reserved bit.
//   2. REQUIRES: the buffer holds kMadBytes bytes. Offsets below are from
//      the first byte of the MAD (the IBA tables count from the end of the
//      24-byte header; each descriptor adds it).
//   3. Pure functions, value types, thread-compatible; judging a decoded
//      message (attribute known, class version) is the CM's job.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "wire/field.h"
#include "wire/mad_header.h"

namespace softverbs::wire::cm {

inline constexpr size_t kMadBytes = mad_header::kMadBytes;
inline constexpr size_t kMadHeaderBytes = mad_header::kHeaderBytes;
inline constexpr uint8_t kBaseVersion = 1;
inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMethodSend = 0x03;
// Every GSI datagram carries this Q_Key (IBA 13.5.1); QP1 is the GSI's QP.
inline constexpr uint32_t kGsiQkey = 0x80010000;
inline constexpr uint32_t kGsiQpn = 1;

enum class AttrId : uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001a,
};

// Common MAD header (IBA 13.4.3, wire/mad_header.h).
struct MadHeader {
  using BaseVersionField = mad_header::BaseVersion;
  using MgmtClassField = mad_header::MgmtClass;
  using ClassVersionField = mad_header::ClassVersion;
  using ResponseField = mad_header::ResponseBit;
  using MethodField = mad_header::Method;
  using StatusField = mad_header::Status;
  using ClassSpecificField = mad_header::ClassSpecific;
  using TidField = mad_header::TransactionId;
  using AttrIdField = mad_header::AttributeId;
  using AttrModField = mad_header::AttributeModifier;

  uint8_t base_version = kBaseVersion;
  uint8_t mgmt_class = kMgmtClassCm;
  uint8_t class_version = kCmClassVersion;
  uint8_t method = kMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;

  void encode(uint8_t* out) const;
  [[nodiscard]] static MadHeader decode(const uint8_t* in);
  friend bool operator==(const MadHeader&, const MadHeader&) = default;
};

// A field of a CM message at byte `Off` of the IBA table (after the header).
template <size_t Off, unsigned BitOff, unsigned Width>
using CmField = Field<kMadHeaderBytes + Off, BitOff, Width>;
template <size_t Off, size_t Bytes>
using CmBeField = BeField<kMadHeaderBytes + Off, Bytes>;

using Gid = std::array<uint8_t, 16>;

// Path information of a REQ (primary or alternate), IBA table 106.
struct ReqPath {
  uint16_t local_lid = 0;
  uint16_t remote_lid = 0;
  Gid local_gid{};
  Gid remote_gid{};
  uint32_t flow_label = 0;   // 20 bits
  uint8_t packet_rate = 0;   // 6 bits
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;            // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits
  friend bool operator==(const ReqPath&, const ReqPath&) = default;
};

// Connection request, IBA 12.6.5 table 106.
// IBA 1.4 gave reserved bits of REQ, REP and SIDR_REP to a 24-bit VendorID:
// with the header's AttributeModifier it carries Enhanced Connection
// Establishment (ECE) options, as Linux's cm.c places them.
struct Req {
  static constexpr AttrId kAttr = AttrId::kReq;
  static constexpr size_t kPrivateBytes = 92;
  uint32_t local_comm_id = 0;
  uint32_t vendor_id = 0;            // 24 bits (ECE)
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;            // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;           // 24 bits
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;          // 24 bits
  uint8_t remote_cm_response_timeout = 0;  // 5 bits: 4.096 us * 2^n
  uint8_t transport_service_type = 0;      // 2 bits: 0 RC, 1 UC, 3 extended (XRC)
  bool end_to_end_flow_control = false;
  uint32_t starting_psn = 0;         // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;           // 3 bits
  uint16_t pkey = 0;
  uint8_t path_mtu = 0;              // 4 bits, IBA MTU encoding (1 = 256 ... 5 = 4096)
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;       // 3 bits
  uint8_t max_cm_retries = 0;        // 4 bits
  bool srq = false;
  uint8_t extended_transport_type = 0;  // 3 bits
  ReqPath primary;
  ReqPath alternate;
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const Req&, const Req&) = default;
};

// Message receipt acknowledgement: "give me longer", IBA table 107.
struct Mra {
  static constexpr AttrId kAttr = AttrId::kMra;
  static constexpr size_t kPrivateBytes = 222;
  enum : uint8_t { kMraedReq = 0, kMraedRep = 1, kMraedLap = 2 };
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_mraed = 0;     // 2 bits
  uint8_t service_timeout = 0;   // 5 bits
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const Mra&, const Mra&) = default;
};

// Reject, IBA table 108; reasons in table 109.
struct Rej {
  static constexpr AttrId kAttr = AttrId::kRej;
  static constexpr size_t kPrivateBytes = 148;
  static constexpr size_t kAriBytes = 72;
  enum : uint8_t { kRejectedReq = 0, kRejectedRep = 1, kRejectedOther = 2 };
  enum Reason : uint16_t {
    kNoQp = 1,
    kNoEec = 2,
    kNoResources = 3,
    kTimeout = 4,
    kUnsupportedRequest = 5,
    kInvalidCommId = 6,
    kInvalidCommInstance = 7,
    kInvalidServiceId = 8,
    kInvalidTransportType = 9,
    kStaleConn = 10,
    kRdcNotExist = 11,
    kInvalidGid = 12,
    kInvalidLid = 13,
    kInvalidSl = 14,
    kInvalidTrafficClass = 15,
    kInvalidHopLimit = 16,
    kInvalidPacketRate = 17,
    kInvalidAltGid = 18,
    kInvalidAltLid = 19,
    kInvalidAltSl = 20,
    kInvalidAltTrafficClass = 21,
    kInvalidAltHopLimit = 22,
    kInvalidAltPacketRate = 23,
    kPortCmRedirect = 24,
    kPortRedirect = 25,
    kInvalidMtu = 26,
    kInsufficientRespResources = 27,
    kConsumerReject = 28,
    kInvalidRnrRetry = 29,
    kDuplicateLocalCommId = 30,
    kInvalidClassVersion = 31,
    kInvalidFlowLabel = 32,
    kInvalidAltFlowLabel = 33,
  };
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_rejected = 0;  // 2 bits
  uint8_t ari_length = 0;        // 7 bits
  uint16_t reason = 0;
  std::array<uint8_t, kAriBytes> ari{};
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const Rej&, const Rej&) = default;
};

// Reply to a REQ, IBA table 110.
struct Rep {
  static constexpr AttrId kAttr = AttrId::kRep;
  static constexpr size_t kPrivateBytes = 196;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;          // 24 bits
  uint32_t local_eecn = 0;         // 24 bits
  uint32_t starting_psn = 0;       // 24 bits
  uint32_t vendor_id = 0;          // 24 bits (ECE), a byte after each of the three above
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;    // 5 bits
  uint8_t failover_accepted = 0;   // 2 bits
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;     // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const Rep&, const Rep&) = default;
};

// Ready to use, IBA table 111.
struct Rtu {
  static constexpr AttrId kAttr = AttrId::kRtu;
  static constexpr size_t kPrivateBytes = 224;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const Rtu&, const Rtu&) = default;
};

// Disconnect request, IBA table 112.
struct Dreq {
  static constexpr AttrId kAttr = AttrId::kDreq;
  static constexpr size_t kPrivateBytes = 220;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // 24 bits
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const Dreq&, const Dreq&) = default;
};

// Disconnect reply, IBA table 113.
struct Drep {
  static constexpr AttrId kAttr = AttrId::kDrep;
  static constexpr size_t kPrivateBytes = 224;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const Drep&, const Drep&) = default;
};

// Service ID resolution request, IBA table 119.
struct SidrReq {
  static constexpr AttrId kAttr = AttrId::kSidrReq;
  static constexpr size_t kPrivateBytes = 216;
  uint32_t request_id = 0;
  uint16_t pkey = 0;
  uint64_t service_id = 0;
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const SidrReq&, const SidrReq&) = default;
};

// Service ID resolution reply, IBA table 120.
struct SidrRep {
  static constexpr AttrId kAttr = AttrId::kSidrRep;
  static constexpr size_t kPrivateBytes = 136;
  static constexpr size_t kAddInfoBytes = 72;
  enum Status : uint8_t { kValid = 0, kNoService = 1, kRejected = 2, kNoQp = 3, kRedirect = 4, kBadVersion = 5 };
  uint32_t request_id = 0;
  uint8_t status = 0;
  uint8_t add_info_length = 0;
  uint32_t vendor_id = 0;  // 24 bits (ECE): the top 16 before the QPN, the low 8 after it
  uint32_t qpn = 0;  // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, kAddInfoBytes> add_info{};
  std::array<uint8_t, kPrivateBytes> private_data{};
  friend bool operator==(const SidrRep&, const SidrRep&) = default;
};

// The whole MAD of a message: header (attribute ID from the message type,
// method Send) and body. The rest of the header is the caller's.
void encode(const MadHeader& hdr, const Req& m, uint8_t* out);
void encode(const MadHeader& hdr, const Mra& m, uint8_t* out);
void encode(const MadHeader& hdr, const Rej& m, uint8_t* out);
void encode(const MadHeader& hdr, const Rep& m, uint8_t* out);
void encode(const MadHeader& hdr, const Rtu& m, uint8_t* out);
void encode(const MadHeader& hdr, const Dreq& m, uint8_t* out);
void encode(const MadHeader& hdr, const Drep& m, uint8_t* out);
void encode(const MadHeader& hdr, const SidrReq& m, uint8_t* out);
void encode(const MadHeader& hdr, const SidrRep& m, uint8_t* out);

// The message body of a MAD whose attribute ID the caller has checked.
[[nodiscard]] Req decode_req(const uint8_t* mad);
[[nodiscard]] Mra decode_mra(const uint8_t* mad);
[[nodiscard]] Rej decode_rej(const uint8_t* mad);
[[nodiscard]] Rep decode_rep(const uint8_t* mad);
[[nodiscard]] Rtu decode_rtu(const uint8_t* mad);
[[nodiscard]] Dreq decode_dreq(const uint8_t* mad);
[[nodiscard]] Drep decode_drep(const uint8_t* mad);
[[nodiscard]] SidrReq decode_sidr_req(const uint8_t* mad);
[[nodiscard]] SidrRep decode_sidr_rep(const uint8_t* mad);

// The two routing keys of a CM MAD that QP1 demultiplexing reads without a
// full decode: a REQ's or SIDR_REQ's service ID, and the comm ID the
// receiver chose (the "remote comm ID" of every message that has one).
[[nodiscard]] inline uint64_t req_service_id(const uint8_t* mad) { return CmBeField<8, 8>::get(mad); }
[[nodiscard]] inline uint64_t sidr_req_service_id(const uint8_t* mad) { return CmBeField<8, 8>::get(mad); }
[[nodiscard]] inline uint32_t remote_comm_id(const uint8_t* mad) { return CmBeField<4, 4>::get(mad); }

// IBA's timeout encoding: 4.096 us * 2^value, capped at 31.
[[nodiscard]] inline uint64_t timeout_ns(uint8_t value) {
  return value >= 31 ? (uint64_t{4096} << 31) : (uint64_t{4096} << value);
}

}  // namespace softverbs::wire::cm
