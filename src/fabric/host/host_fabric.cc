#include "fabric/host/host_fabric.h"
#include "transport/mtu.h"

#include <algorithm>
#include <cstring>

#include "fabric/host/host_faults.h"
#include "fabric/host/peer_memory.h"
#include "fabric/port_config.h"
#include "shm/process_registry.h"
#include "shm/rings.h"
#include "transport/local_sges.h"
#include "transport/mem_ops.h"
#include "transport/responder.h"
#include "transport/wr_opcode_table.h"
#include "util/log.h"
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
  const PortConfig& config = port_config();
  if (config.roce) return index < config.gids.size() ? config.gids[index] : config.gids.front();
  std::memcpy(gid.data() + 8, &seg.header().port_guid, 8);
  return gid;
}

HostFaults& faults() {
  static HostFaults f(port_config().faults);
  return f;
}

// The QP a request goes to, when it is live on this host and its process is
// alive; otherwise why not (a request there is never answered: the
// requester's timer decides).
struct Target {
  uint32_t slot = 0;
  shm::OwnerId owner;
  bool local = false;  // our own process
};

[[gnu::always_inline]] inline const char* route(shm::Segment& seg, const transport::SendSide& s, const ibv_ah_attr& ah, uint32_t dest_qpn,
                  Target* out) {
  if (!HostFabric::reaches(seg, ah)) return "destination not on this host";
  const int slot = transport::qp_slot_of(seg, dest_qpn);
  if (slot < 0) return "no such QP";
  out->slot = static_cast<uint32_t>(slot);
  out->owner = seg.qp(out->slot).owner;
  out->local = out->owner == s.self;
  if (!out->local && !shm::process_alive(seg, out->owner)) return "the QP's process is gone";
  return nullptr;
}

// Where the target QP's next receive completion goes (SendSide::recv_cqe_hint).
void note_next_recv_cqe(transport::SendSide& s, const shm::Segment& seg, uint32_t slot) {
  const shm::SharedQp& qp = seg.qp(slot);
  if (qp.recv_cq >= shm::kMaxCqs) return;
  const shm::SharedCq& cq = seg.cq(qp.recv_cq);
  if (cq.slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::SlotState::kLive)) return;
  const shm::CqeSlot* next = shm::cq_slot(seg, cq, cq.tail.load(std::memory_order_relaxed));
  s.recv_cqe_hint.store(reinterpret_cast<uintptr_t>(next), std::memory_order_relaxed);
}

// For `softverbs status`: the slowest path our requests needed.
void note_path(transport::SendSide& s, const PeerMemory& mem) {
  if (mem.used() == Path::kLocal) return;  // it moved no bytes: nothing learnt
  const auto path = static_cast<uint8_t>(mem.used());
  if (s.shared->host_path != path) s.shared->host_path = path;  // a store per message would dirty the line
}

}  // namespace

bool HostFabric::reaches(const shm::Segment& seg, const ibv_ah_attr& ah) {
  if (ah.port_num != 1) return false;
  // A RoCE port: its own addresses are this host.
  static const bool roce = port_config().roce;  // fixed for the process; this runs per message
  if (roce) return ah.is_global && local_gid_index(ah.grh.dgid.raw) >= 0;
  if (ah.is_global) return std::memcmp(ah.grh.dgid.raw, own_gid(seg, 0).data(), 16) == 0;
  return ah.dlid == seg.header().lid;
}

using transport::mtu_bytes;

