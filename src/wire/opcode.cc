// Builds the opcode table at compile time from one line per operation.
//
// Each operation (the low five OpCode bits, IBA 9.2) is described once with
// its flags and extension headers; the transports that may use it expand it
// into table entries. Offsets and lengths are summed by the compiler in the
// IBA 9.2 header order, then pinned by static_asserts below.
#include "wire/opcode.h"

namespace softverbs::wire {
namespace {

using F = OpFlag;
using T = QpTypes;

constexpr uint16_t kDeth = header_bit(Header::kDeth);
constexpr uint16_t kXrceth = header_bit(Header::kXrceth);
constexpr uint16_t kFeth = header_bit(Header::kFeth);
constexpr uint16_t kReth = header_bit(Header::kReth);
constexpr uint16_t kAtomicEth = header_bit(Header::kAtomicEth);
constexpr uint16_t kAeth = header_bit(Header::kAeth);
constexpr uint16_t kAtomicAckEth = header_bit(Header::kAtomicAckEth);
constexpr uint16_t kImmDt = header_bit(Header::kImmDt);
constexpr uint16_t kIeth = header_bit(Header::kIeth);

struct OperationDesc {
  uint8_t code;            // low five bits of the OpCode
  const char* suffix;      // IBTA name without the transport
  uint32_t flags;
  uint16_t headers;        // extension headers besides the transport's own
  uint8_t transports;      // QpTypes that define this operation
};

constexpr uint32_t kReq = F::kRequest;
constexpr uint32_t kResp = F::kResponse;
constexpr uint32_t kPay = F::kPayload;
constexpr uint8_t kConnected = T::kRc | T::kUc | T::kXrc;
constexpr uint8_t kReliable = T::kRc | T::kXrc;
constexpr uint8_t kAllButRd = T::kRc | T::kUc | T::kUd | T::kXrc;

// IBA 9.2 OpCode field. UC defines sends and writes only; UD only the two
// SEND ONLY codes; reads, atomics and invalidates are reliable-only.
constexpr OperationDesc kOperations[] = {
    {0x00, "SEND_FIRST", kReq | kPay | F::kSend | F::kFirst, 0, kConnected},
    {0x01, "SEND_MIDDLE", kReq | kPay | F::kSend | F::kMiddle, 0, kConnected},
    {0x02, "SEND_LAST", kReq | kPay | F::kSend | F::kLast | F::kCompletes, 0, kConnected},
    {0x03, "SEND_LAST_WITH_IMMEDIATE",
     kReq | kPay | F::kSend | F::kLast | F::kImmediate | F::kCompletes, kImmDt, kConnected},
    {0x04, "SEND_ONLY", kReq | kPay | F::kSend | F::kOnly | F::kCompletes, 0, kAllButRd},
    {0x05, "SEND_ONLY_WITH_IMMEDIATE",
     kReq | kPay | F::kSend | F::kOnly | F::kImmediate | F::kCompletes, kImmDt, kAllButRd},
    {0x06, "RDMA_WRITE_FIRST", kReq | kPay | F::kWrite | F::kFirst, kReth, kConnected},
    {0x07, "RDMA_WRITE_MIDDLE", kReq | kPay | F::kWrite | F::kMiddle, 0, kConnected},
    {0x08, "RDMA_WRITE_LAST", kReq | kPay | F::kWrite | F::kLast, 0, kConnected},
    {0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE",
     kReq | kPay | F::kWrite | F::kLast | F::kImmediate | F::kCompletes, kImmDt, kConnected},
    {0x0a, "RDMA_WRITE_ONLY", kReq | kPay | F::kWrite | F::kOnly, kReth, kConnected},
    {0x0b, "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
     kReq | kPay | F::kWrite | F::kOnly | F::kImmediate | F::kCompletes, kReth | kImmDt,
     kConnected},
    {0x0c, "RDMA_READ_REQUEST", kReq | F::kRead | F::kOnly, kReth, kReliable},
    {0x0d, "RDMA_READ_RESPONSE_FIRST", kResp | kPay | F::kRead | F::kFirst, kAeth, kReliable},
    {0x0e, "RDMA_READ_RESPONSE_MIDDLE", kResp | kPay | F::kRead | F::kMiddle, 0, kReliable},
    {0x0f, "RDMA_READ_RESPONSE_LAST", kResp | kPay | F::kRead | F::kLast, kAeth, kReliable},
    {0x10, "RDMA_READ_RESPONSE_ONLY", kResp | kPay | F::kRead | F::kOnly, kAeth, kReliable},
    {0x11, "ACKNOWLEDGE", kResp | F::kAck | F::kOnly, kAeth, kReliable},
    {0x12, "ATOMIC_ACKNOWLEDGE", kResp | F::kAck | F::kAtomic | F::kOnly, kAeth | kAtomicAckEth,
     kReliable},
    {0x13, "COMPARE_SWAP", kReq | F::kAtomic | F::kCompare | F::kOnly, kAtomicEth, kReliable},
    {0x14, "FETCH_ADD", kReq | F::kAtomic | F::kOnly, kAtomicEth, kReliable},
    {0x16, "SEND_LAST_WITH_INVALIDATE",
     kReq | kPay | F::kSend | F::kLast | F::kInvalidate | F::kCompletes, kIeth, kReliable},
    {0x17, "SEND_ONLY_WITH_INVALIDATE",
     kReq | kPay | F::kSend | F::kOnly | F::kInvalidate | F::kCompletes, kIeth, kReliable},
    // IBA 1.5 defines these for RC only (as Linux's ib_pack.h does).
    {0x1c, "FLUSH", kReq | F::kFlush | F::kOnly, kFeth | kReth, T::kRc},
    {0x1d, "ATOMIC_WRITE", kReq | kPay | F::kAtomicWrite | F::kOnly, kReth, T::kRc},
};

struct TransportDesc {
  uint8_t qp_type;   // QpTypes bit
  uint8_t prefix;    // top three OpCode bits (IBA 9.2)
  const char* name;
  uint32_t flags;    // added to every operation
  uint16_t headers;  // added to every request
};

// RD (0x40) is not listed: softverbs has no RD QPs, so its codes stay
// undefined.
constexpr TransportDesc kTransports[] = {
    {T::kRc, 0x00, "RC", F::kValid, 0},
    {T::kUc, 0x20, "UC", F::kValid, 0},
    {T::kUd, 0x60, "UD", F::kValid, kDeth},  // IBA 9.3.2: every UD packet has a DETH
    {T::kXrc, 0xa0, "XRC", F::kValid, kXrceth},  // IBA A14: every XRC request has an XRCETH
};

constexpr size_t kNameBytes = 40;
using Name = std::array<char, kNameBytes>;

constexpr Name join_name(const char* transport, const char* suffix) {
  Name n{};
  size_t i = 0;
  for (const char* p = transport; *p != '\0'; ++p) n[i++] = *p;
  n[i++] = '_';
  for (const char* p = suffix; *p != '\0' && i + 1 < kNameBytes; ++p) n[i++] = *p;
  return n;
}

constexpr std::array<Name, 256> build_names() {
  std::array<Name, 256> names{};
  for (const TransportDesc& t : kTransports)
    for (const OperationDesc& op : kOperations)
      if ((op.transports & t.qp_type) != 0) names[t.prefix | op.code] = join_name(t.name, op.suffix);
  return names;
}

constexpr std::array<Name, 256> kNames = build_names();

constexpr OpcodeInfo make_info(const TransportDesc& t, const OperationDesc& op, const char* name) {
  OpcodeInfo info;
  info.name = name;
  info.qp_types = t.qp_type;
  info.flags = op.flags | t.flags;
  if (!info.valid()) return info;  // reserved: name and QP type only
  if ((t.qp_type & kReliable) != 0 && info.is(F::kRequest)) info.flags |= F::kAckRequired;  // IBA 9.7
  info.headers = static_cast<uint16_t>(op.headers | (info.is(F::kRequest) ? t.headers : 0));
  size_t at = kBthBytes;
  for (size_t h = 0; h < kHeaderCount; ++h) {
    if ((info.headers & (1u << h)) == 0) continue;
    info.offset[h] = static_cast<uint8_t>(at);
    at += kHeaderBytes[h];
  }
  info.length = static_cast<uint8_t>(at);
  return info;
}

constexpr std::array<OpcodeInfo, 256> build_table() {
  std::array<OpcodeInfo, 256> table{};
  for (const TransportDesc& t : kTransports)
    for (const OperationDesc& op : kOperations)
      if ((op.transports & t.qp_type) != 0) {
        const uint8_t code = t.prefix | op.code;
        table[code] = make_info(t, op, kNames[code].data());
      }
  return table;
}

constexpr std::array<OpcodeInfo, 256> kBuilt = build_table();

// Consistency of the description itself: every valid entry is exactly one of
// request/response, has one message position, and its ImmDt/IETH flags match
// its headers.
constexpr bool table_is_consistent() {
  for (const OpcodeInfo& e : kBuilt) {
    if (!e.valid()) continue;
    if (e.is(F::kRequest) == e.is(F::kResponse)) return false;
    const uint32_t pos = e.flags & (F::kFirst | F::kMiddle | F::kLast);
    if (pos == 0 || (pos & F::kMiddle && pos != F::kMiddle)) return false;
    if (e.is(F::kImmediate) != e.has(Header::kImmDt)) return false;
    if (e.is(F::kInvalidate) != e.has(Header::kIeth)) return false;
    if (e.has(Header::kRdeth)) return false;
    if (e.length % 4 != 0) return false;  // IBA 9.2: headers are whole words
  }
  return true;
}
static_assert(table_is_consistent());

constexpr const OpcodeInfo& at(Opcode op) { return kBuilt[static_cast<uint8_t>(op)]; }
constexpr size_t len(Opcode op) { return at(op).length; }

// Header lengths pinned against the IBA 9.2/9.3 header sizes
// (BTH 12, FETH 4, RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8, ImmDt 4, IETH 4, DETH 8).
static_assert(len(Opcode::kRcSendFirst) == 12);
static_assert(len(Opcode::kRcSendMiddle) == 12);
static_assert(len(Opcode::kRcSendLastWithImmediate) == 12 + 4);
static_assert(len(Opcode::kRcSendOnlyWithInvalidate) == 12 + 4);
static_assert(len(Opcode::kRcRdmaWriteFirst) == 12 + 16);
static_assert(len(Opcode::kRcRdmaWriteLastWithImmediate) == 12 + 4);
static_assert(len(Opcode::kRcRdmaWriteOnlyWithImmediate) == 12 + 16 + 4);
static_assert(at(Opcode::kRcRdmaWriteOnlyWithImmediate).offset_of(Header::kImmDt) == 28);
static_assert(len(Opcode::kRcRdmaReadRequest) == 12 + 16);
static_assert(len(Opcode::kRcRdmaReadResponseFirst) == 12 + 4);
static_assert(len(Opcode::kRcRdmaReadResponseMiddle) == 12);
static_assert(len(Opcode::kRcAcknowledge) == 12 + 4);
static_assert(len(Opcode::kRcAtomicAcknowledge) == 12 + 4 + 8);
static_assert(at(Opcode::kRcAtomicAcknowledge).offset_of(Header::kAtomicAckEth) == 16);
static_assert(len(Opcode::kRcCompareSwap) == 12 + 28);
static_assert(len(Opcode::kRcFetchAdd) == 12 + 28);
static_assert(len(Opcode::kUcRdmaWriteOnly) == 12 + 16);
static_assert(len(Opcode::kRcAtomicWrite) == 12 + 16 && at(Opcode::kRcAtomicWrite).is(F::kAckRequired));
static_assert(!at(static_cast<Opcode>(0xbd)).valid());  // no XRC ATOMIC WRITE
// FLUSH (as Linux's rxe lays it out): BTH, FETH, RETH, no payload.
static_assert(len(Opcode::kRcFlush) == 12 + 4 + 16 && at(Opcode::kRcFlush).offset_of(Header::kFeth) == 12 &&
              at(Opcode::kRcFlush).offset_of(Header::kReth) == 16 && !at(Opcode::kRcFlush).any(F::kPayload));
static_assert(len(Opcode::kUdSendOnly) == 12 + 8);
static_assert(len(Opcode::kUdSendOnlyWithImmediate) == 12 + 8 + 4);
static_assert(at(Opcode::kUdSendOnlyWithImmediate).offset_of(Header::kImmDt) == 20);
// XRC: RC's layout with the XRCETH right after the BTH, in requests only.
static_assert(len(Opcode::kXrcSendOnly) == 12 + 4);
static_assert(at(Opcode::kXrcSendOnly).offset_of(Header::kXrceth) == 12);
static_assert(len(Opcode::kXrcSendMiddle) == 12 + 4);
static_assert(len(Opcode::kXrcSendLastWithImmediate) == 12 + 4 + 4);
static_assert(len(Opcode::kXrcRdmaWriteFirst) == 12 + 4 + 16);
static_assert(at(Opcode::kXrcRdmaWriteFirst).offset_of(Header::kReth) == 16);
static_assert(len(Opcode::kXrcRdmaWriteOnlyWithImmediate) == 12 + 4 + 16 + 4);
static_assert(len(Opcode::kXrcRdmaReadRequest) == 12 + 4 + 16);
static_assert(len(Opcode::kXrcCompareSwap) == 12 + 4 + 28);
static_assert(at(Opcode::kXrcFetchAdd).offset_of(Header::kAtomicEth) == 16);
static_assert(len(Opcode::kXrcAcknowledge) == 12 + 4 && !at(Opcode::kXrcAcknowledge).has(Header::kXrceth));
static_assert(len(Opcode::kXrcAtomicAcknowledge) == 12 + 4 + 8);
static_assert(len(Opcode::kXrcRdmaReadResponseMiddle) == 12);
static_assert(at(Opcode::kXrcSendOnly).is(F::kAckRequired));
static_assert(!at(static_cast<Opcode>(0x44)).valid());  // RD stays undefined
static_assert(!at(static_cast<Opcode>(0x15)).valid());  // RC code 0x15 is not ours

constexpr uint8_t prefix_of(uint8_t qp_type) {
  for (const TransportDesc& t : kTransports)
    if (t.qp_type == qp_type) return t.prefix;
  return 0x40;  // RD: every code undefined
}

constexpr std::optional<Opcode> find_in(const std::array<OpcodeInfo, 256>& table, uint8_t qp_type, uint32_t shape) {
  const uint8_t prefix = prefix_of(qp_type);
  for (uint8_t code = 0; code < 32; ++code) {
    const OpcodeInfo& e = table[prefix | code];
    if (e.valid() && (e.flags & F::kShape) == shape) return static_cast<Opcode>(prefix | code);
  }
  return std::nullopt;
}

// Every valid opcode is the one answer to its own shape.
constexpr bool shapes_are_unique() {
  for (size_t code = 0; code < 256; ++code) {
    const OpcodeInfo& e = kBuilt[code];
    if (e.valid() && find_in(kBuilt, e.qp_types, e.flags & F::kShape) != static_cast<Opcode>(code)) return false;
  }
  return true;
}
static_assert(shapes_are_unique());
static_assert(find_in(kBuilt, T::kUc, F::kRequest | F::kWrite | F::kLast | F::kImmediate) ==
              Opcode::kUcRdmaWriteLastWithImmediate);
static_assert(find_in(kBuilt, T::kRc, F::kRequest | F::kAtomic | F::kOnly) == Opcode::kRcFetchAdd);
static_assert(!find_in(kBuilt, T::kUc, F::kRequest | F::kRead | F::kOnly));

}  // namespace

constinit const std::array<OpcodeInfo, 256> kOpcodeTable = kBuilt;

std::optional<Opcode> find_opcode(uint8_t qp_type, uint32_t shape) { return find_in(kOpcodeTable, qp_type, shape); }

const char* opcode_name(Opcode op) {
  const char* n = opcode_info(op).name;
  return n != nullptr ? n : "UNKNOWN";
}

}  // namespace softverbs::wire
