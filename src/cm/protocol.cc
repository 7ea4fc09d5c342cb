// The IB CM exchange (IBA 12.9) as the RDMA CM drives it:
//
//   active                       passive
//   REQ  ───────────────────────→  CONNECT_REQUEST (new id on the listener's channel)
//        ←───────────────────────  REP   (rdma_accept: QP to RTR, RTS)
//   QP to RTR, RTS; RTU ────────→  ESTABLISHED
//   ESTABLISHED (or CONNECT_RESPONSE without a QP; rdma_establish sends the RTU)
//   DREQ ───────────────────────→  DREP, DISCONNECTED
//   DISCONNECTED                   ... TIMEWAIT_EXIT on both after the time-wait
//
// A REQ, REP or DREQ without its answer is resent after the CM response
// timeout, at most kMaxCmRetries times; then the id gets UNREACHABLE (REQ,
// REP) or DISCONNECTED (DREQ). A duplicate REQ is answered with an MRA (no
// REP yet) or the REP again, a duplicate REP with the RTU again.
#include <endian.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "cm/address.h"
#include "cm/event_channel.h"
#include "cm/held_disconnect.h"
#include "cm/protocol.h"
#include "util/log.h"
#include "wire/cma_hdr.h"

namespace softverbs::cm {

namespace wc = wire::cm;

namespace {

// 4.096 us * 2^16 = 268 ms: on softverbs a CM answers within microseconds
// unless its process is gone, so a short timeout finds a dead peer sooner
// (Linux's rdma_cm uses 20, 4.3 s, for fabrics with an SA and switches).
constexpr uint8_t kCmResponseTimeout = 16;
constexpr int kMaxCmRetries = 15;
// Time-wait before TIMEWAIT_EXIT, as Linux's CM: the connection's local ACK
// timeout (IBA 12.9.8.1 bounds it by the packet lifetime), about a second.
// Consumers that tear down on DISCONNECTED (libfabric) rarely see it.

wc::MadHeader header(uint64_t tid) {
  wc::MadHeader h;
  h.tid = tid;
  return h;
}

MadDest dest_of(Device* dev, const MadSource& from) {
  MadDest d;
  d.qpn = from.qpn;
  d.lid = dev->ep->port_attr().lid;
  d.gid = from.gid;
  d.global = dev->roce;
  return d;
}

void send_rej(Device* dev, const MadDest& to, uint64_t tid, uint32_t local_comm, uint32_t remote_comm,
              uint8_t message, uint16_t reason, const void* data = nullptr, size_t len = 0) {
  wc::Rej rej;
  rej.local_comm_id = local_comm;
  rej.remote_comm_id = remote_comm;
  rej.message_rejected = message;
  rej.reason = reason;
  if (len > 0) std::memcpy(rej.private_data.data(), data, std::min(len, rej.private_data.size()));
  uint8_t mad[wc::kMadBytes];
  wc::encode(header(tid), rej, mad);
  dev->ep->send(to, mad);
}

void fill_sockaddr(const wc::CmaHeader& h, bool src, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  const auto& bytes = src ? h.src : h.dst;
  if (h.ip_version == 6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(out);
    s->sin6_family = AF_INET6;
    std::memcpy(&s->sin6_addr, bytes.data(), 16);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(out);
    s->sin_family = AF_INET;
    std::memcpy(&s->sin_addr, bytes.data() + 12, 4);
  }
}

bool addr_matches(const sockaddr* bound, const sockaddr* want) {
  if (bound->sa_family == AF_INET && want->sa_family == AF_INET) {
    const auto b = reinterpret_cast<const sockaddr_in*>(bound)->sin_addr.s_addr;
    return b == INADDR_ANY || b == reinterpret_cast<const sockaddr_in*>(want)->sin_addr.s_addr;
  }
  if (bound->sa_family == AF_INET6) {
    const auto* b = &reinterpret_cast<const sockaddr_in6*>(bound)->sin6_addr;
    if (IN6_IS_ADDR_UNSPECIFIED(b)) return true;
    return want->sa_family == AF_INET6 &&
           std::memcmp(b, &reinterpret_cast<const sockaddr_in6*>(want)->sin6_addr, 16) == 0;
  }
  return false;
}

CmId* find_listener(Device* dev, uint16_t ps, uint16_t port, const sockaddr* dst) {
  for (CmId* id : Agent::get().ids()) {
    if (id->state != IdState::kListen || id->sid_ps != ps || id->port != port) continue;
    if (id->dev != nullptr && id->dev != dev) continue;
    if (addr_matches(&id->pub.route.addr.src_addr, dst)) return id;
  }
  return nullptr;
}

// Where a REQ or SIDR_REQ goes: its listener, the new id's addresses, and
// where the consumer's private data begins.
struct Target {
  CmId* listener = nullptr;
  sockaddr_storage local{};
  sockaddr_storage remote{};
  size_t user_at = 0;
};

// An AF_IB listener takes every request for its service ID and sees all of
// the private data; its ids' addresses are the GIDs, the local one with
// the whole service ID (the kernel's cma_match_private_data and
// cma_save_ib_info). Any other listener needs the CMA header (IP addresses).
Target target_of(Device* dev, uint64_t service_id, const uint8_t* priv, const ibv_gid& local_gid,
                 const ibv_gid& remote_gid) {
  Target t;
  const auto ps = static_cast<uint16_t>(service_id >> 16);
  const auto port = static_cast<uint16_t>(service_id);
  for (CmId* id : Agent::get().ids()) {
    if (id->state != IdState::kListen || id->sid_ps != ps || id->port != port) continue;
    if ((id->dev != nullptr && id->dev != dev) || id->pub.route.addr.src_addr.sa_family != AF_IB) continue;
    const auto* bound = reinterpret_cast<const sockaddr_ib*>(&id->pub.route.addr.src_addr);
    auto* l = reinterpret_cast<sockaddr_ib*>(&t.local);
    auto* r = reinterpret_cast<sockaddr_ib*>(&t.remote);
    l->sib_family = r->sib_family = AF_IB;
    l->sib_pkey = r->sib_pkey = bound->sib_pkey != 0 ? bound->sib_pkey : htobe16(0xffff);
    std::memcpy(&l->sib_addr, local_gid.raw, 16);
    std::memcpy(&r->sib_addr, remote_gid.raw, 16);
    l->sib_sid = htobe64(service_id);
    l->sib_sid_mask = htobe64(~uint64_t{0});
    t.listener = id;
    return t;
  }
  const wc::CmaHeader cma = wc::CmaHeader::decode(priv);
  if (cma.cma_version != wc::CmaHeader::kVersion || (cma.ip_version != 4 && cma.ip_version != 6)) return t;
  fill_sockaddr(cma, false, &t.local);
  fill_sockaddr(cma, true, &t.remote);
  t.listener = find_listener(dev, ps, port, reinterpret_cast<sockaddr*>(&t.local));
  set_port(reinterpret_cast<sockaddr*>(&t.local), port);
  set_port(reinterpret_cast<sockaddr*>(&t.remote), cma.src_port);
  t.user_at = wc::CmaHeader::kBytes;
  return t;
}

void fill_conn(rdma_conn_param& c, uint8_t resp, uint8_t depth, bool flow, uint8_t retry, uint8_t rnr, bool srq,
               uint32_t qpn) {
  c.responder_resources = resp;
  c.initiator_depth = depth;
  c.flow_control = flow;
  c.retry_count = retry;
  c.rnr_retry_count = rnr;
  c.srq = srq;
  c.qp_num = qpn;
}

Event* new_event(CmId* id, rdma_cm_event_type type, int status, const void* data, size_t len, CmId* listen) {
  auto* ev = new Event();
  ev->id = id;
  ev->pub.id = &id->pub;
  ev->pub.listen_id = listen != nullptr ? &listen->pub : nullptr;
  ev->pub.event = type;
  ev->pub.status = status;
  len = std::min(len, sizeof ev->private_data);
  if (len > 0) std::memcpy(ev->private_data, data, len);
  ev->pub.param.conn.private_data = len > 0 ? ev->private_data : nullptr;
  ev->pub.param.conn.private_data_len = static_cast<uint8_t>(len);
  return ev;
}

void post(CmId* id, Event* ev) {
  ++id->outstanding_events;
  id->channel->push(ev);
}

uint32_t random_psn() {
  uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = static_cast<uint32_t>(now_ns());
  return v & 0xffffff;
}

uint32_t peer_agent_of(Device* dev, uint32_t peer_comm_id, const MadDest& peer) {
  const bool same_port = !dev->roce || std::memcmp(peer.gid.raw, dev->gid.raw, 16) == 0;
  return same_port ? dev->table->agent_of_slot(static_cast<int>(peer_comm_id >> 24)) : 0;
}

void handle_req(Device* dev, const wc::MadHeader& hdr, const uint8_t* mad, const MadSource& from) {
  const wc::Req req = wc::decode_req(mad);
  const MadDest peer = dest_of(dev, from);
  for (CmId* id : Agent::get().ids()) {
    if (id->remote_comm_id != req.local_comm_id || id->remote_ca_guid != req.local_ca_guid) continue;
    if (id->state == IdState::kReqReceived) {
      wc::Mra mra;
      mra.local_comm_id = id->local_comm_id;
      mra.remote_comm_id = id->remote_comm_id;
      mra.message_mraed = wc::Mra::kMraedReq;
      mra.service_timeout = kCmResponseTimeout + 2;
      uint8_t out[wc::kMadBytes];
      wc::encode(header(id->tid), mra, out);
      dev->ep->send(peer, out);
    } else if (id->state == IdState::kRepSent) {
      dev->ep->send(peer, id->last_mad);
    }
    return;  // a duplicate
  }
  const auto port = static_cast<uint16_t>(req.service_id);
  ibv_gid ours{}, theirs{};
  std::memcpy(ours.raw, req.primary.remote_gid.data(), 16);
  std::memcpy(theirs.raw, req.primary.local_gid.data(), 16);
  Target t = target_of(dev, req.service_id, req.private_data.data(), ours, theirs);
  CmId* listener = t.listener;
  if (listener == nullptr) {
    SV_LOG(kDebug, "CM: REQ for service 0x%llx: no listener, rejected",
           static_cast<unsigned long long>(req.service_id));
    send_rej(dev, peer, hdr.tid, 0, req.local_comm_id, wc::Rej::kRejectedReq, wc::Rej::kInvalidServiceId);
    return;
  }
  auto* id = new CmId();
  id->channel = listener->channel;
  id->pub.channel = listener->pub.channel;
  id->pub.context = listener->pub.context;
  id->pub.ps = listener->pub.ps;
  id->pub.qp_type = listener->pub.qp_type;
  id->pub.verbs = dev->ctx;
  id->pub.pd = dev->pd;
  id->pub.port_num = 1;
  std::memcpy(&id->pub.route.addr.src_storage, &t.local, sizeof t.local);
  std::memcpy(&id->pub.route.addr.dst_storage, &t.remote, sizeof t.remote);
  id->dev = dev;
  id->port = port;
  id->sid_ps = listener->sid_ps;
  id->state = IdState::kReqReceived;
  id->listener = listener;
  id->remote_comm_id = req.local_comm_id;
  id->remote_ca_guid = req.local_ca_guid;
  id->remote_qpn = req.local_qpn;
  id->remote_psn = req.starting_psn;
  id->remote_ece.vendor_id = req.vendor_id;
  id->remote_ece.options = hdr.attr_mod;
  // Chosen now: a consumer that moves its own QP (rdma_init_qp_attr) does so
  // before rdma_accept, whose REP then carries the same PSN.
  id->local_psn = random_psn();
  id->responder_resources = req.initiator_depth;
  id->initiator_depth = req.responder_resources;
  id->retry_count = req.retry_count;
  id->rnr_retry_count = req.rnr_retry_count;
  id->path_mtu = std::min<uint8_t>(req.path_mtu, dev->ep->port_attr().active_mtu);
  id->ack_timeout = req.primary.local_ack_timeout;
  id->peer = peer;
  id->peer_agent = peer_agent_of(dev, req.local_comm_id, peer);
  if (id->peer_agent != 0) Agent::get().watch();
  id->tid = hdr.tid;
  auto& p = id->path;
  std::memcpy(p.sgid.raw, req.primary.remote_gid.data(), 16);
  std::memcpy(p.dgid.raw, req.primary.local_gid.data(), 16);
  p.slid = htobe16(req.primary.remote_lid);
  p.dlid = htobe16(req.primary.local_lid);
  p.pkey = htobe16(req.pkey);
  p.mtu = id->path_mtu;
  p.hop_limit = req.primary.hop_limit;
  p.reversible = 1;
  p.numb_path = 1;
  id->pub.route.path_rec = &id->path;
  id->pub.route.num_paths = 1;
  Agent::get().add(id);
  id->local_comm_id = Agent::get().new_comm_id(dev, id);
  Event* ev = new_event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, req.private_data.data() + t.user_at,
                        wc::Req::kPrivateBytes - t.user_at, listener);
  fill_conn(ev->pub.param.conn, req.initiator_depth, req.responder_resources, req.end_to_end_flow_control,
            req.retry_count, req.rnr_retry_count, req.srq, req.local_qpn);
  post(id, ev);
}

void handle_rep(Device* dev, const wc::MadHeader& hdr, const uint8_t* mad, const MadSource& from) {
  const wc::Rep rep = wc::decode_rep(mad);
  CmId* id = Agent::get().by_comm_id(rep.remote_comm_id);
  if (id == nullptr) {
    send_rej(dev, dest_of(dev, from), hdr.tid, 0, rep.local_comm_id, wc::Rej::kRejectedRep,
             wc::Rej::kInvalidCommId);
    return;
  }
  if (id->state == IdState::kEstablished && rep.local_comm_id == id->remote_comm_id) {
    wc::Rtu rtu;  // our RTU was lost: the REP came again
    rtu.local_comm_id = id->local_comm_id;
    rtu.remote_comm_id = id->remote_comm_id;
    uint8_t out[wc::kMadBytes];
    wc::encode(header(id->tid), rtu, out);
    send_to_peer(id, out, false);
    return;
  }
  if (id->state != IdState::kReqSent) return;
  Agent::get().disarm(id);
  id->remote_comm_id = rep.local_comm_id;
  id->remote_ca_guid = rep.local_ca_guid;
  id->remote_qpn = rep.local_qpn;
  id->remote_psn = rep.starting_psn;
  id->remote_ece.vendor_id = rep.vendor_id;
  id->remote_ece.options = hdr.attr_mod;
  id->responder_resources = std::min(id->responder_resources, rep.initiator_depth);
  id->initiator_depth = std::min(id->initiator_depth, rep.responder_resources);
  id->rnr_retry_count = rep.rnr_retry_count;
  id->peer.qpn = from.qpn;
  id->peer_agent = peer_agent_of(dev, rep.local_comm_id, id->peer);
  if (id->peer_agent != 0) Agent::get().watch();
  const rdma_cm_event_type type = id->pub.qp != nullptr ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE;
  if (id->pub.qp != nullptr) {
    if (qp_to_rts(id) != 0) {
      send_rej(dev, id->peer, id->tid, id->local_comm_id, id->remote_comm_id, wc::Rej::kRejectedRep,
               wc::Rej::kNoResources);
      id->state = IdState::kClosed;
      post(id, new_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -errno, nullptr, 0, nullptr));
      return;
    }
    wc::Rtu rtu;
    rtu.local_comm_id = id->local_comm_id;
    rtu.remote_comm_id = id->remote_comm_id;
    uint8_t out[wc::kMadBytes];
    wc::encode(header(id->tid), rtu, out);
    send_to_peer(id, out, false);
    id->state = IdState::kEstablished;
  } else {
    id->state = IdState::kRepReceived;
  }
  Event* ev = new_event(id, type, 0, rep.private_data.data(), rep.private_data.size(), nullptr);
  fill_conn(ev->pub.param.conn, rep.responder_resources, rep.initiator_depth, rep.end_to_end_flow_control, 0,
            rep.rnr_retry_count, rep.srq, rep.local_qpn);
  post(id, ev);
}