std::optional<TransmitResult> HostFabric::transmit(transport::SendSide& s, transport::SendWqe& w) {
  TransmitResult result;
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w.opcode);
  shm::Segment& seg = *s.seg;
  const bool ud = s.qp_type == IBV_QPT_UD;
  if (ud && w.ah == nullptr) {
    result.local_status = IBV_WC_LOC_QP_OP_ERR;
    return result;
  }
  // IBA 11.4.1.1: a UD message is one packet.
  if (ud && w.length > mtu_bytes(port_config().mtu)) {
    result.local_status = IBV_WC_LOC_LEN_ERR;
    return result;
  }
  const ibv_ah_attr& ah = ud ? *w.ah : s.ah;
  const uint32_t dest_qpn = ud ? w.remote_qpn : s.dest_qpn;
  if (op == nullptr) return result;
  Target target;
  iovec iov[shm::kMaxSge];
  IoList list;
  const bool writes_local = op->kind != ReqKind::kSend && op->kind != ReqKind::kWrite;
  if (w.placed != 0) {
    // place_at_post routed it, checked its L_Key and copied it: the
    // responder only needs its length.
    target.slot = w.placed;
    target.owner = seg.qp(target.slot).owner;
    target.local = target.owner == s.self;
    list.bytes = w.length;
  } else {
    if (const char* why = route(seg, s, ah, dest_qpn, &target)) {
      SV_LOG_RATELIMITED(kDebug, "QP %#x to QP %#x: %s", s.qpn, dest_qpn, why);
      return result;
    }
    result.local_status = transport::resolve_local_sges(s, w, writes_local, iov, &list);
    if (result.local_status != IBV_WC_SUCCESS) return result;
  }
  if (writes_local && op->kind != ReqKind::kRead && list.bytes < 8) {
    result.local_status = IBV_WC_LOC_LEN_ERR;  // an atomic's result needs 8 bytes
    return result;
  }

  transport::Request req;
  req.kind = op->kind;
  req.has_imm = op->has_imm;
  req.solicited = (w.send_flags & IBV_SEND_SOLICITED) != 0;
  req.psn = w.psn;
  req.packets = w.packets;
  req.dest_qpn = dest_qpn;
  req.src_qpn = s.qpn;
  req.slid = seg.header().lid;
  req.imm = w.imm_data;
  req.va = w.remote_addr;
  req.rkey = w.rkey;
  req.compare_add = w.compare_add;
  req.swap = w.swap;
  uint8_t grh[wire::kUdGrhBytes];
  if (ud) {
    // IBA 10.2.4: a WR Q_Key with its high bit set means the QP's own.
    req.qkey = (w.remote_qkey & 0x80000000u) ? s.shared->qkey : w.remote_qkey;
    req.with_grh = ah.is_global != 0;
    if (req.with_grh) {
      wire::UdGrhFields f;
      f.sgid = own_gid(seg, ah.grh.sgid_index);
      std::memcpy(f.dgid.data(), ah.grh.dgid.raw, 16);
      f.traffic_class = ah.grh.traffic_class;
      f.flow_label = ah.grh.flow_label;
      f.hop_limit = ah.grh.hop_limit;
      f.ib_length = 12 + 8 + w.length + 4;  // BTH, DETH, payload, ICRC
      if (port_config().roce)
        wire::write_roce_grh(grh, f);
      else
        wire::write_ib_grh(grh, f);
      req.grh = grh;
    }
  }
  if (op->kind == ReqKind::kSend || op->kind == ReqKind::kWrite) {
    req.payload = list;
    req.dma_length = static_cast<uint32_t>(list.bytes);
  } else {
    req.dma_length = op->kind == ReqKind::kRead ? static_cast<uint32_t>(w.length) : 8;
  }

  shm::QpCounters& counts = s.shared->counters;
  shm::add_single_writer(counts.sent_packets, w.packets);
  shm::add_single_writer(counts.port_xmit_packets, w.packets);
  shm::add_single_writer(counts.port_xmit_bytes, req.payload.bytes);

  req.placed = w.placed != 0;
  w.placed = 0;  // a retransmission routes and places its payload again

  const HostFaultDraw fault = faults().draw();
  if (fault.lose_request) {
    s.notifier->port_counters().faults_dropped.fetch_add(1, std::memory_order_relaxed);
    return result;  // never arrived: the requester's timer decides
  }

  transport::LocalMemory local_mem;
  PeerMemory peer_mem(seg, target.owner);
  transport::TargetMemory& mem = target.local ? static_cast<transport::TargetMemory&>(local_mem) : peer_mem;
  auto deliver = [&] {
    shm::add_single_writer(counts.port_rcv_packets, req.packets);
    shm::add_single_writer(counts.port_rcv_bytes, req.payload.bytes);
    return transport::respond(seg, target.slot, req, mem, *s.notifier);
  };
  result.response = deliver();
  if (fault.duplicate) {
    s.notifier->port_counters().faults_duplicated.fetch_add(1, std::memory_order_relaxed);
    result.response = deliver();
  }
  using Kind = transport::Response::Kind;
  if (fault.lose_response) {
    s.notifier->port_counters().faults_dropped.fetch_add(1, std::memory_order_relaxed);
    result.response = transport::Response{};  // executed, but its answer is lost
    return result;
  }

  const transport::Response& resp = result.response;
  if (resp.kind == Kind::kAck || resp.kind == Kind::kDuplicate) {
    if (op->kind == ReqKind::kRead && resp.read_mr != nullptr) {
      const auto* mr = static_cast<const shm::SharedMr*>(resp.read_mr);
      const uint64_t n = std::min<uint64_t>(w.length, list.bytes);
      if (!mem.read(*mr, resp.read_va, n, list, 0).is_ok()) result.response.kind = Kind::kDrop;
    } else if (op->kind == ReqKind::kCmpSwap || op->kind == ReqKind::kFetchAdd) {
      transport::IoCursor c(list);
      transport::scatter_from(c, &resp.original, 8);
    } else if ((op->kind == ReqKind::kSend || op->has_imm) && !ud) {  // a receive completion
      note_next_recv_cqe(s, seg, target.slot);
    }
  }
  if (!target.local) note_path(s, peer_mem);
  return result;
}

