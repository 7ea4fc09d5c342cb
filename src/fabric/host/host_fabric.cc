#include "fabric/host/host_fabric.h"

#include <algorithm>
#include <cstring>

#include "fabric/host/host_faults.h"
#include "fabric/host/peer_memory.h"
#include "fabric/fabrics.h"
#include "fabric/gsi_route.h"
#include "shm/mcast_groups.h"
#include "shm/process_registry.h"
#include "shm/qp_pkeys.h"
#include "shm/rings.h"
#include "transport/completer.h"
#include "transport/iov.h"
#include "transport/qp_types.h"
#include "transport/requester.h"
#include "transport/mem_ops.h"
#include "transport/op_counts.h"
#include "transport/responder.h"
#include "transport/vl.h"
#include "transport/wr_opcode_table.h"
#include "util/log.h"
#include "wire/cm_mad.h"
#include "wire/psn.h"
#include "wire/ud_grh.h"

namespace softverbs::fabric::host {

using transport::IoList;
using transport::KeyCheck;
using transport::MrRef;
using transport::ReqKind;

HostFabric& host_fabric() {
  static HostFabric f;
  return f;
}

namespace {

// The port's GID `index` (the sender's, for a UD GRH): the RoCE addresses, or
// on InfiniBand the link-local prefix plus the port GUID.
wire::Gid own_gid(const shm::Segment& seg, uint8_t index) {
  wire::Gid gid{0xfe, 0x80};
  const PortSetup& config = port();
  if (config.roce) return index < config.gids.size() ? config.gids[index] : config.gids.front();
  std::memcpy(gid.data() + 8, &seg.header().port_guid, 8);
  return gid;
}

HostFaults& faults() {
  static HostFaults f(port().faults);
  return f;
}

// Whether an address vector names a port of this host's device; per message.
[[gnu::always_inline]] inline bool reaches_host(const shm::Segment& seg, const ibv_ah_attr& ah) {
  if (ah.port_num != 1) return false;
  // A RoCE port: its own addresses are this host.
  static const bool roce = port().roce;  // fixed for the process; this runs per message
  if (roce) return ah.is_global && port().gid_index(ah.grh.dgid.raw) >= 0;
  if (ah.is_global) return std::memcmp(ah.grh.dgid.raw, own_gid(seg, 0).data(), 16) == 0;
  return ah.dlid == seg.header().lid;
}

// IBA 7.2 / 14.2.5.6: data packets leave only an ACTIVE port (an ARMED one
// sends SMPs alone, which never come this way: mad/agent.cc). The port's
// state shares the header's line with `lid`, which every request reads.
constexpr uint8_t kPortActive = 4;
[[gnu::always_inline]] inline bool port_active(const shm::Segment& seg) {
  return seg.header().port_state.load(std::memory_order_relaxed) == kPortActive;
}

// A request the port discards (PortXmitDiscards): it never leaves, so the
// requester's timer decides, as with the link down (RC: RETRY_EXC_ERR; UD
// and UC complete once sent).
[[gnu::noinline, gnu::cold]] ibv_wc_status discard_at_port(transport::SendSide& s) {
  s.qp.notifier->port_counters().port_state_discards.fetch_add(1, std::memory_order_relaxed);
  SV_LOG_RATELIMITED(kDebug, "QP %#x: the port is not ACTIVE; request discarded", s.qp.qpn);
  return IBV_WC_SUCCESS;
}

// The QP a request goes to, when it is live on this host and its process is
// alive; otherwise why not (a request there is never answered: the
// requester's timer decides).
struct Target {
  uint32_t slot = 0;
  shm::OwnerId owner;
  bool local = false;  // our own process
  // Carried by the subnet (another CA's QP at either end: fabric::SubnetRoute),
  // whose answer gives the sender's addresses. Set by route() only with a
  // topology (QpConsts::subnet): its caller starts it false.
  bool subnet;
  SubnetSource source;
};

// With a topology (issue 19): between two QPs of the device's own CA as
// without one; with another CA's at either end the subnet decides, on the
// management plane's slow path, so such a request is never placed at post.
constexpr const char* kNotCarried = "the subnet does not carry it there";
[[gnu::noinline]] const char* route_in_subnet(const shm::Segment& seg, const transport::SendSide& s,
                                              const ibv_ah_attr& ah, bool at_post, Target* out) {
  const uint8_t to_ca = seg.qp(out->slot).ca;
  if ((s.qp.ca | to_ca) == 0) return reaches_host(seg, ah) ? nullptr : "destination not on this host";
  if (at_post) return "left to transmit: the subnet decides";
  const SubnetRoute carries = subnet_route();
  if (carries == nullptr || ah.port_num != 1) return "destination not on this host";
  if (!carries(seg, s.qp.ca, ah, to_ca, &out->source)) return kNotCarried;
  out->subnet = true;
  return nullptr;
}

// What the subnet carried (issue 19) is counted on the ports it crossed,
// never on the device's port unless it is one of them.
[[gnu::noinline, gnu::cold]] void count_in_subnet(const transport::SendSide& s, const ibv_ah_attr& ah,
                                                  const Target& t, uint32_t packets, uint64_t bytes) {
  if (const SubnetCount count = subnet_count())
    count(*s.qp.seg, s.qp.ca, ah.dlid, s.qp.seg->qp(t.slot).ca, ah.sl, packets, bytes);
}
// The answer to it goes back to the requester's LID by the routes from the
// responder's port (which may take other links), on the responder's SL. A
// READ's carries its data.
[[gnu::noinline, gnu::cold]] void count_answer_in_subnet(const transport::SendSide& s, const Target& t,
                                                         uint64_t read_bytes) {
  const uint32_t packets = read_bytes == 0 ? 1 : transport::message_packets(read_bytes, s.conn.mtu);
  if (const SubnetCount count = subnet_count())
    count(*s.qp.seg, s.qp.seg->qp(t.slot).ca, t.source.lid, s.qp.ca,
          s.qp.seg->qp(t.slot).sl.load(std::memory_order_relaxed), packets, read_bytes);
}

[[gnu::always_inline]] inline const char* route(shm::Segment& seg, const transport::SendSide& s, const ibv_ah_attr& ah, uint32_t dest_qpn,
                  bool at_post, Target* out) {
  const int slot = transport::qp_slot_of(seg, dest_qpn);
  if (slot < 0) return reaches_host(seg, ah) ? "no such QP" : "destination not on this host";
  out->slot = static_cast<uint32_t>(slot);
  if (s.qp.subnet) [[unlikely]] {
    if (const char* why = route_in_subnet(seg, s, ah, at_post, out)) return why;
  } else if (!reaches_host(seg, ah)) {
    return "destination not on this host";
  }
  out->owner = seg.qp(out->slot).owner;
  out->local = out->owner == s.qp.self;
  if (!out->local && !shm::process_alive(seg, out->owner)) return "the QP's process is gone";
  return nullptr;
}

// QP1 is shared by the processes of the port: the MAD a datagram to it
// carries says whose GSI agent it is for (src/fabric/gsi_route.h).
uint32_t gsi_agent_for(const shm::Segment& seg, const transport::IoList& payload) {
  uint8_t mad[wire::cm::kMadBytes];
  if (payload.bytes < sizeof mad) return 0;
  transport::IoCursor cur(payload);
  size_t got = 0;
  while (got < sizeof mad) {
    const iovec piece = cur.next(sizeof mad - got);
    if (piece.iov_len == 0) break;
    std::memcpy(mad + got, piece.iov_base, piece.iov_len);
    got += piece.iov_len;
  }
  return fabric::gsi_route(seg.path(), {mad, got});
}

// IBA Annex A14: an XRC request reaches the memory of the XRC SRQ's owner,
// who need not be the XRC_RECV QP's. One the responder will refuse (no such
// SRQ) keeps the QP's owner: no memory is reached.
void retarget_to_xrc_srq(shm::Segment& seg, const transport::SendSide& s, uint32_t srqn, Target* t) {
  const shm::SharedSrq& srq = seg.srq(srqn & (shm::kMaxSrqs - 1));
  if (srq.slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::SlotState::kLive) ||
      srq.srqn != srqn)
    return;
  t->owner = srq.owner;
  t->local = t->owner == s.qp.self;
}

// Where the target QP's next receive completion goes (SendSide::recv_cqe_hint).
void note_next_recv_cqe(transport::SendSide& s, const shm::Segment& seg, uint32_t slot) {
  const shm::SharedQp& qp = seg.qp(slot);
  if (qp.recv_cq >= shm::kMaxCqs) return;
  const shm::SharedCq& cq = seg.cq(qp.recv_cq);
  if (cq.slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::SlotState::kLive)) return;
  const shm::CqeSlot* next = shm::cq_slot(seg, cq, cq.tail.load(std::memory_order_relaxed));
  s.hints.recv_cqe.store(reinterpret_cast<uintptr_t>(next), std::memory_order_relaxed);
}

