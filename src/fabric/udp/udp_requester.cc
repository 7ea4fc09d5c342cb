// Requester side of the UDP fabric: a send WQE becomes its request packets.
#include <algorithm>

#include "fabric/host/host_fabric.h"
#include "transport/mtu.h"
#include "fabric/port_config.h"
#include "fabric/udp/udp_fabric.h"
#include "transport/local_sges.h"
#include "transport/packet_completer.h"
#include "transport/wr_opcode_table.h"
#include "wire/psn.h"

namespace softverbs::fabric::udp {
namespace {

using transport::ReqKind;
using wire::Opcode;

using transport::mtu_bytes;

// IBA 9.2 / Table 38: the opcode of packet `first`/`last` of an RC SEND or WRITE.
Opcode rc_opcode(ReqKind kind, bool first, bool last, bool imm) {
  if (kind == ReqKind::kSend) {
    if (first && last) return imm ? Opcode::kRcSendOnlyWithImmediate : Opcode::kRcSendOnly;
    if (first) return Opcode::kRcSendFirst;
    if (last) return imm ? Opcode::kRcSendLastWithImmediate : Opcode::kRcSendLast;
    return Opcode::kRcSendMiddle;
  }
  if (first && last) return imm ? Opcode::kRcRdmaWriteOnlyWithImmediate : Opcode::kRcRdmaWriteOnly;
  if (first) return Opcode::kRcRdmaWriteFirst;
  if (last) return imm ? Opcode::kRcRdmaWriteLastWithImmediate : Opcode::kRcRdmaWriteLast;
  return Opcode::kRcRdmaWriteMiddle;
}

// UC's opcodes are RC's, 0x20 on (IBA 9.2, Table 38).
Opcode uc_opcode(Opcode rc) { return static_cast<Opcode>(static_cast<uint8_t>(rc) + 0x20); }

// Long messages ask for an ACK now and then, so the window keeps moving and
// a loss is noticed before the last packet.
constexpr uint32_t kAckEvery = 32;

// Bytes one QP keeps unacknowledged. A burst beyond what the peer's socket
// buffer holds is dropped by its kernel, and each drop costs a NAK or a
// timeout and a go-back-N resend of everything behind it. In bytes, not
// packets: the kernel charges a buffer by the memory a packet takes.
constexpr int64_t kWindowBytes = 512 * 1024;

}  // namespace

bool UdpFabric::can_transmit(const transport::SendSide& s, const transport::SendWqe& w) {
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w.opcode);
  if (op == nullptr) return true;
  if (s.sq.done != s.sq.next) {
    // A resent WQE has its PSNs already; a new one starts at the next PSN.
    const uint32_t next_psn = w.packets != 0 ? w.psn : s.sq_psn;
    const int32_t outstanding = wire::psn_diff(wire::Psn(next_psn), wire::Psn(s.sq.at(s.sq.done).psn));
    const uint64_t mtu = mtu_bytes(s.path_mtu);
    const int64_t packets = op->reads_remote ? 1 : static_cast<int64_t>((w.length + mtu - 1) / mtu);
    const int64_t window = std::max<int64_t>(16, kWindowBytes / static_cast<int64_t>(mtu));
    if (outstanding + packets > window) return false;
  }
  if (!op->reads_remote) return true;
  // IBA 9.5 / C9-…: at most max_rd_atomic READs and atomics outstanding.
  return transport::reads_in_flight(s) < std::max<uint32_t>(1, s.max_rd_atomic);
}