uint32_t HostFabric::place_at_post(transport::SendSide& s, const ibv_send_wr& wr, uint64_t length) {
  // Only the plain case; everything else is left to transmit, which gives
  // every other answer (an error, a NAK, an RNR, a lost packet).
  if (wr.num_sge != 1 || length == 0 || length > shm::kMaxMsgSize ||
      (s.qp_type != IBV_QPT_RC && s.qp_type != IBV_QPT_UC) || faults().active())
    return 0;
  if (s.shared->state.load(std::memory_order_acquire) != IBV_QPS_RTS || s.wait_until != 0) return 0;
  shm::Segment& seg = *s.seg;
  Target target;
  if (route(seg, s, s.ah, s.dest_qpn, &target) != nullptr) return 0;
  const ibv_sge& sge = wr.sg_list[0];
  iovec iov{reinterpret_cast<void*>(sge.addr), length};
  if ((wr.send_flags & IBV_SEND_INLINE) == 0) {
    MrRef source;
    if (transport::check_key(seg, sge.lkey, false, s.self, s.pd_id, sge.addr, length, 0, &source) != KeyCheck::kOk)
      return 0;
    iov.iov_base = reinterpret_cast<void*>(source.va);
  }
  transport::Request req;
  req.kind = ReqKind::kWrite;
  req.psn = s.sq_psn;  // what the requester assigns it next
  req.dest_qpn = s.dest_qpn;
  req.src_qpn = s.qpn;
  req.va = wr.wr.rdma.remote_addr;
  req.rkey = wr.wr.rdma.rkey;
  req.dma_length = static_cast<uint32_t>(length);
  MrRef dest;
  if (!transport::write_would_be_taken(seg, target.slot, req, &dest)) return 0;
  const IoList source{&iov, 1, length};
  // The hint is looked up again only for a new R_Key: a region's mapping
  // here stays where it is while its registration lives.
  const bool new_hint = req.rkey != s.write_hint_rkey.load(std::memory_order_relaxed);
  auto remember = [&](const char* landed) {
    if (landed == nullptr) return;
    s.write_hint_rkey.store(req.rkey, std::memory_order_relaxed);
    s.write_hint_delta.store(reinterpret_cast<intptr_t>(landed) - static_cast<intptr_t>(req.va),
                             std::memory_order_relaxed);
  };
  if (target.local) {
    transport::LocalMemory mem;
    if (!mem.write(*dest.mr, dest.va, source, 0, length).is_ok()) return 0;
    if (new_hint) remember(reinterpret_cast<const char*>(dest.va));
    return target.slot;
  }
  PeerMemory mem(seg, target.owner);
  if (!mem.write(*dest.mr, dest.va, source, 0, length).is_ok()) return 0;
  note_path(s, mem);
  if (new_hint && mem.used() == Path::kMap) remember(mem.direct(*dest.mr, dest.va, length));
  return target.slot;
}

}  // namespace softverbs::fabric::host