// For `softverbs status`: the slowest path our requests needed.
void note_path(transport::SendSide& s, const PeerMemory& mem) {
  if (mem.used() == Path::kLocal) return;  // it moved no bytes: nothing learnt
  const auto path = static_cast<uint8_t>(mem.used());
  if (s.qp.shared->host_path != path) s.qp.shared->host_path = path;  // a store per message would dirty the line
}

// The PMA's OpCode selectors (shm/op_select.h): a message's packets the
// port received, by the opcodes the wire would have given them.
[[gnu::noinline]] void count_op_selected_slow(transport::SendSide& s, const transport::Request& req,
                                              uint32_t select) {
  transport::MessageShape m;
  m.qp_type = s.qp.qp_type;
  m.kind = req.kind;
  m.imm = req.has_imm;
  m.inv = req.has_inv;
  m.packets = req.packets;
  m.bytes = req.payload.bytes;
  m.mtu = s.conn.mtu;
  transport::count_selected_message(s.qp.notifier->port_counters(), select, m,
                                    s.qp.shared->sl.load(std::memory_order_relaxed), transport::kIbPacketOverhead);
}

// Only a load and a compare while no selector is applied.
[[gnu::always_inline]] inline void count_op_selected(const shm::Segment& seg, transport::SendSide& s,
                                                     const transport::Request& req) {
  const uint32_t select = seg.header().op_select.load(std::memory_order_relaxed);
  if (select != 0) [[unlikely]]
    count_op_selected_slow(s, req, select);
}