std::optional<TransmitResult> UdpFabric::transmit(transport::SendSide& s, transport::SendWqe& w) {
  TransmitResult result;
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w.opcode);
  if (s.qp_type == IBV_QPT_UD) return transmit_ud(s, w);
  const Endpoint* ep = endpoint_for(s.ah.grh.sgid_index);
  if (op == nullptr || ep == nullptr) {
    result.local_status = IBV_WC_LOC_QP_OP_ERR;
    return result;
  }
  const uint64_t index = s.sq.next - 1;  // the requester has moved past the WQE it hands us
  uint32_t start_psn = w.psn;
  if (s.resume_index == index) {
    start_psn = s.resume_psn;
    s.resume_index = ~0ull;
  }
  const uint32_t skip = static_cast<uint32_t>(wire::psn_diff(wire::Psn(start_psn), wire::Psn(w.psn)));
  const uint64_t mtu = mtu_bytes(s.path_mtu);

  iovec iov[shm::kMaxSge];
  transport::IoList list;
  const bool writes_local = op->kind != ReqKind::kSend && op->kind != ReqKind::kWrite;
  result.local_status = transport::resolve_local_sges(s, w, writes_local, iov, &list);
  if (result.local_status != IBV_WC_SUCCESS) return result;
  if (writes_local && op->kind != ReqKind::kRead && list.bytes < 8) {
    result.local_status = IBV_WC_LOC_LEN_ERR;  // an atomic's result needs 8 bytes
    return result;
  }

  wire::Gid dst;
  std::memcpy(dst.data(), s.ah.grh.dgid.raw, 16);
  uint8_t buf[kMaxIbPacket];
  wire::TransportHeaders h;
  h.bth.dest_qp = s.dest_qpn;
  h.bth.pkey = 0xffff;

  if (op->kind == ReqKind::kRead || op->kind == ReqKind::kCmpSwap || op->kind == ReqKind::kFetchAdd) {
    h.bth.ack_req = true;
    h.bth.psn = wire::Psn(start_psn);
    if (op->kind == ReqKind::kRead) {
      // A READ resumed part-way asks for the rest only (IBA 9.7.5.1.4).
      const uint64_t done = std::min<uint64_t>(w.length, static_cast<uint64_t>(skip) * mtu);
      h.bth.opcode = Opcode::kRcRdmaReadRequest;
      h.reth.va = w.remote_addr + done;
      h.reth.rkey = w.rkey;
      h.reth.dma_length = static_cast<uint32_t>(w.length - done);
    } else {
      h.bth.opcode = op->kind == ReqKind::kCmpSwap ? Opcode::kRcCompareSwap : Opcode::kRcFetchAdd;
      h.atomic_eth.va = w.remote_addr;
      h.atomic_eth.rkey = w.rkey;
      h.atomic_eth.swap_add = op->kind == ReqKind::kCmpSwap ? w.swap : w.compare_add;
      h.atomic_eth.compare = op->kind == ReqKind::kCmpSwap ? w.compare_add : 0;
    }
    wire::PacketBuilder b(buf);
    if (b.build(h, 0) == wire::PacketError::kOk) send(*ep, dst, b.packet());
    s.shared->counters.sent_packets.fetch_add(1, std::memory_order_relaxed);
    transport::start_ack_timer(s);
    return std::nullopt;
  }

  // UC: RC's packets with UC opcodes, and nothing comes back: done once sent.
  // Packets leave kBatch at a time, one syscall each batch.
  const bool uc = s.qp_type == IBV_QPT_UC;
  constexpr size_t kBatch = 8;
  uint8_t batch[kBatch][kMaxIbPacket];
  std::span<uint8_t> ready[kBatch];
  size_t queued = 0;
  for (uint32_t k = uc ? 0 : skip; k < w.packets; ++k) {
    const bool first = k == 0;
    const bool last = k + 1 == w.packets;
    const uint64_t offset = static_cast<uint64_t>(k) * mtu;
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(mtu, list.bytes - std::min(list.bytes, offset)));
    const Opcode rc = rc_opcode(op->kind, first, last, op->has_imm);
    h.bth.opcode = uc ? uc_opcode(rc) : rc;
    h.bth.psn = wire::psn_add(wire::Psn(w.psn), k);
    h.bth.ack_req = !uc && (last || (k + 1) % kAckEvery == 0);
    h.bth.solicited = last && (w.send_flags & IBV_SEND_SOLICITED) != 0;
    if (first) {
      h.reth.va = w.remote_addr;
      h.reth.rkey = w.rkey;
      h.reth.dma_length = static_cast<uint32_t>(list.bytes);
    }
    h.immdt.value = be32toh(w.imm_data);
    wire::PacketBuilder b(batch[queued]);
    if (b.build(h, len) != wire::PacketError::kOk) break;
    transport::IoCursor c(list, offset);
    transport::gather_into(b.payload().data(), c, len);
    ready[queued++] = b.packet();
    if (queued == kBatch || last) {
      send_many(*ep, dst, {ready, queued});
      s.shared->counters.sent_packets.fetch_add(queued, std::memory_order_relaxed);
      queued = 0;
    }
  }
  if (queued > 0) {  // a packet failed to build: what came before it still goes
    send_many(*ep, dst, {ready, queued});
    s.shared->counters.sent_packets.fetch_add(queued, std::memory_order_relaxed);
  }
  if (uc) {
    result.response.kind = transport::Response::Kind::kAck;
    return result;
  }
  transport::start_ack_timer(s);
  return std::nullopt;
}

