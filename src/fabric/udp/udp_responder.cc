// Receive side of the UDP fabric: request packets go through the responder
// and are answered with ACK/NAK, READ response or atomic ACK packets;
// response packets go to the packet completer of the requesting QP.
#include <algorithm>
#include <cstring>

#include "fabric/port_config.h"
#include "transport/mtu.h"
#include "fabric/udp/udp_fabric.h"
#include "transport/packet_completer.h"
#include "transport/packet_request.h"
#include "transport/responder.h"
#include "transport/target_memory.h"
#include "wire/psn.h"
#include "wire/ud_grh.h"

namespace softverbs::fabric::udp {
namespace {

using transport::ReqKind;
using transport::Response;
using wire::OpFlag;
using wire::Opcode;

using transport::mtu_bytes;

struct PeerCheck {
  const wire::Gid* from;
  bool matches = false;
};

// A connected QP answers only its peer's address (the BTH names no source QP).
void check_peer(transport::SendSide& s, void* arg) {
  auto* c = static_cast<PeerCheck*>(arg);
  c->matches = s.ah.is_global && std::memcmp(s.ah.grh.dgid.raw, c->from->data(), 16) == 0;
}

}  // namespace

void UdpFabric::on_request(const Endpoint& ep, const Peer& from, uint32_t slot, const wire::PacketView& v) {
  shm::Segment& seg = host_->seg();
  shm::SharedQp& qp = seg.qp(slot);
  shm::PortCounters& c = host_->notifier().port_counters();
  const wire::Bth bth = v.bth();
  const bool ud = qp.qp_type == IBV_QPT_UD;
  PeerCheck peer{&from.gid};
  if (!ud && (!host_->with_send_side(slot, bth.dest_qp, check_peer, &peer) || !peer.matches)) {
    c.dropped_requests.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint32_t mtu = mtu_bytes(ud ? static_cast<uint8_t>(port_config().mtu) : qp.path_mtu);
  iovec iov;
  transport::Request req;
  switch (transport::request_from_packet(v, qp, mtu, &iov, &req)) {
    case transport::PacketVerdict::kRequest: break;
    case transport::PacketVerdict::kDropped:
      c.dropped_requests.fetch_add(1, std::memory_order_relaxed);
      return;
    case transport::PacketVerdict::kMalformed:
      c.malformed_packets.fetch_add(1, std::memory_order_relaxed);
      return;
  }
  uint8_t grh[wire::kUdGrhBytes];
  if (ud) {
    // The receive buffer's first 40 bytes: the IP header this datagram came in.
    wire::UdGrhFields f;
    f.sgid = from.gid;
    f.dgid = ep.gid;
    f.ib_length = v.bytes().size();
    wire::write_roce_grh(grh, f);
    req.grh = grh;
    req.with_grh = true;
  }

  transport::LocalMemory mem;
  c.rcv_packets.fetch_add(req.packets, std::memory_order_relaxed);
  c.rcv_bytes.fetch_add(req.payload.bytes, std::memory_order_relaxed);
  const Response resp = transport::respond(seg, slot, req, mem, host_->notifier());
  if (qp.qp_type != IBV_QPT_RC) return;  // UC and UD answer nothing

  uint8_t buf[kMaxIbPacket];
  wire::TransportHeaders h;
  h.bth.dest_qp = qp.dest_qpn;
  h.bth.pkey = 0xffff;
  h.bth.psn = bth.psn;
  auto send_aeth = [&](Opcode op, const wire::Aeth& aeth, uint32_t psn) {
    h.bth.opcode = op;
    h.bth.psn = wire::Psn(psn);
    h.aeth = aeth;
    wire::PacketBuilder b(buf);
    if (b.build(h, 0) == wire::PacketError::kOk) send(ep, from.gid, b.packet());
  };
  const bool answers_data = resp.kind == Response::Kind::kAck || resp.kind == Response::Kind::kDuplicate;
  switch (resp.kind) {
    case Response::Kind::kDrop:
      return;
    case Response::Kind::kRnrNak:
      return send_aeth(Opcode::kRcAcknowledge, wire::Aeth::rnr_nak(resp.rnr_timer, resp.msn), req.psn);
    case Response::Kind::kNak: {
      // A sequence error NAK names the PSN expected (IBA 9.7.5.2.1).
      const uint32_t psn = resp.nak == wire::NakCode::kPsnSequenceError ? qp.resp.epsn : req.psn;
      return send_aeth(Opcode::kRcAcknowledge, wire::Aeth::nak(resp.nak, resp.msn), psn);
    }
    case Response::Kind::kAck:
    case Response::Kind::kDuplicate:
      break;
  }
  if (!answers_data) return;
  const wire::Aeth ack = wire::Aeth::ack(0x1f, resp.msn);  // credits: not limited (IBA 9.7.7.2)
  if (req.kind == ReqKind::kRead) {
    // IBA 9.7.5.1.3: one response packet per path MTU, AETH on the first and last.
    const uint32_t n = req.packets;
    for (uint32_t k = 0; k < n; ++k) {
      const bool first = k == 0, final_packet = k + 1 == n;
      const uint64_t offset = static_cast<uint64_t>(k) * mtu;
      const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(mtu, req.dma_length - std::min<uint64_t>(offset, req.dma_length)));
      h.bth.opcode = first && final_packet ? Opcode::kRcRdmaReadResponseOnly
                     : first               ? Opcode::kRcRdmaReadResponseFirst
                     : final_packet        ? Opcode::kRcRdmaReadResponseLast
                                           : Opcode::kRcRdmaReadResponseMiddle;
      h.bth.psn = wire::psn_add(wire::Psn(req.psn), k);
      h.aeth = ack;
      wire::PacketBuilder b(buf);
      if (b.build(h, len) != wire::PacketError::kOk) return;
      if (len > 0 && resp.read_mr != nullptr)
        std::memcpy(b.payload().data(), reinterpret_cast<const void*>(resp.read_va + offset), len);
      send(ep, from.gid, b.packet());
    }
    return;
  }
  if (req.kind == ReqKind::kCmpSwap || req.kind == ReqKind::kFetchAdd) {
    h.bth.opcode = Opcode::kRcAtomicAcknowledge;
    h.aeth = ack;
    h.atomic_ack_eth.orig = resp.original;
    wire::PacketBuilder b(buf);
    if (b.build(h, 0) == wire::PacketError::kOk) send(ep, from.gid, b.packet());
    return;
  }
  if (resp.kind == Response::Kind::kDuplicate) {
    // A repeated SEND or WRITE: acknowledge everything received so far.
    return send_aeth(Opcode::kRcAcknowledge, ack, wire::psn_add(wire::Psn(qp.resp.epsn), -1).value());
  }
  if (bth.ack_req) send_aeth(Opcode::kRcAcknowledge, ack, req.psn);
}

namespace {

struct ResponseArgs {
  const wire::PacketView* v;
  const wire::Gid* from;
};

void deliver_response(transport::SendSide& s, void* arg) {
  const auto* a = static_cast<ResponseArgs*>(arg);
  if (!s.ah.is_global || std::memcmp(s.ah.grh.dgid.raw, a->from->data(), 16) != 0) return;
  const wire::PacketView& v = *a->v;
  const uint32_t psn = v.bth().psn.value();
  const wire::OpcodeInfo& info = v.info();
  switch (v.opcode()) {
    case Opcode::kRcAcknowledge:
      return transport::on_acknowledge(s, psn, v.aeth());
    case Opcode::kRcAtomicAcknowledge:
      return transport::on_atomic_acknowledge(s, psn, v.aeth(), v.atomic_ack_eth().orig);
    default:
      if (info.any(OpFlag::kRead)) {
        // A READ response may carry a NAK in its AETH only as an ACKNOWLEDGE
        // packet; one here with a non-ACK syndrome is discarded.
        if (v.has(wire::Header::kAeth) && v.aeth().type() != wire::AethType::kAck) return;
        transport::on_read_response(s, psn, info.any(OpFlag::kFirst), info.any(OpFlag::kLast), v.payload());
      }
      return;
  }
}

}  // namespace

void UdpFabric::on_response(const Peer& from, uint32_t slot, const wire::PacketView& v) {
  ResponseArgs args{&v, &from.gid};
  if (!host_->with_send_side(slot, v.bth().dest_qp, deliver_response, &args))
    host_->notifier().port_counters().unknown_qp_packets.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace softverbs::fabric::udp