// SIDR (IBA 12.11): a UD id asks a service for its QPN and Q_Key.
void handle_sidr_req(Device* dev, const wc::MadHeader& hdr, const uint8_t* mad, const MadSource& from) {
  const wc::SidrReq q = wc::decode_sidr_req(mad);
  const MadDest peer = dest_of(dev, from);
  for (CmId* id : Agent::get().ids()) {
    if (!id->sidr_passive || id->remote_comm_id != q.request_id) continue;
    if (std::memcmp(id->peer.gid.raw, peer.gid.raw, 16) != 0) continue;
    if (id->state != IdState::kReqReceived) dev->ep->send(peer, id->last_mad);
    return;  // a duplicate: answered again, or still waiting for the consumer
  }
  const auto port = static_cast<uint16_t>(q.service_id);
  Target t = target_of(dev, q.service_id, q.private_data.data(), dev->gid, peer.gid);
  CmId* listener = t.listener;
  if (listener == nullptr) {
    wc::SidrRep rep;
    rep.request_id = q.request_id;
    rep.status = wc::SidrRep::kNoService;
    rep.service_id = q.service_id;
    uint8_t out[wc::kMadBytes];
    wc::encode(header(hdr.tid), rep, out);
    dev->ep->send(peer, out);
    return;
  }
  auto* id = new CmId();
  id->channel = listener->channel;
  id->pub.channel = listener->pub.channel;
  id->pub.context = listener->pub.context;
  id->pub.ps = listener->pub.ps;
  id->pub.qp_type = IBV_QPT_UD;
  id->pub.verbs = dev->ctx;
  id->pub.pd = dev->pd;
  id->pub.port_num = 1;
  std::memcpy(&id->pub.route.addr.src_storage, &t.local, sizeof t.local);
  std::memcpy(&id->pub.route.addr.dst_storage, &t.remote, sizeof t.remote);
  id->dev = dev;
  id->port = port;
  id->sid_ps = listener->sid_ps;
  id->state = IdState::kReqReceived;
  id->sidr_passive = true;
  id->listener = listener;
  id->remote_comm_id = q.request_id;
  id->peer = peer;
  id->tid = hdr.tid;
  Agent::get().add(id);
  Event* ev = new_event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, q.private_data.data() + t.user_at,
                        wc::SidrReq::kPrivateBytes - t.user_at, listener);
  post(id, ev);
}