// IBA 10.5.2.5: whether a UD datagram goes to a multicast group: DestQP
// 0xFFFFFF and an address naming a group, by its MGID, or on InfiniBand
// without a GRH by its MLID (*key: which).
struct McastKey {
  const uint8_t* mgid = nullptr;  // by MGID when set, else by `mlid`
  uint16_t mlid = 0;
};
bool multicast_key(const ibv_ah_attr& ah, uint32_t dest_qpn, McastKey* key) {
  if (dest_qpn != shm::kMulticastQpn || ah.port_num != 1) return false;
  if (ah.is_global && shm::is_multicast_gid(ah.grh.dgid.raw)) {
    key->mgid = ah.grh.dgid.raw;
    return true;
  }
  key->mlid = ah.dlid;
  return !port().roce && shm::is_multicast_lid(ah.dlid);
}

// Where a multicast datagram goes with a topology (issue 19): QPs of the
// sender's CA get it as without one; another CA's only when the switches'
// multicast forwarding tables carried it there (fabric::SubnetMulticast).
struct McastRoute {
  bool subnet = false;   // other CAs' QPs only where `reached` says
  bool sourced = false;  // the subnet counted it and `source` is the sender's port
  uint64_t reached = 0;  // bit k: CA k's port received it
  SubnetSource source{};
};