// UD: one SEND ONLY packet with a DETH to the WR's address; for this host's
// own GIDs, the host fabric. Nothing comes back: done once sent.
std::optional<TransmitResult> UdpFabric::transmit_ud(transport::SendSide& s, transport::SendWqe& w) {
  TransmitResult result;
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w.opcode);
  if (w.ah == nullptr || op == nullptr || !w.ah->is_global) {
    result.local_status = IBV_WC_LOC_QP_OP_ERR;  // RoCE addresses are GIDs (IBA A17.4)
    return result;
  }
  if (local_gid_index(w.ah->grh.dgid.raw) >= 0) return host::host_fabric().transmit(s, w);
  const Endpoint* ep = endpoint_for(w.ah->grh.sgid_index);
  if (ep == nullptr) {
    result.local_status = IBV_WC_LOC_QP_OP_ERR;
    return result;
  }
  if (w.length > mtu_bytes(port_config().mtu)) {
    result.local_status = IBV_WC_LOC_LEN_ERR;  // IBA 11.4.1.1: one packet
    return result;
  }
  iovec iov[shm::kMaxSge];
  transport::IoList list;
  result.local_status = transport::resolve_local_sges(s, w, false, iov, &list);
  if (result.local_status != IBV_WC_SUCCESS) return result;
  wire::TransportHeaders h;
  h.bth.opcode = op->has_imm ? Opcode::kUdSendOnlyWithImmediate : Opcode::kUdSendOnly;
  h.bth.dest_qp = w.remote_qpn;
  h.bth.pkey = 0xffff;
  h.bth.psn = wire::Psn(w.psn);
  h.bth.solicited = (w.send_flags & IBV_SEND_SOLICITED) != 0;
  // IBA 10.2.4: a WR Q_Key with its high bit set means the QP's own.
  h.deth.qkey = (w.remote_qkey & 0x80000000u) ? s.shared->qkey : w.remote_qkey;
  h.deth.src_qp = s.qpn;
  h.immdt.value = be32toh(w.imm_data);
  uint8_t buf[kMaxIbPacket];
  wire::PacketBuilder b(buf);
  if (b.build(h, static_cast<uint32_t>(list.bytes)) == wire::PacketError::kOk) {
    transport::IoCursor c(list);
    transport::gather_into(b.payload().data(), c, list.bytes);
    wire::Gid dst;
    std::memcpy(dst.data(), w.ah->grh.dgid.raw, 16);
    send(*ep, dst, b.packet());
    s.shared->counters.sent_packets.fetch_add(1, std::memory_order_relaxed);
  }
  result.response.kind = transport::Response::Kind::kAck;
  return result;
}

}  // namespace softverbs::fabric::udp