void handle_sidr_rep(const uint8_t* mad) {
  const wc::SidrRep rep = wc::decode_sidr_rep(mad);
  CmId* id = Agent::get().by_comm_id(rep.request_id);
  if (id == nullptr || id->state != IdState::kReqSent || id->pub.qp_type != IBV_QPT_UD) return;
  Agent::get().disarm(id);
  if (rep.status != wc::SidrRep::kValid) {
    id->state = IdState::kClosed;
    post(id, new_event(id, RDMA_CM_EVENT_UNREACHABLE, rep.status, rep.private_data.data(), rep.private_data.size(),
                       nullptr));
    return;
  }
  id->state = IdState::kEstablished;
  Event* ev = new_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, rep.private_data.data(), rep.private_data.size(), nullptr);
  rdma_ud_param& ud = ev->pub.param.ud;
  ud.qp_num = rep.qpn;
  ud.qkey = rep.qkey;
  ud.ah_attr.port_num = 1;
  ud.ah_attr.dlid = id->dev->ep->port_attr().lid;
  if (id->dev->roce) {
    ud.ah_attr.dlid = 0;
    ud.ah_attr.is_global = 1;
    ud.ah_attr.grh.dgid = id->path.dgid;
    ud.ah_attr.grh.sgid_index = 0;
    ud.ah_attr.grh.hop_limit = 64;
  }
  post(id, ev);
}