// A copy of `req` to each QP attached to the group, in whichever process of
// this host: each its own datagram, as the switch's replicas would be. A QP
// created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB does not get its own. A
// datagram without a GRH (addressed by MLID) gets one naming the group's
// MGID, so every member sees the group it came through.
[[gnu::noinline]] void deliver_multicast(transport::SendSide& s, transport::Request& req, const McastKey& key,
                                         const ibv_ah_attr& ah, const McastRoute& route) {
  shm::Segment& seg = *s.qp.seg;
  uint8_t grh[wire::kUdGrhBytes];
  uint8_t sent_grh[wire::kUdGrhBytes];
  wire::UdGrhFields fields;
  fields.sgid = own_gid(seg, ah.grh.sgid_index);
  if (route.sourced) {
    // Another CA's datagram names its own port in the SGID (GRH bytes 16-23: the interface ID).
    std::memcpy(fields.sgid.data() + 8, route.source.port_guid, 8);
    if (req.with_grh) {
      std::memcpy(sent_grh, req.grh, sizeof sent_grh);
      std::memcpy(sent_grh + 16, route.source.port_guid, 8);
      req.grh = sent_grh;
    }
  }
  fields.hop_limit = ah.grh.hop_limit;
  fields.ib_length = 12 + 8 + req.payload.bytes + 4;  // BTH, DETH, payload, ICRC
  shm::QpCounters& counts = s.qp.shared->counters;
  const bool block_self = s.qp.shared->block_self_mcast != 0;
  shm::for_each_mcast_member(seg, key.mgid, key.mlid, [&](const shm::SharedMcastGroup& group, uint32_t qpn) {
    if (qpn == s.qp.qpn && block_self) return;
    const int slot = transport::qp_slot_of(seg, qpn);
    if (slot < 0) return;  // gone since it attached
    const uint8_t ca = seg.qp(static_cast<uint32_t>(slot)).ca;
    // IBA 18.2.4.3: another CA gets it only through the switches.
    const bool crossed = route.subnet && ca != s.qp.ca;
    if (crossed && (ca >= 64 || (route.reached >> ca & 1) == 0)) return;
    const shm::OwnerId owner = seg.qp(static_cast<uint32_t>(slot)).owner;
    const bool local = owner == s.qp.self;
    if (!local && !shm::process_alive(seg, owner)) return;
    if (key.mgid == nullptr) {
      wire::UdGrhFields f = fields;
      std::memcpy(f.dgid.data(), group.mgid, 16);
      wire::write_ib_grh(grh, f);
      req.grh = grh;
      req.with_grh = true;
    }
    req.dest_qpn = qpn;  // the responder takes the datagram as its own
    transport::LocalMemory local_mem;
    PeerMemory peer_mem(seg, owner);
    transport::TargetMemory& mem = local ? static_cast<transport::TargetMemory&>(local_mem) : peer_mem;
    if (!crossed) {  // the subnet's ports counted what crossed them
      shm::add_single_writer(counts.port_rcv_packets, req.packets);
      shm::add_single_writer(counts.port_rcv_bytes, req.payload.bytes);
      count_op_selected(seg, s, req);
    }
    transport::respond(seg, static_cast<uint32_t>(slot), req, mem, *s.qp.notifier);
    if (!local) note_path(s, peer_mem);
  });
}

// A UD datagram to a multicast group, once the fault injector let it leave:
// counted where it crossed (the device's port, or with a topology the
// subnet's ports on its way), then delivered. UD completes once sent.
[[gnu::noinline, gnu::cold]] ibv_wc_status send_multicast(transport::SendSide& s, transport::Request& req,
                                                          const McastKey& key, const ibv_ah_attr& ah, bool corrupt) {
  shm::QpCounters& counts = s.qp.shared->counters;
  McastRoute route;
  route.subnet = s.qp.subnet;
  if (route.subnet) {
    if (const SubnetMulticast carries = subnet_multicast()) {
      // The packet's DLID is the AH's: one that is no multicast LID reaches no switch's MFT.
      route.reached = carries(*s.qp.seg, s.qp.ca, ah.dlid, ah.sl, req.packets, req.payload.bytes, &route.source);
      route.sourced = true;
      req.slid = route.source.lid;
    }
  }
  if (!route.sourced) {
    shm::add_single_writer(counts.port_xmit_packets, req.packets);
    shm::add_single_writer(counts.port_xmit_bytes, req.payload.bytes);
  }
  if (corrupt) {
    // As a unicast request's (transmit): received, failing its ICRC.
    if (!route.sourced) {
      shm::add_single_writer(counts.port_rcv_packets, req.packets);
      shm::add_single_writer(counts.port_rcv_bytes, req.payload.bytes);
    }
    s.qp.notifier->port_counters().faults_corrupted.fetch_add(1, std::memory_order_relaxed);
    s.qp.notifier->port_counters().icrc_errors.fetch_add(1, std::memory_order_relaxed);
    return IBV_WC_SUCCESS;
  }
  deliver_multicast(s, req, key, ah, route);
  return IBV_WC_SUCCESS;
}

}  // namespace


namespace {

// A WRITE or SEND carried out at post (place_at_post), as the token its WQE
// keeps: the target QP and the responder's answer, for transmit to report.
struct PlacedAnswer {
  uint32_t slot;
  transport::Response::Kind kind;
  wire::NakCode nak;
  uint8_t rnr_timer;  // a SEND that found no receive WQE

