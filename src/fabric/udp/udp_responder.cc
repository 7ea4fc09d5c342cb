// Receive side of the UDP fabric: request packets go through the responder,
// whose answer leaves as packets (transport/response_packets.h); response
// packets go to the completer of the requesting QP.
#include <cstring>

#include "fabric/fabrics.h"
#include "transport/mtu.h"
#include "fabric/udp/udp_fabric.h"
#include "transport/completer.h"
#include "transport/requester.h"
#include "transport/response_packets.h"
#include "transport/round_trip.h"
#include "wire/ud_grh.h"

namespace softverbs::fabric::udp {
namespace {

using transport::mtu_bytes;

struct PeerCheck {
  const wire::Gid* from;
  bool matches = false;
};

// A connected QP answers only its peer's address (the BTH names no source QP).
void check_peer(transport::SendSide& s, void* arg) {
  auto* c = static_cast<PeerCheck*>(arg);
  c->matches = s.conn.ah.is_global && std::memcmp(s.conn.ah.grh.dgid.raw, c->from->data(), 16) == 0;
}

}  // namespace

void UdpFabric::on_request(const Endpoint& ep, const wire::Gid& to, const Peer& from, uint32_t slot,
                           const wire::PacketView& v) {
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
  const uint32_t mtu = mtu_bytes(ud ? static_cast<uint8_t>(port().mtu) : qp.path_mtu);
  uint8_t grh[wire::kUdGrhBytes];
  if (ud) {
    // The receive buffer's first 40 bytes: the IP header this datagram came in.
    wire::UdGrhFields f;
    f.sgid = from.gid;
    f.dgid = to;
    f.ib_length = v.bytes().size();
    wire::write_roce_grh(grh, f);
  }
  // The answer's packets are gathered and leave together (send_many), so
  // that a READ response burst goes as GSO sends, as a request burst does.
  // The builder reuses one buffer per packet: each is copied here.
  constexpr size_t kBatch = 16;
  struct ToPeer final : transport::PacketSink {
    UdpFabric* fabric;
    const Endpoint* ep;
    const wire::Gid* to;
    uint8_t tc;
    size_t count = 0;
    std::span<uint8_t> ready[kBatch];
    uint8_t slots[kBatch][kMaxIbPacket];
    void send(std::span<uint8_t> packet) override {
      if (packet.size() > kMaxIbPacket) return;  // cannot be built: the builder's buffer is this size
      if (count == kBatch) flush();
      std::memcpy(slots[count], packet.data(), packet.size());
      ready[count] = {slots[count], packet.size()};
      ++count;
    }
    void flush() {
      if (count > 0) fabric->send_many(*ep, *to, {ready, count}, tc);
      count = 0;
    }
  } to_peer;
  // Responses carry the QP's own path's traffic class, as rxe's and a NIC's do.
  to_peer.tc = qp.traffic_class;
  to_peer.fabric = this;
  to_peer.ep = &ep;
  to_peer.to = &from.gid;
  // The responder runs here, in the QP's owner (its one writer, invariant 3).
  // An XRC request lands in the memory of the SRQ it names, whose owner may
  // be another process of the domain (shared through a file): reached as
  // the host link reaches a peer. The responder checks the SRQ itself.
  if (qp.qp_type == IBV_QPT_XRC_RECV && v.has(wire::Header::kXrceth)) {
    const shm::SharedSrq& srq = seg.srq(v.xrceth().srqn & (shm::kMaxSrqs - 1));
    if (srq.slot_state.load(std::memory_order_acquire) == static_cast<uint32_t>(shm::SlotState::kLive) &&
        srq.srqn == v.xrceth().srqn && !(srq.owner == host_->self())) {
      struct Serve {
        shm::Segment* seg;
        uint32_t slot;
        const wire::PacketView* v;
        uint32_t mtu;
        transport::Notifier* notifier;
        transport::PacketSink* sink;
      } serve{&seg, slot, &v, mtu, &host_->notifier(), &to_peer};
      fabric::with_peer_memory(seg, srq.owner, [](transport::TargetMemory& mem, void* arg) {
        const auto* s = static_cast<Serve*>(arg);
        transport::serve_request_packet(*s->seg, s->slot, *s->v, s->mtu, nullptr, mem, *s->notifier, *s->sink);
      }, &serve);
      to_peer.flush();
      return;
    }
  }
  transport::LocalMemory mem;  // the QP is ours
  transport::serve_request_packet(seg, slot, v, mtu, ud ? grh : nullptr, mem, host_->notifier(), to_peer);
  to_peer.flush();
}

namespace {

struct ResponseArgs {
  const wire::PacketView* v;
  const wire::Gid* from;
  bool time_it;  // the fabric's tail-loss probes are on
};

void deliver_response(transport::SendSide& s, void* arg) {
  const auto* a = static_cast<ResponseArgs*>(arg);
  // A connected QP takes answers only from its peer's address (the BTH names no source QP).
  if (!s.conn.ah.is_global || std::memcmp(s.conn.ah.grh.dgid.raw, a->from->data(), 16) != 0) return;
  if (a->time_it) transport::rtt_note_answer(s, a->v->bth().psn.value());
  transport::on_response_packet(s, *a->v);
  transport::progress(s);
}

}  // namespace

void UdpFabric::on_response(const Peer& from, uint32_t slot, const wire::PacketView& v) {
  ResponseArgs args{&v, &from.gid, tail_probe_};
  if (!host_->with_send_side(slot, v.bth().dest_qp, deliver_response, &args))
    host_->notifier().port_counters().unknown_qp_packets.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace softverbs::fabric::udp