void handle_rtu(const uint8_t* mad) {
  const wc::Rtu rtu = wc::decode_rtu(mad);
  CmId* id = Agent::get().by_comm_id(rtu.remote_comm_id);
  if (id == nullptr || id->state != IdState::kRepSent) return;
  Agent::get().disarm(id);
  id->state = IdState::kEstablished;
  post(id, new_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, nullptr, 0, nullptr));
}

void handle_rej(const uint8_t* mad) {
  const wc::Rej rej = wc::decode_rej(mad);
  CmId* id = Agent::get().by_comm_id(rej.remote_comm_id);
  if (id == nullptr) return;
  if (id->state != IdState::kReqSent && id->state != IdState::kRepSent && id->state != IdState::kRepReceived) return;
  Agent::get().disarm(id);
  qp_to_error(id);
  id->state = IdState::kClosed;
  post(id, new_event(id, RDMA_CM_EVENT_REJECTED, rej.reason, rej.private_data.data(), rej.private_data.size(),
                     nullptr));
}

void handle_mra(const uint8_t* mad) {
  const wc::Mra mra = wc::decode_mra(mad);
  CmId* id = Agent::get().by_comm_id(mra.remote_comm_id);
  if (id == nullptr || id->deadline_ns == 0) return;
  if (id->state != IdState::kReqSent && id->state != IdState::kRepSent) return;
  id->deadline_ns = now_ns() + wc::timeout_ns(mra.service_timeout) + id->timeout_ns;
}