  static_assert(shm::kQpSlotBits <= 16);
  uint32_t token() const {
    // Bit 30 is the link's kPlacedAndDone.
    return 1u << 31 | static_cast<uint32_t>(nak) << 24 | static_cast<uint32_t>(rnr_timer & 0x1f) << 19 |
           static_cast<uint32_t>(kind) << 16 | slot;
  }
  static PlacedAnswer of(uint32_t token) {
    return {token & 0xffff, static_cast<transport::Response::Kind>((token >> 16) & 0x7),
            static_cast<wire::NakCode>((token >> 24) & 0x3f), static_cast<uint8_t>((token >> 19) & 0x1f)};
  }
};
static_assert(static_cast<uint32_t>(transport::Response::Kind::kDrop) < 8);
static_assert(static_cast<uint32_t>(wire::NakCode::kInvalidRdRequest) < 0x40);

// The responder's answer, as the completer's events: what the ACKNOWLEDGE,
// READ response or ATOMIC ACKNOWLEDGE packets would have said on a wire.
[[gnu::always_inline]] inline void report(transport::SendSide& s, const transport::SendWqe& w, ReqKind kind, const transport::Response& resp,
            uint32_t expected_psn) {
  using Kind = transport::Response::Kind;
  switch (resp.kind) {
    case Kind::kDrop:
      return;  // never answered: the requester's timer decides
    case Kind::kRnrNak:
      return transport::on_acknowledge(s, w.psn, wire::Aeth::rnr_nak(resp.rnr_timer, resp.msn));
    case Kind::kNak:
      // A sequence error NAK names the PSN expected (IBA 9.7.5.2.1).
      return transport::on_acknowledge(
          s, resp.nak == wire::NakCode::kPsnSequenceError ? expected_psn : w.psn, wire::Aeth::nak(resp.nak, resp.msn));
    case Kind::kAck:
    case Kind::kDuplicate:
      break;
  }
  const wire::Aeth ack = wire::Aeth::ack(0x1f, resp.msn);
  switch (kind) {
    case ReqKind::kRead:
    case ReqKind::kAtomicWrite:  // its READ RESPONSE carries no data
    case ReqKind::kFlush:        // never sent: no WR posts one
      return transport::on_read_placed(s, w.psn);
    case ReqKind::kCmpSwap:
    case ReqKind::kFetchAdd:
      return transport::on_atomic_acknowledge(s, w.psn, ack, resp.original);
    case ReqKind::kSend:
    case ReqKind::kWrite:
      return transport::on_acknowledge(s, wire::psn_add(wire::Psn(w.psn), w.packets - 1).value(), ack);
  }
}

}  // namespace

