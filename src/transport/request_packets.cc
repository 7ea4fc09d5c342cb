#include "transport/request_packets.h"

#include <endian.h>

#include <algorithm>

#include "shm/qp_pkeys.h"
#include "transport/qp_types.h"
#include "transport/wr_opcode_table.h"
#include "wire/psn.h"

namespace softverbs::transport {
namespace {

using F = wire::OpFlag;

uint32_t operation_flags(ReqKind kind) {
  switch (kind) {
    case ReqKind::kSend: return F::kSend;
    case ReqKind::kWrite: return F::kWrite;
    case ReqKind::kRead: return F::kRead;
    case ReqKind::kCmpSwap: return F::kAtomic | F::kCompare;
    case ReqKind::kFetchAdd: return F::kAtomic;
    case ReqKind::kAtomicWrite: return F::kAtomicWrite;
    case ReqKind::kFlush: return F::kFlush;
  }
  return 0;
}

// Only WRITE and SEND have an immediate, only SEND an IETH, and only on
// their last packet.
wire::Opcode opcode_for(uint8_t transport, uint32_t op, uint32_t position, bool imm, bool inv) {
  const uint32_t with_imm = imm && (position & F::kLast) ? F::kImmediate : 0;
  const uint32_t with_inv = inv && (position & F::kLast) ? F::kInvalidate : 0;
  return wire::find_opcode(transport, F::kRequest | op | position | with_imm | with_inv).value_or(wire::Opcode{0xff});
}

}  // namespace

RequestPackets::RequestPackets(const SendSide& s, const SendWqe& w, const IoList& local, uint32_t from_psn)
    : side_(s), wqe_(w), local_(local) {
  const WrOpcodeInfo* op = wr_opcode(w.opcode);
  const uint8_t transport = wire_transport(s.qp.qp_type);
  const uint32_t flags = operation_flags(op->kind);
  only_ = opcode_for(transport, flags, F::kOnly, op->has_imm, op->has_inv);
  first_ = opcode_for(transport, flags, F::kFirst, op->has_imm, op->has_inv);
  middle_ = opcode_for(transport, flags, F::kMiddle, op->has_imm, op->has_inv);
  last_ = opcode_for(transport, flags, F::kLast, op->has_imm, op->has_inv);
  mtu_ = s.conn.mtu;
  const uint32_t skip = static_cast<uint32_t>(wire::psn_diff(wire::Psn(from_psn), wire::Psn(w.psn)));

  wire::Bth& bth = h_.bth;
  bth.pkey = shm::qp_pkey(*s.qp.shared);
  bth.dest_qp = s.qp.qp_type == IBV_QPT_UD ? w.remote_qpn : s.conn.dest_qpn;
  h_.immdt.value = be32toh(w.imm_data);
  h_.ieth.rkey = w.imm_data;  // SEND WITH INVALIDATE: the R_Key, in host order in the WR
  h_.xrceth.srqn = w.remote_srqn;  // carried by XRC opcodes only
  switch (op->kind) {
    case ReqKind::kRead: {
      // One request; resumed part-way it asks for the rest only (IBA 9.7.5.1.4).
      const uint64_t done = std::min<uint64_t>(w.length, static_cast<uint64_t>(skip) * mtu_);
      h_.reth.va = w.remote_addr + done;
      h_.reth.rkey = w.rkey;
      h_.reth.dma_length = static_cast<uint32_t>(w.length - done);
      next_ = skip;
      count_ = skip + 1;
      bth.psn = wire::Psn(from_psn);
      return;
    }
    case ReqKind::kCmpSwap:
    case ReqKind::kFetchAdd:
      h_.atomic_eth.va = w.remote_addr;
      h_.atomic_eth.rkey = w.rkey;
      h_.atomic_eth.swap_add = op->kind == ReqKind::kCmpSwap ? w.swap : w.compare_add;
      h_.atomic_eth.compare = op->kind == ReqKind::kCmpSwap ? w.compare_add : 0;
      count_ = 1;
      return;
    case ReqKind::kSend:
    case ReqKind::kWrite:
    case ReqKind::kAtomicWrite:  // a WRITE ONLY's RETH and its eight bytes
    case ReqKind::kFlush:        // no WR posts one
      break;
  }
  if (s.qp.qp_type == IBV_QPT_UD) {
    // IBA 10.2.4: a WR Q_Key with its high bit set means the QP's own.
    h_.deth.qkey = (w.remote_qkey & 0x80000000u) ? s.qp.shared->qkey : w.remote_qkey;
    h_.deth.src_qp = s.qp.wire_src_qpn != 0 ? s.qp.wire_src_qpn : s.qp.qpn;
  }
  h_.reth.va = w.remote_addr;
  h_.reth.rkey = w.rkey;
  h_.reth.dma_length = static_cast<uint32_t>(local.bytes);
  count_ = w.packets;
  next_ = reliable_qp(s.qp.qp_type) ? skip : 0;
}

std::span<uint8_t> RequestPackets::next(std::span<uint8_t> buf) {
  if (done()) return {};
  const uint32_t k = next_++;
  const bool first = k == 0;
  const bool last = k + 1 == count_;
  const bool reliable = reliable_qp(side_.qp.qp_type);
  wire::Bth& bth = h_.bth;
  const bool single = wqe_.packets == 1 || reads_remote(wqe_.opcode);
  bth.opcode = single ? only_ : first ? first_ : last ? last_ : middle_;
  bth.psn = wire::psn_add(wire::Psn(wqe_.psn), k);
  // READs and atomics always want their answer; SEND and WRITE on the last
  // packet and every kAckEvery.
  bth.ack_req = reliable && (last || (k + 1) % kAckEvery == 0);
  bth.solicited = last && (wqe_.send_flags & IBV_SEND_SOLICITED) != 0;
  const wire::OpcodeInfo& info = wire::opcode_info(bth.opcode);
  uint32_t len = 0;
  uint64_t offset = 0;
  if (info.any(F::kPayload)) {
    offset = static_cast<uint64_t>(k) * mtu_;
    len = static_cast<uint32_t>(std::min<uint64_t>(mtu_, local_.bytes - std::min(local_.bytes, offset)));
  }
  wire::PacketBuilder b(buf);
  if (b.build(h_, len) != wire::PacketError::kOk) return {};
  if (len > 0) {
    IoCursor c(local_, offset);
    gather_into(b.payload().data(), c, len);
  }
  return b.packet();
}

}  // namespace softverbs::transport