// `held`: DISCONNECTED waits for the application's polls (held_disconnect.h).
void enter_timewait(CmId* id, bool held = false) {
  id->state = IdState::kTimewait;
  Agent::get().arm(id, wc::timeout_ns(id->ack_timeout), 0);
  if (held) {
    Agent::get().hold();
    return;
  }
  id->disconnect_held_until_ns = 0;
  post(id, new_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, nullptr, 0, nullptr));
}

void handle_dreq(Device* dev, const wc::MadHeader& hdr, const uint8_t* mad, const MadSource& from) {
  const wc::Dreq dreq = wc::decode_dreq(mad);
  CmId* id = Agent::get().by_comm_id(dreq.remote_comm_id);
  wc::Drep drep;
  drep.local_comm_id = dreq.remote_comm_id;
  drep.remote_comm_id = dreq.local_comm_id;
  uint8_t out[wc::kMadBytes];
  wc::encode(header(hdr.tid), drep, out);
  dev->ep->send(dest_of(dev, from), out);  // also for a duplicate, or an id already gone
  if (id == nullptr) return;
  switch (id->state) {
    case IdState::kEstablished:
    case IdState::kRepSent:
    case IdState::kRepReceived: {
      const bool held = hold_disconnect(id, now_ns());  // before the flushes of qp_to_error
      qp_to_error(id);
      Agent::get().disarm(id);
      enter_timewait(id, held);
      break;
    }
    case IdState::kDreqSent:  // both sides disconnected at once
      Agent::get().disarm(id);
      enter_timewait(id);
      break;
    default:
      break;
  }
}

