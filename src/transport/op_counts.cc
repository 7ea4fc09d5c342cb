#include "transport/op_counts.h"

#include "shm/op_select.h"
#include "transport/qp_types.h"
#include "wire/opcode.h"

namespace softverbs::transport {
namespace {

using F = wire::OpFlag;

// Whether `info` is a request opcode of the operation `kind` (ATOMIC WRITE
// and FLUSH have flags of their own, so a WRITE or READ never takes theirs).
bool same_operation(const wire::OpcodeInfo& info, ReqKind kind) {
  switch (kind) {
    case ReqKind::kSend: return info.any(F::kSend);
    case ReqKind::kWrite: return info.any(F::kWrite) && !info.any(F::kAtomicWrite);
    case ReqKind::kRead: return info.any(F::kRead) && !info.any(F::kFlush);
    case ReqKind::kCmpSwap: return info.any(F::kAtomic) && info.any(F::kCompare);
    case ReqKind::kFetchAdd: return info.any(F::kAtomic) && !info.any(F::kCompare);
    case ReqKind::kAtomicWrite: return info.any(F::kAtomicWrite);
    case ReqKind::kFlush: return info.any(F::kFlush);
  }
  return false;
}

void add(std::atomic<uint64_t>& counter, uint64_t n) { counter.fetch_add(n, std::memory_order_relaxed); }


}  // namespace

OpShare op_share(const MessageShape& m, uint8_t opcode) {
  const wire::OpcodeInfo& info = wire::kOpcodeTable[opcode];
  if (!info.valid() || !info.any(F::kRequest) || (info.qp_types & wire_transport(m.qp_type)) == 0 ||
      !same_operation(info, m.kind))
    return {};
  // Only the last packet carries the immediate or the invalidated R_Key.
  const bool tail_matches = info.any(F::kImmediate) == m.imm && info.any(F::kInvalidate) == m.inv;
  const bool multi = (m.kind == ReqKind::kSend || m.kind == ReqKind::kWrite) && m.packets > 1;
  if (!multi) {
    if (!info.only() || !tail_matches) return {};
    return {1, m.kind == ReqKind::kSend || m.kind == ReqKind::kWrite || m.kind == ReqKind::kAtomicWrite ? m.bytes : 0};
  }
  const uint64_t n = m.packets;
  if (info.only()) return {};
  if (info.is(F::kFirst)) return {1, m.mtu};
  if (info.is(F::kMiddle)) return {n - 2, (n - 2) * m.mtu};
  if (info.is(F::kLast) && tail_matches) return {1, m.bytes - (n - 1) * m.mtu};
  return {};
}

void count_selected_message(shm::PortCounters& c, uint32_t select, const MessageShape& m, uint8_t sl,
                            uint64_t overhead) {
  using shm::OpSelector;
  // Each applied selector on its own: two may name different opcodes.
  auto share_of = [&](OpSelector s) {
    return shm::op_applied(select, s) ? op_share(m, shm::op_code(select, s)) : OpShare{};
  };
  auto words = [&](const OpShare& share) { return (share.bytes + share.packets * overhead) / 4; };
  if (const OpShare share = share_of(OpSelector::kOpRcv); share.packets != 0) {
    add(c.op_rcv_packets, share.packets);
    add(c.op_rcv_words, words(share));
  }
  if (const OpShare share = share_of(OpSelector::kVlOpPackets); share.packets != 0)
    add(c.vl_op_packets_sl[sl & 15], share.packets);
  if (const OpShare share = share_of(OpSelector::kVlOpData); share.packets != 0)
    add(c.vl_op_words_sl[sl & 15], words(share));
}

void count_selected_packet(shm::PortCounters& c, uint32_t select, uint8_t opcode, uint8_t sl, uint64_t words) {
  using shm::OpSelector;
  if (shm::op_matches(select, OpSelector::kOpRcv, opcode)) {
    add(c.op_rcv_packets, 1);
    add(c.op_rcv_words, words);
  }
  if (shm::op_matches(select, OpSelector::kVlOpPackets, opcode)) add(c.vl_op_packets_sl[sl & 15], 1);
  if (shm::op_matches(select, OpSelector::kVlOpData, opcode)) add(c.vl_op_words_sl[sl & 15], words);
}

}  // namespace softverbs::transport