ibv_wc_status HostFabric::transmit(transport::SendSide& s, transport::SendWqe& w, const IoList& list, uint32_t) {
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w.opcode);
  shm::Segment& seg = *s.qp.seg;
  const bool ud = s.qp.qp_type == IBV_QPT_UD;
  const ibv_ah_attr& ah = ud ? *w.ah : s.conn.ah;
  uint32_t dest_qpn = ud ? w.remote_qpn : s.conn.dest_qpn;
  if (ud && dest_qpn == wire::cm::kGsiQpn) dest_qpn = gsi_agent_for(seg, list);
  shm::QpCounters& counts = s.qp.shared->counters;
  if (w.placed != 0) {
    // Carried out at post, and counted there: only its answer is left to report.
    const PlacedAnswer placed = PlacedAnswer::of(w.placed);
    w.placed = 0;  // a retransmission goes the whole way
    transport::Response resp;
    resp.kind = placed.kind;
    resp.nak = placed.nak;
    resp.rnr_timer = placed.rnr_timer;
    if (s.qp.qp_type == IBV_QPT_RC) report(s, w, op->kind, resp, seg.qp(placed.slot).resp.epsn);
    return IBV_WC_SUCCESS;
  }
  // Another CA's port is the subnet's to check (route_in_subnet).
  if (!port_active(seg) && s.qp.ca == 0) [[unlikely]]
    return discard_at_port(s);
  McastKey mcast;
  const bool multicast = ud && multicast_key(ah, dest_qpn, &mcast);
  Target target;
  target.subnet = false;
  if (multicast) {
    // Its QPs are found at delivery.
  } else if (const char* why = route(seg, s, ah, dest_qpn, false, &target)) {
    SV_LOG_RATELIMITED(kDebug, "QP %#x to QP %#x: %s", s.qp.qpn, dest_qpn, why);
    // A switch port that discarded it (its SL on VL15) counts it.
    if (why == kNotCarried) [[unlikely]]
      count_in_subnet(s, ah, target, w.packets, op->kind == ReqKind::kSend || op->kind == ReqKind::kWrite ? list.bytes : 0);
    return IBV_WC_SUCCESS;  // lost on the way: the requester's timer decides
  }

  const bool xrc = s.qp.qp_type == IBV_QPT_XRC_SEND;
  if (xrc) retarget_to_xrc_srq(seg, s, w.remote_srqn, &target);

  transport::Request req;
  req.kind = op->kind;
  req.has_imm = op->has_imm;
  req.xrc_srqn = w.remote_srqn;
  req.solicited = (w.send_flags & IBV_SEND_SOLICITED) != 0;
  req.psn = w.psn;
  req.packets = w.packets;
  req.dest_qpn = dest_qpn;
  req.src_qpn = ud && s.qp.wire_src_qpn != 0 ? s.qp.wire_src_qpn : s.qp.qpn;
  req.slid = seg.header().lid;
  req.pkey = shm::qp_pkey(*s.qp.shared);
  if (target.subnet) [[unlikely]]
    req.slid = target.source.lid;
  req.imm = w.imm_data;
  req.has_inv = op->has_inv;
  req.inv_rkey = w.imm_data;
  req.va = w.remote_addr;
  req.rkey = w.rkey;
  req.compare_add = w.compare_add;
  req.swap = w.swap;
  uint8_t grh[wire::kUdGrhBytes];
  if (ud) {
    // IBA 10.2.4: a WR Q_Key with its high bit set means the QP's own.
    req.qkey = (w.remote_qkey & 0x80000000u) ? s.qp.shared->qkey : w.remote_qkey;
    req.with_grh = ah.is_global != 0;
    if (req.with_grh) {
      wire::UdGrhFields f;
      f.sgid = own_gid(seg, ah.grh.sgid_index);
      if (target.subnet) std::memcpy(f.sgid.data() + 8, target.source.port_guid, 8);
      std::memcpy(f.dgid.data(), ah.grh.dgid.raw, 16);
      f.traffic_class = ah.grh.traffic_class;
      f.flow_label = ah.grh.flow_label;
      f.hop_limit = ah.grh.hop_limit;
      f.ib_length = 12 + 8 + w.length + 4;  // BTH, DETH, payload, ICRC
      if (port().roce)
        wire::write_roce_grh(grh, f);
      else
        wire::write_ib_grh(grh, f);
      req.grh = grh;
    }
    req.sl = port().roce && req.with_grh ? static_cast<uint8_t>(wire::roce_l3_type(grh)) : ah.sl;
  }
  if (op->kind == ReqKind::kSend || op->kind == ReqKind::kWrite || op->kind == ReqKind::kAtomicWrite) {
    req.payload = list;
    req.dma_length = static_cast<uint32_t>(list.bytes);
  } else {
    req.dma_length = op->kind == ReqKind::kRead ? static_cast<uint32_t>(w.length) : 8;
  }

  shm::add_single_writer(counts.sent_packets, w.packets);

  // A request the injector drops is a discard of the sending port (the PMA's
  // PortXmitDiscards): it never left, so PortXmitPkts/Data do not count it.
  const HostFaultDraw fault = faults().draw();
  if (fault.lose_request) {
    s.qp.notifier->port_counters().faults_dropped.fetch_add(1, std::memory_order_relaxed);
    return IBV_WC_SUCCESS;  // never arrived: the requester's timer decides
  }
  if (multicast) [[unlikely]]
    return send_multicast(s, req, mcast, ah, fault.corrupt_request);
  if (target.subnet) [[unlikely]] {
    count_in_subnet(s, ah, target, w.packets, req.payload.bytes);
  } else {
    shm::add_single_writer(counts.port_xmit_packets, w.packets);
    shm::add_single_writer(counts.port_xmit_bytes, req.payload.bytes);
  }
  if (fault.corrupt_request) {
    // Received, failing its ICRC: the receiving port's PortRcvErrors (and,
    // as injected corruption, its SymbolErrorCounter); the requester's timer decides.
    if (!target.subnet) {  // the subnet's ports counted it
      shm::add_single_writer(counts.port_rcv_packets, req.packets);
      shm::add_single_writer(counts.port_rcv_bytes, req.payload.bytes);
    }
    s.qp.notifier->port_counters().faults_corrupted.fetch_add(1, std::memory_order_relaxed);
    s.qp.notifier->port_counters().icrc_errors.fetch_add(1, std::memory_order_relaxed);
    return IBV_WC_SUCCESS;
  }

  transport::LocalMemory local_mem;
  PeerMemory peer_mem(seg, target.owner);
  transport::TargetMemory& mem = target.local ? static_cast<transport::TargetMemory&>(local_mem) : peer_mem;
  auto deliver = [&] {
    if (!target.subnet) [[likely]] {  // the subnet's ports counted it as it crossed them
      shm::add_single_writer(counts.port_rcv_packets, req.packets);
      shm::add_single_writer(counts.port_rcv_bytes, req.payload.bytes);
      count_op_selected(seg, s, req);
    }
    return transport::respond(seg, target.slot, req, mem, *s.qp.notifier);
  };
  transport::Response resp = deliver();
  if (fault.duplicate) {
    s.qp.notifier->port_counters().faults_duplicated.fetch_add(1, std::memory_order_relaxed);
    resp = deliver();
  }
  using Kind = transport::Response::Kind;
  if (fault.lose_response) {
    s.qp.notifier->port_counters().faults_dropped.fetch_add(1, std::memory_order_relaxed);
    return IBV_WC_SUCCESS;  // executed, but its answer is lost
  }
  const bool answered = resp.kind == Kind::kAck || resp.kind == Kind::kDuplicate;
  if (answered && op->kind == ReqKind::kRead && resp.data_mr != nullptr) {
    // The READ's data goes straight from the target's memory into ours.
    const auto* mr = static_cast<const shm::SharedMr*>(resp.data_mr);
    if (!mem.read(*mr, resp.data_va, std::min<uint64_t>(w.length, list.bytes), list, 0).is_ok()) {
      // An ODP page the owner unmapped is a remote access error, as the
      // responder answers on the UDP fabric; anything else is lost on the way.
      resp.kind = transport::on_demand(*mr) ? Kind::kNak : Kind::kDrop;
      resp.nak = transport::NakCode::kRemoteAccessError;
    }
  } else if (answered && (op->kind == ReqKind::kSend || op->has_imm) && !ud && !xrc) {  // a receive completion
    note_next_recv_cqe(s, seg, target.slot);
  }
  if (!target.local) note_path(s, peer_mem);
  if (target.subnet && transport::reliable_qp(s.qp.qp_type) && resp.kind != Kind::kDrop) [[unlikely]]
    count_answer_in_subnet(s, target, op->kind == ReqKind::kRead ? w.length : 0);
  // UC and UD answer nothing: the requester completes them once sent.
  if (transport::reliable_qp(s.qp.qp_type)) report(s, w, op->kind, resp, seg.qp(target.slot).resp.epsn);
  return IBV_WC_SUCCESS;
}