void handle_drep(const uint8_t* mad) {
  const wc::Drep drep = wc::decode_drep(mad);
  CmId* id = Agent::get().by_comm_id(drep.remote_comm_id);
  if (id == nullptr || id->state != IdState::kDreqSent) return;
  Agent::get().disarm(id);
  enter_timewait(id);
}

}  // namespace

void queue_event(CmId* id, rdma_cm_event_type type, int status, const void* data, size_t len, CmId* listen) {
  post(id, new_event(id, type, status, data, len, listen));
}

void queue_ud_event(CmId* id, rdma_cm_event_type type, const rdma_ud_param& ud) {
  Event* ev = new_event(id, type, 0, nullptr, 0, nullptr);
  ev->pub.param.ud = ud;
  post(id, ev);
}

int send_to_peer(CmId* id, const uint8_t (&mad)[wc::kMadBytes], bool expect_answer) {
  if (expect_answer) {
    std::memcpy(id->last_mad, mad, wc::kMadBytes);
    Agent::get().arm(id, wc::timeout_ns(kCmResponseTimeout), kMaxCmRetries);
  }
  const int rc = id->dev->ep->send(id->peer, mad);
  if (rc != 0) SV_LOG(kDebug, "CM: MAD send failed: %s", std::strerror(rc));
  return expect_answer ? 0 : rc;  // a lost MAD is resent on timeout
}

