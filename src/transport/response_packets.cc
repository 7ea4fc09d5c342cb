#include "transport/response_packets.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>

#include "shm/qp_pkeys.h"
#include "transport/op_counts.h"
#include "transport/qp_types.h"
#include "transport/responder.h"
#include "util/tsan.h"
#include "wire/opcode.h"
#include "wire/packet.h"
#include "wire/psn.h"
#include "wire/ud_grh.h"

namespace softverbs::transport {
namespace {

using F = wire::OpFlag;

// What PortRcvData counts besides a request packet's payload on the packet
// links (RoCE): BTH and ICRC (mad/pma_counters.cc, the same on receipt).
constexpr uint64_t kRoceRequestOverhead = 12 + 4;

wire::Opcode response_opcode(uint8_t transport, uint32_t shape) {
  return wire::find_opcode(transport, F::kResponse | shape).value_or(wire::Opcode{0xff});
}

}  // namespace

void answer_request(const shm::SharedQp& qp, const Request& req, const Response& resp, bool ack_req, uint32_t mtu,
                    TargetMemory& mem, PacketSink& sink) {
  if (!reliable_qp(qp.qp_type)) return;  // UC and UD answer nothing
  const uint8_t transport = wire_transport(qp.qp_type);
  uint8_t buf[wire::kMaxPacketBytes];
  wire::TransportHeaders h;
  h.bth.dest_qp = qp.dest_qpn;
  h.bth.pkey = shm::qp_pkey(qp);
  auto acknowledge = [&](const wire::Aeth& aeth, uint32_t psn) {
    h.aeth = aeth;
    h.bth.opcode = response_opcode(transport, F::kAck | F::kOnly);
    h.bth.psn = wire::Psn(psn);
    wire::PacketBuilder b(buf);
    if (b.build(h, 0) == wire::PacketError::kOk) sink.send(b.packet());
  };
  switch (resp.kind) {
    case Response::Kind::kDrop:
      return;
    case Response::Kind::kRnrNak:
      return acknowledge(wire::Aeth::rnr_nak(resp.rnr_timer, resp.msn), req.psn);
    case Response::Kind::kNak:
      // A sequence error NAK names the PSN expected (IBA 9.7.5.2.1).
      return acknowledge(wire::Aeth::nak(resp.nak, resp.msn),
                         resp.nak == wire::NakCode::kPsnSequenceError ? qp.resp.epsn : req.psn);
    case Response::Kind::kAck:
    case Response::Kind::kDuplicate:
      break;
  }
  const wire::Aeth ack = wire::Aeth::ack(0x1f, resp.msn);  // credits: not limited (IBA 9.7.7.2)
  h.aeth = ack;
  if (req.kind == ReqKind::kRead) {
    const uint32_t n = req.packets;
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t position = (k == 0 ? F::kFirst : 0) | (k + 1 == n ? F::kLast : 0);
      const uint64_t offset = static_cast<uint64_t>(k) * mtu;
      const uint32_t len =
          static_cast<uint32_t>(std::min<uint64_t>(mtu, req.dma_length - std::min<uint64_t>(offset, req.dma_length)));
      h.bth.opcode = response_opcode(transport, F::kRead | (position == 0 ? F::kMiddle : position));
      h.bth.psn = wire::psn_add(wire::Psn(req.psn), k);
      wire::PacketBuilder b(buf);
      if (b.build(h, len) != wire::PacketError::kOk) return;
      if (len > 0 && resp.data_mr != nullptr) {
        const iovec to{b.payload().data(), len};
        // Unreachable now (its owner died): unanswered, the requester retries.
        if (!mem.read(*static_cast<const shm::SharedMr*>(resp.data_mr), resp.data_va + offset, len, IoList{&to, 1, len}, 0)
                 .is_ok())
          return;
      }
      sink.send(b.packet());
    }
    return;
  }
  // One compare keeps SEND and WRITE off the atomics' answers.
  static_assert(ReqKind::kFlush > ReqKind::kAtomicWrite && ReqKind::kAtomicWrite > ReqKind::kFetchAdd &&
                ReqKind::kFetchAdd > ReqKind::kCmpSwap);
  if (req.kind >= ReqKind::kCmpSwap) {
    h.bth.psn = wire::Psn(req.psn);
    if (req.kind >= ReqKind::kAtomicWrite) {
      // ATOMIC WRITE and FLUSH (IBA 1.5, and Linux's rxe): a READ RESPONSE
      // ONLY with no payload.
      h.bth.opcode = response_opcode(transport, F::kRead | F::kOnly);
    } else {
      h.bth.opcode = response_opcode(transport, F::kAck | F::kAtomic | F::kOnly);
      h.atomic_ack_eth.orig = resp.original;
    }
    wire::PacketBuilder b(buf);
    if (b.build(h, 0) == wire::PacketError::kOk) sink.send(b.packet());
    return;
  }
  // A repeated SEND or WRITE: acknowledge everything received so far.
  if (resp.kind == Response::Kind::kDuplicate) return acknowledge(ack, wire::psn_add(wire::Psn(qp.resp.epsn), -1).value());
  if (ack_req) acknowledge(ack, req.psn);
}

PacketVerdict serve_request_packet(shm::Segment& seg, uint32_t slot, const wire::PacketView& packet, uint32_t mtu,
                                   const uint8_t* grh, TargetMemory& mem, Notifier& notifier, PacketSink& sink) {
  const shm::SharedQp& qp = seg.qp(slot);
  iovec iov;
  Request req;
  const PacketVerdict verdict = request_from_packet(packet, qp, mtu, &iov, &req);
  shm::PortCounters& c = notifier.port_counters();
  switch (verdict) {
    case PacketVerdict::kRequest:
      break;
    case PacketVerdict::kDropped:
      c.dropped_requests.fetch_add(1, std::memory_order_relaxed);
      return verdict;
    case PacketVerdict::kMalformed:
      c.malformed_packets.fetch_add(1, std::memory_order_relaxed);
      return verdict;
  }
  if (grh != nullptr) {
    req.grh = grh;
    req.with_grh = true;
    req.sl = static_cast<uint8_t>(wire::roce_l3_type(std::span<const uint8_t, wire::kUdGrhBytes>(grh, wire::kUdGrhBytes)));
  }
  c.rcv_packets.fetch_add(req.packets, std::memory_order_relaxed);
  c.rcv_bytes.fetch_add(req.payload.bytes, std::memory_order_relaxed);
  // PMA PortRcvDataSL, under the receiving QP's SL (RoCE carries none): its
  // words as PortRcvData counts them on RoCE, BTH and ICRC included.
  const unsigned rcv_sl = qp.sl.load(std::memory_order_relaxed) & 15;
  c.rcv_words_sl[rcv_sl].fetch_add((req.payload.bytes + req.packets * kRoceRequestOverhead) / 4,
                                   std::memory_order_relaxed);
  c.rcv_packets_sl[rcv_sl].fetch_add(req.packets, std::memory_order_relaxed);  // PortVLOpPackets
  // The PMA's OpCode selectors (shm/op_select.h): a load and a compare while none is applied.
  if (const uint32_t select = seg.header().op_select.load(std::memory_order_relaxed); select != 0) [[unlikely]]
    count_selected_packet(c, select, static_cast<uint8_t>(packet.opcode()), static_cast<uint8_t>(rcv_sl),
                          (req.payload.bytes + kRoceRequestOverhead) / 4);
  const Response resp = respond(seg, slot, req, mem, notifier);
  answer_request(qp, req, resp, packet.bth().ack_req, mtu, mem, sink);
  return verdict;
}

}  // namespace softverbs::transport