uint32_t HostFabric::place_at_post(transport::SendSide& s, const ibv_send_wr& wr, uint64_t length) {
  // Only the plain case, without faults; everything else is left to transmit.
  // The caller offers RDMA WRITE, SEND and SEND with immediate.
  constexpr int kMaxInlineSges = 4;
  const bool is_inline = (wr.send_flags & IBV_SEND_INLINE) != 0;
  if ((is_inline ? wr.num_sge > kMaxInlineSges : wr.num_sge != 1) || length == 0 || length > shm::kMaxMsgSize ||
      (s.qp.qp_type != IBV_QPT_RC && s.qp.qp_type != IBV_QPT_UC) || faults().active())
    return 0;
  if (s.qp.shared->state.load(std::memory_order_acquire) != IBV_QPS_RTS || s.completer.rnr_wait) return 0;
  // An SL on VL15 is discarded and a paced link's request waits for its
  // turn, both in the requester (transport/vl.h): never placed.
  if (transport::path_to_port(s)) return 0;
  shm::Segment& seg = *s.qp.seg;
  if (!port_active(seg)) [[unlikely]]
    return 0;  // transmit discards it
  Target target;
  if (route(seg, s, s.conn.ah, s.conn.dest_qpn, true, &target) != nullptr) return 0;
  iovec iov[kMaxInlineSges];
  uint32_t count = 0;
  if (is_inline) {
    for (int i = 0; i < wr.num_sge; ++i)
      iov[count++] = {reinterpret_cast<void*>(wr.sg_list[i].addr), wr.sg_list[i].length};
  } else {
    const ibv_sge& sge = wr.sg_list[0];
    MrRef source;
    if (transport::check_key(seg, sge.lkey, false, s.qp.self, s.qp.pd_id, 0, sge.addr, length, 0, &source) !=
        KeyCheck::kOk)
      return 0;  // transmit fails it with the local error
    if (transport::on_demand(*source.mr)) return 0;  // transmit faults its pages in
    iov[count++] = {reinterpret_cast<void*>(source.va), length};
  }
  // The request the requester sends next, carried out now: the responder
  // checks and places the payload (and a SEND's receive completion: the
  // things the peer waits for) ahead of the queueing; transmit later only
  // reports the answer.
  const bool send = wr.opcode != IBV_WR_RDMA_WRITE;
  transport::Request req;
  req.kind = send ? ReqKind::kSend : ReqKind::kWrite;
  req.psn = s.requester.next_psn;
  req.packets = transport::message_packets(length, s.conn.mtu);
  req.dest_qpn = s.conn.dest_qpn;
  req.src_qpn = s.qp.qpn;
  req.slid = seg.header().lid;
  req.pkey = shm::qp_pkey(*s.qp.shared);
  req.dma_length = static_cast<uint32_t>(length);
  req.payload = {iov, count, length};
  if (send) {
    req.has_imm = wr.opcode == IBV_WR_SEND_WITH_IMM;
    req.imm = req.has_imm ? wr.imm_data : 0;
    req.solicited = (wr.send_flags & IBV_SEND_SOLICITED) != 0;
  } else {
    req.va = wr.wr.rdma.remote_addr;
    req.rkey = wr.wr.rdma.rkey;
  }
  transport::LocalMemory local_mem;
  PeerMemory peer_mem(seg, target.owner);
  transport::TargetMemory& mem = target.local ? static_cast<transport::TargetMemory&>(local_mem) : peer_mem;
  const transport::Response resp = transport::respond(seg, target.slot, req, mem, *s.qp.notifier);
  shm::QpCounters& counts = s.qp.shared->counters;
  shm::add_single_writer(counts.sent_packets, req.packets);
  shm::add_single_writer(counts.port_xmit_packets, req.packets);
  shm::add_single_writer(counts.port_xmit_bytes, length);
  shm::add_single_writer(counts.port_rcv_packets, req.packets);
  shm::add_single_writer(counts.port_rcv_bytes, length);
  count_op_selected(seg, s, req);
  if (!target.local) note_path(s, peer_mem);
  if (send) {
    if (resp.kind == transport::Response::Kind::kAck) {
      note_next_recv_cqe(s, seg, target.slot);
    }
  } else if (resp.kind == transport::Response::Kind::kAck &&
             req.rkey != s.hints.write_rkey.load(std::memory_order_relaxed)) {
    // The hint is looked up again only for a new R_Key: a region's mapping
    // here stays where it is while its registration lives.
    const char* landed =
        target.local ? reinterpret_cast<const char*>(resp.data_va)
        : peer_mem.used() == Path::kMap
            ? peer_mem.direct(*static_cast<const shm::SharedMr*>(resp.data_mr), resp.data_va, length)
            : nullptr;
    if (landed != nullptr) {
      s.hints.write_rkey.store(req.rkey, std::memory_order_relaxed);
      s.hints.write_delta.store(reinterpret_cast<intptr_t>(landed) - static_cast<intptr_t>(req.va),
                                std::memory_order_relaxed);
    }
  }
  // UC completes once sent, whatever the answer (IBA 9.8); RC on its ACK.
  const bool done = s.qp.qp_type == IBV_QPT_UC || resp.kind == transport::Response::Kind::kAck;
  return PlacedAnswer{target.slot, resp.kind, resp.nak, resp.rnr_timer}.token() |
         (done ? transport::Link::kPlacedAndDone : 0);
}

}  // namespace softverbs::fabric::host