void on_mad(Device* dev, const uint8_t* mad, const MadSource& from) {
  const wc::MadHeader hdr = wc::MadHeader::decode(mad);
  if (hdr.base_version != wc::kBaseVersion || hdr.mgmt_class != wc::kMgmtClassCm ||
      hdr.class_version != wc::kCmClassVersion || hdr.method != wc::kMethodSend) {
    SV_LOG_RATELIMITED(kDebug, "CM agent: dropped a MAD of class 0x%x version %u method 0x%x", hdr.mgmt_class,
                       hdr.class_version, hdr.method);
    return;
  }
  switch (static_cast<wc::AttrId>(hdr.attr_id)) {
    case wc::AttrId::kReq: handle_req(dev, hdr, mad, from); break;
    case wc::AttrId::kRep: handle_rep(dev, hdr, mad, from); break;
    case wc::AttrId::kRtu: handle_rtu(mad); break;
    case wc::AttrId::kRej: handle_rej(mad); break;
    case wc::AttrId::kMra: handle_mra(mad); break;
    case wc::AttrId::kDreq: handle_dreq(dev, hdr, mad, from); break;
    case wc::AttrId::kDrep: handle_drep(mad); break;
    case wc::AttrId::kSidrReq: handle_sidr_req(dev, hdr, mad, from); break;
    case wc::AttrId::kSidrRep: handle_sidr_rep(mad); break;
    default:
      SV_LOG_RATELIMITED(kDebug, "CM agent: attribute 0x%x not handled", hdr.attr_id);
      break;
  }
}

bool check_peers() {
  bool watching = false;
  std::vector<CmId*> gone;
  for (CmId* id : Agent::get().ids()) {
    if (id->peer_agent == 0) continue;
    if (id->state != IdState::kEstablished && id->state != IdState::kRepSent && id->state != IdState::kRepReceived) {
      continue;
    }
    watching = true;
    if (id->dev->table->agent_of_slot(static_cast<int>(id->remote_comm_id >> 24)) != id->peer_agent) {
      gone.push_back(id);
    }
  }
  for (CmId* id : gone) {
    SV_LOG(kDebug, "CM: the peer of comm ID %#x is gone", id->local_comm_id);
    const bool held = id->state == IdState::kEstablished && hold_disconnect(id, now_ns());
    qp_to_error(id);
    Agent::get().disarm(id);
    if (id->state == IdState::kEstablished) {
      enter_timewait(id, held);
    } else {  // it died before the connection was established
      id->state = IdState::kClosed;
      queue_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
    }
  }
  return watching;
}

void on_timeout(CmId* id) {
  switch (id->state) {
    case IdState::kReqSent:
    case IdState::kRepSent:
    case IdState::kDreqSent:
      if (id->retries_left > 0) {
        --id->retries_left;
        id->deadline_ns = now_ns() + id->timeout_ns;
        id->dev->ep->send(id->peer, id->last_mad);
        return;
      }
      if (id->state == IdState::kDreqSent) {
        enter_timewait(id);
        return;
      }
      if (id->pub.qp_type != IBV_QPT_UD) qp_to_error(id);
      id->state = IdState::kClosed;
      queue_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      return;
    case IdState::kTimewait:
      release_held_disconnect(id);
      id->state = IdState::kClosed;
      if (id->pub.qp != nullptr || id->conn_qp_num != 0) queue_event(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
      return;
    default:
      return;
  }
}

void release_held_disconnect(CmId* id) {
  if (id->disconnect_held_until_ns == 0) return;
  id->disconnect_held_until_ns = 0;
  post(id, new_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, nullptr, 0, nullptr));
}

bool release_held_disconnects(uint64_t now) {
  bool still = false;
  for (CmId* id : Agent::get().ids()) {
    if (id->disconnect_held_until_ns == 0) continue;
    if (hold_over(id, now))
      release_held_disconnect(id);
    else
      still = true;
  }
  return still;
}

}  // namespace softverbs::cm
