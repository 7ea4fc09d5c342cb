// The librdmacm calls: argument checks, address and port handling, and the
// first message of each exchange; protocol.cc does the rest.
#include <endian.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/address.h"
#include "cm/agent.h"
#include "cm/cm.h"
#include "cm/event_channel.h"
#include "cm/protocol.h"
#include "cm/qp_attrs.h"
#include "util/log.h"
#include "wire/cma_hdr.h"

namespace softverbs::cm {

namespace wc = wire::cm;

namespace {

// Private data a consumer may pass (IBA's sizes; a REQ's first 36 bytes are
// the CMA header).
constexpr size_t kReqUserBytes = wc::Req::kPrivateBytes - wc::CmaHeader::kBytes;  // 56
constexpr uint8_t kMaxRdAtomic = 16;  // softverbs' max_qp_rd_atom and max_qp_init_rd_atom
constexpr uint8_t kDefaultAckTimeout = 18;  // ~1 s: the transport's local ACK timeout

int fail(int err) {
  errno = err;
  return -1;
}

uint32_t random24() {
  uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = static_cast<uint32_t>(now_ns());
  return v & 0xffffff;
}

uint64_t new_tid(Device* d) {
  static uint32_t counter = 0;
  return uint64_t(uint32_t(d->slot)) << 32 | ++counter;
}

// Sync mode (an id made without a channel): wait for the call's event on
// the id's own channel, keep it in id->event until the next call, and turn
// an error event into errno, as librdmacm does.
int complete(CmId* id) {
  if (!id->sync) return 0;
  if (id->pub.event != nullptr) {
    ack_event(id->pub.event);
    id->pub.event = nullptr;
  }
  rdma_cm_event* ev = nullptr;
  if (get_event(id->channel, &ev) != 0) return -1;
  id->pub.event = ev;
  if (ev->status == 0) return 0;
  if (ev->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
  return fail(ev->status < 0 ? -ev->status : ev->status);
}

void unbind(CmId* id) {
  for (auto& [dev, binding] : id->bindings) dev->table->unbind(binding);
  id->bindings.clear();
}

// Takes the address's port in the port table of `devs` (every device for a
// wildcard address). REQUIRES: mu held.
int bind_on(CmId* id, const sockaddr* addr, const std::vector<Device*>& devs) {
  Agent& agent = Agent::get();
  if (devs.empty()) return fail(EADDRNOTAVAIL);
  uint16_t port = port_of(addr);
  for (Device* d : devs) {
    if (const int rc = agent.activate(d); rc != 0) {
      unbind(id);
      return fail(rc);
    }
    const int b = d->table->bind(d->slot, static_cast<uint16_t>(id->pub.ps), table_addr(addr), &port, id->reuse_addr);
    if (b < 0) {
      const int e = errno;
      unbind(id);
      return fail(e);
    }
    id->bindings.emplace_back(d, b);
  }
  std::memcpy(&id->pub.route.addr.src_storage, addr, sockaddr_len(addr));
  set_port(&id->pub.route.addr.src_addr, port);
  id->port = port;
  id->state = IdState::kAddrBound;
  if (devs.size() == 1 && !is_wildcard(addr)) {
    id->dev = devs[0];
    id->pub.verbs = devs[0]->ctx;
    id->pub.pd = devs[0]->pd;
    id->pub.port_num = 1;
  }
  return 0;
}

bool family_ok(const sockaddr* sa) { return sa != nullptr && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6); }

void send_mad_rej(CmId* id, uint16_t reason, const void* data, size_t len) {
  wc::Rej rej;
  rej.local_comm_id = id->local_comm_id;
  rej.remote_comm_id = id->remote_comm_id;
  rej.message_rejected = wc::Rej::kRejectedReq;
  rej.reason = reason;
  if (len > 0) std::memcpy(rej.private_data.data(), data, len);
  uint8_t mad[wc::kMadBytes];
  wc::MadHeader h;
  h.tid = id->tid;
  wc::encode(h, rej, mad);
  send_to_peer(id, mad, false);
}

void send_dreq(CmId* id, bool expect_answer) {
  wc::Dreq dreq;
  dreq.local_comm_id = id->local_comm_id;
  dreq.remote_comm_id = id->remote_comm_id;
  dreq.remote_qpn = id->remote_qpn;
  uint8_t mad[wc::kMadBytes];
  wc::MadHeader h;
  h.tid = new_tid(id->dev);
  wc::encode(h, dreq, mad);
  send_to_peer(id, mad, expect_answer);
}

// SIDR_REQ: the service's QPN and Q_Key for a UD id (IBA 12.11.1), with
// the CMA header first in the private data as in a REQ.
int sidr_request(CmId* id, const rdma_conn_param* param) {
  constexpr size_t kUserBytes = wc::SidrReq::kPrivateBytes - wc::CmaHeader::kBytes;  // 180
  if (param->private_data_len > kUserBytes || (param->private_data_len > 0 && param->private_data == nullptr)) {
    return fail(EINVAL);
  }
  Device* d = id->dev;
  const sockaddr* dst = &id->pub.route.addr.dst_addr;
  const sockaddr* src = &id->pub.route.addr.src_addr;
  id->local_comm_id = Agent::get().new_comm_id(d, id);
  id->tid = new_tid(d);
  id->peer.qpn = wc::kGsiQpn;
  id->peer.lid = d->ep->port_attr().lid;
  id->peer.gid = id->path.dgid;
  id->peer.global = d->roce;
  wc::SidrReq q;
  q.request_id = id->local_comm_id;
  q.pkey = 0xffff;
  q.service_id = uint64_t(id->pub.ps) << 16 | port_of(dst);
  wc::CmaHeader cma;
  cma.ip_version = src->sa_family == AF_INET6 ? 6 : 4;
  cma.src_port = port_of(src);
  cma.src = table_addr(src).bytes;
  cma.dst = table_addr(dst).bytes;
  cma.encode(q.private_data.data());
  if (param->private_data_len > 0) {
    std::memcpy(q.private_data.data() + wc::CmaHeader::kBytes, param->private_data, param->private_data_len);
  }
  uint8_t mad[wc::kMadBytes];
  wc::MadHeader h;
  h.tid = id->tid;
  wc::encode(h, q, mad);
  id->state = IdState::kReqSent;
  send_to_peer(id, mad, true);
  return 0;
}

// SIDR_REP, kept in last_mad to answer a duplicate SIDR_REQ with.
void sidr_reply(CmId* id, uint8_t status, uint32_t qpn, const void* data, size_t len) {
  wc::SidrRep rep;
  rep.request_id = id->remote_comm_id;
  rep.status = status;
  rep.qpn = qpn;
  rep.service_id = uint64_t(id->pub.ps) << 16 | id->port;
  rep.qkey = status == wc::SidrRep::kValid ? kUdpQkey : 0;
  if (len > 0) std::memcpy(rep.private_data.data(), data, len);
  wc::MadHeader h;
  h.tid = id->tid;
  wc::encode(h, rep, id->last_mad);
  send_to_peer(id, id->last_mad, false);
}

// complete() for a caller that holds the CM's lock: the wait must not.
int complete_unlocked(std::unique_lock<std::mutex>& lock, CmId* id) {
  lock.unlock();
  return complete(id);
}

}  // namespace

void say_goodbye(CmId* id) { send_dreq(id, false); }

int create_id(EventChannel* ch, rdma_cm_id** out, void* context, rdma_port_space ps) {
  if (out == nullptr) return fail(EINVAL);
  switch (ps) {
    case RDMA_PS_TCP:
    case RDMA_PS_IB:
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB:
      break;
    default:
      return fail(EINVAL);
  }
  Agent& agent = Agent::get();
  agent.contexts();
  auto* id = new CmId();
  if (ch == nullptr) {
    ch = EventChannel::create();
    if (ch == nullptr) {
      delete id;
      return -1;
    }
    id->sync = true;
  }
  id->channel = ch;
  id->pub.channel = ch->pub();
  id->pub.context = context;
  id->pub.ps = ps;
  id->pub.qp_type = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
  id->ack_timeout = kDefaultAckTimeout;
  std::lock_guard<std::mutex> lock(agent.mu);
  agent.add(id);
  *out = &id->pub;
  return 0;
}

int bind_addr(rdma_cm_id* pub, const sockaddr* addr) {
  if (pub == nullptr || addr == nullptr) return fail(EINVAL);
  if (!family_ok(addr)) return fail(EAFNOSUPPORT);
  CmId* id = from_pub(pub);
  Agent& agent = Agent::get();
  std::lock_guard<std::mutex> lock(agent.mu);
  if (id->state != IdState::kIdle) return fail(EINVAL);
  const auto devs = agent.devices();
  if (is_wildcard(addr)) return bind_on(id, addr, devs);
  Device* d = device_of_local(devs, addr);
  if (d == nullptr) return fail(EADDRNOTAVAIL);
  return bind_on(id, addr, {d});
}

int resolve_addr(rdma_cm_id* pub, const sockaddr* src, const sockaddr* dst, int /*timeout_ms*/) {
  if (pub == nullptr || !family_ok(dst)) return fail(EINVAL);
  CmId* id = from_pub(pub);
  Agent& agent = Agent::get();
  {
    std::lock_guard<std::mutex> lock(agent.mu);
    const auto devs = agent.devices();
    Device* d = device_for_dest(devs, dst);
    if (id->state == IdState::kIdle) {
      if (src != nullptr && family_ok(src) && !is_wildcard(src)) {
        Device* sd = device_of_local(devs, src);
        if (sd == nullptr) return fail(EADDRNOTAVAIL);
        if (bind_on(id, src, {sd}) != 0) return -1;
      } else if (d != nullptr) {
        sockaddr_storage s{};
        source_for(d, dst, &s);
        if (src != nullptr && family_ok(src)) set_port(reinterpret_cast<sockaddr*>(&s), port_of(src));
        if (bind_on(id, reinterpret_cast<sockaddr*>(&s), {d}) != 0) return -1;
      }
    } else if (id->state != IdState::kAddrBound) {
      return fail(EINVAL);
    }
    std::memcpy(&id->pub.route.addr.dst_storage, dst, sockaddr_len(dst));
    if (d == nullptr || (id->dev != nullptr && id->dev != d)) {
      queue_event(id, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
    } else {
      if (agent.activate(d) != 0) return -1;
      id->dev = d;
      id->pub.verbs = d->ctx;
      id->pub.pd = d->pd;
      id->pub.port_num = 1;
      id->state = IdState::kAddrResolved;
      queue_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    }
  }
  return complete(id);
}

int resolve_route(rdma_cm_id* pub, int /*timeout_ms*/) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  Agent& agent = Agent::get();
  {
    std::lock_guard<std::mutex> lock(agent.mu);
    if (id->state != IdState::kAddrResolved) return fail(EINVAL);
    Device* d = id->dev;
    const ibv_port_attr& pa = d->ep->port_attr();
    auto& p = id->path;
    p = {};
    p.sgid = d->gid;
    p.dgid = d->roce ? gid_of(&id->pub.route.addr.dst_addr) : d->gid;
    p.slid = htobe16(pa.lid);
    p.dlid = htobe16(pa.lid);
    p.pkey = htobe16(0xffff);
    p.mtu = pa.active_mtu;
    p.mtu_selector = 2;  // exactly
    p.rate = 3;          // 2.5 Gb/s, as rdma-core reports unknown rates
    p.packet_life_time = kDefaultAckTimeout - 1;
    p.hop_limit = d->roce ? 64 : 0;
    p.reversible = 1;
    p.numb_path = 1;
    id->pub.route.path_rec = &id->path;
    id->pub.route.num_paths = 1;
    id->path_mtu = pa.active_mtu;
    id->state = IdState::kRouteResolved;
    queue_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  }
  return complete(id);
}

int listen(rdma_cm_id* pub, int backlog) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  Agent& agent = Agent::get();
  std::lock_guard<std::mutex> lock(agent.mu);
  if (id->state == IdState::kIdle) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (bind_on(id, reinterpret_cast<sockaddr*>(&any), agent.devices()) != 0) return -1;
  }
  if (id->state != IdState::kAddrBound) return fail(EINVAL);
  for (auto& [dev, binding] : id->bindings) dev->table->set_listening(binding, true);
  id->backlog = backlog > 0 ? backlog : 1024;
  id->state = IdState::kListen;
  return 0;
}

int connect(rdma_cm_id* pub, const rdma_conn_param* param) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  Agent& agent = Agent::get();
  {
    std::unique_lock<std::mutex> lock(agent.mu);
    if (id->state != IdState::kRouteResolved) return fail(EINVAL);
    rdma_conn_param none{};
    if (param == nullptr) param = &none;
    if (id->pub.qp_type == IBV_QPT_UD) {
      if (sidr_request(id, param) != 0) return -1;
      return complete_unlocked(lock, id);
    }
    if (param->private_data_len > kReqUserBytes || (param->private_data_len > 0 && param->private_data == nullptr)) {
      return fail(EINVAL);
    }
    Device* d = id->dev;
    const uint32_t qpn = id->pub.qp != nullptr ? id->pub.qp->qp_num : param->qp_num;
    if (qpn == 0) return fail(EINVAL);
    id->conn_qp_num = qpn;
    id->local_comm_id = agent.new_comm_id(d, id);
    id->local_psn = random24();
    id->responder_resources = std::min(param->responder_resources, kMaxRdAtomic);
    id->initiator_depth = std::min(param->initiator_depth, kMaxRdAtomic);
    id->retry_count = std::min<uint8_t>(param->retry_count, 7);
    id->tid = new_tid(d);

    const sockaddr* dst = &id->pub.route.addr.dst_addr;
    const sockaddr* src = &id->pub.route.addr.src_addr;
    const uint16_t dport = port_of(dst);
    id->peer.qpn = wc::kGsiQpn;
    id->peer.lid = d->ep->port_attr().lid;
    id->peer.gid = id->path.dgid;
    id->peer.global = d->roce;

    wc::Req req;
    req.local_comm_id = id->local_comm_id;
    req.service_id = uint64_t(id->pub.ps) << 16 | dport;
    req.local_ca_guid = d->node_guid;
    req.local_qpn = qpn;
    req.responder_resources = id->responder_resources;
    req.initiator_depth = id->initiator_depth;
    req.remote_cm_response_timeout = 16;
    req.transport_service_type = (id->pub.qp != nullptr && id->pub.qp->qp_type == IBV_QPT_UC) ? 1 : 0;
    req.end_to_end_flow_control = param->flow_control != 0;
    req.starting_psn = id->local_psn;
    req.local_cm_response_timeout = 16;
    req.retry_count = id->retry_count;
    req.pkey = 0xffff;
    req.path_mtu = id->path_mtu;
    req.rnr_retry_count = std::min<uint8_t>(param->rnr_retry_count, 7);
    req.max_cm_retries = 15;
    req.srq = param->srq != 0 || (id->pub.qp != nullptr && id->pub.qp->srq != nullptr);
    req.primary.local_lid = d->ep->port_attr().lid;
    req.primary.remote_lid = d->ep->port_attr().lid;
    std::memcpy(req.primary.local_gid.data(), id->path.sgid.raw, 16);
    std::memcpy(req.primary.remote_gid.data(), id->path.dgid.raw, 16);
    req.primary.hop_limit = id->path.hop_limit;
    req.primary.packet_rate = id->path.rate;
    req.primary.subnet_local = !d->roce;
    req.primary.local_ack_timeout = id->ack_timeout;
    wc::CmaHeader cma;
    cma.ip_version = src->sa_family == AF_INET6 ? 6 : 4;
    cma.src_port = port_of(src);
    const shm::TableAddr s = table_addr(src), t = table_addr(dst);
    cma.src = s.bytes;
    cma.dst = t.bytes;
    cma.encode(req.private_data.data());
    if (param->private_data_len > 0) {
      std::memcpy(req.private_data.data() + wc::CmaHeader::kBytes, param->private_data, param->private_data_len);
    }
    uint8_t mad[wc::kMadBytes];
    wc::MadHeader h;
    h.tid = id->tid;
    wc::encode(h, req, mad);
    id->state = IdState::kReqSent;
    send_to_peer(id, mad, true);
  }
  return complete(id);
}

int accept(rdma_cm_id* pub, const rdma_conn_param* param) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  Agent& agent = Agent::get();
  {
    std::lock_guard<std::mutex> lock(agent.mu);
    if (id->state != IdState::kReqReceived) return fail(EINVAL);
    if (id->sidr_passive) {
      const uint32_t qpn = id->pub.qp != nullptr ? id->pub.qp->qp_num : param != nullptr ? param->qp_num : 0;
      const uint8_t len = param != nullptr ? param->private_data_len : 0;
      if (qpn == 0 || len > wc::SidrRep::kPrivateBytes || (len > 0 && param->private_data == nullptr)) {
        return fail(EINVAL);
      }
      sidr_reply(id, wc::SidrRep::kValid, qpn, len > 0 ? param->private_data : nullptr, len);
      id->state = IdState::kEstablished;
      return 0;  // no event follows a SIDR_REP
    }
    rdma_conn_param none{};
    none.responder_resources = id->responder_resources;
    none.initiator_depth = id->initiator_depth;
    if (param == nullptr) param = &none;
    if (param->private_data_len > wc::Rep::kPrivateBytes ||
        (param->private_data_len > 0 && param->private_data == nullptr)) {
      return fail(EINVAL);
    }
    const uint32_t qpn = id->pub.qp != nullptr ? id->pub.qp->qp_num : param->qp_num;
    if (qpn == 0) return fail(EINVAL);
    id->conn_qp_num = qpn;
    // Grant no more than the request offered (RDMA_MAX_RESP_RES: all of it).
    id->responder_resources = std::min({param->responder_resources, id->responder_resources, kMaxRdAtomic});
    id->initiator_depth = std::min({param->initiator_depth, id->initiator_depth, kMaxRdAtomic});
    if (id->pub.qp != nullptr && qp_to_rts(id) != 0) {
      const int e = errno;
      send_mad_rej(id, wc::Rej::kNoResources, nullptr, 0);
      id->state = IdState::kClosed;
      return fail(e);
    }
    wc::Rep rep;
    rep.local_comm_id = id->local_comm_id;
    rep.remote_comm_id = id->remote_comm_id;
    rep.local_qpn = qpn;
    rep.starting_psn = id->local_psn;
    rep.responder_resources = id->responder_resources;
    rep.initiator_depth = id->initiator_depth;
    rep.target_ack_delay = 0;
    rep.failover_accepted = 0;
    rep.end_to_end_flow_control = param->flow_control != 0;
    rep.rnr_retry_count = std::min<uint8_t>(param->rnr_retry_count, 7);
    rep.srq = param->srq != 0 || (id->pub.qp != nullptr && id->pub.qp->srq != nullptr);
    rep.local_ca_guid = id->dev->node_guid;
    if (param->private_data_len > 0) std::memcpy(rep.private_data.data(), param->private_data, param->private_data_len);
    uint8_t mad[wc::kMadBytes];
    wc::MadHeader h;
    h.tid = id->tid;
    wc::encode(h, rep, mad);
    id->listener = nullptr;
    id->state = IdState::kRepSent;
    send_to_peer(id, mad, true);
  }
  return complete(id);
}

int reject(rdma_cm_id* pub, const void* data, uint8_t len) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  if (id->state != IdState::kReqReceived) return fail(EINVAL);
  if (id->sidr_passive) {
    if (len > wc::SidrRep::kPrivateBytes || (len > 0 && data == nullptr)) return fail(EINVAL);
    sidr_reply(id, wc::SidrRep::kRejected, 0, data, len);
    id->state = IdState::kClosed;
    return 0;
  }
  if (len > wc::Rej::kPrivateBytes || (len > 0 && data == nullptr)) return fail(EINVAL);
  send_mad_rej(id, wc::Rej::kConsumerReject, data, len);
  id->state = IdState::kClosed;
  return 0;
}

int establish(rdma_cm_id* pub) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  if (id->state != IdState::kRepReceived || id->pub.qp != nullptr) return fail(EINVAL);
  wc::Rtu rtu;
  rtu.local_comm_id = id->local_comm_id;
  rtu.remote_comm_id = id->remote_comm_id;
  uint8_t mad[wc::kMadBytes];
  wc::MadHeader h;
  h.tid = id->tid;
  wc::encode(h, rtu, mad);
  send_to_peer(id, mad, false);
  id->state = IdState::kEstablished;
  return 0;
}

int disconnect(rdma_cm_id* pub) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  if (id->pub.qp_type == IBV_QPT_UD) return fail(EINVAL);
  switch (id->state) {
    case IdState::kEstablished:
    case IdState::kRepSent:
    case IdState::kRepReceived:
      qp_to_error(id);
      Agent::get().disarm(id);
      id->state = IdState::kDreqSent;
      send_dreq(id, true);
      return 0;
    case IdState::kDreqSent:
    case IdState::kTimewait:
    case IdState::kClosed:
      return 0;  // already disconnected (by the peer's DREQ, say)
    default:
      return fail(EINVAL);
  }
}

int notify(rdma_cm_id* pub, ibv_event_type event) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  // The first packet on the QP stands for a lost RTU (IBA 12.9.7.2).
  if (event == IBV_EVENT_COMM_EST && id->state == IdState::kRepSent) {
    Agent::get().disarm(id);
    id->state = IdState::kEstablished;
    queue_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
  }
  return 0;
}

int migrate_id(rdma_cm_id* pub, EventChannel* ch) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  bool sync = false;
  if (ch == nullptr) {
    ch = EventChannel::create();
    if (ch == nullptr) return -1;
    sync = true;
  }
  std::unique_lock<std::mutex> lock(Agent::get().mu);
  EventChannel* old = id->channel;
  for (Event* ev : old->take_for(id)) ch->push(ev);
  id->channel = ch;
  id->pub.channel = ch->pub();
  const bool was_sync = id->sync;
  id->sync = sync;
  // Events already handed out on the old channel stay the caller's to ack.
  if (was_sync) {
    lock.unlock();
    if (id->pub.event != nullptr) {
      ack_event(id->pub.event);
      id->pub.event = nullptr;
    }
    delete old;
  }
  return 0;
}

int set_option(rdma_cm_id* pub, int level, int optname, const void* optval, size_t optlen) {
  if (pub == nullptr || optval == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  if (level != RDMA_OPTION_ID) return fail(ENOSYS);
  switch (optname) {
    case RDMA_OPTION_ID_TOS:
    case RDMA_OPTION_ID_AFONLY:
      return 0;
    case RDMA_OPTION_ID_REUSEADDR:
      if (optlen != sizeof(int)) return fail(EINVAL);
      id->reuse_addr = *static_cast<const int*>(optval) != 0;
      return 0;
    case RDMA_OPTION_ID_ACK_TIMEOUT:
      if (optlen != sizeof(uint8_t)) return fail(EINVAL);
      id->ack_timeout = *static_cast<const uint8_t*>(optval);
      return 0;
    default:
      return fail(ENOSYS);
  }
}

int get_request(rdma_cm_id* listen_pub, rdma_cm_id** out) {
  if (listen_pub == nullptr || out == nullptr) return fail(EINVAL);
  CmId* listener = from_pub(listen_pub);
  if (!listener->sync) return fail(EINVAL);
  rdma_cm_event* ev = nullptr;
  for (;;) {
    if (get_event(listener->channel, &ev) != 0) return -1;
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) break;
    ack_event(ev);
  }
  rdma_cm_id* child = ev->id;
  ack_event(ev);
  // The new id is synchronous too: give it its own channel.
  if (migrate_id(child, nullptr) != 0) return -1;
  if (listener->ep_has_qp) {
    ibv_qp_init_attr_ex ex{};
    const ibv_qp_init_attr& a = listener->ep_qp_attr;
    ex.qp_context = a.qp_context;
    ex.send_cq = a.send_cq;
    ex.recv_cq = a.recv_cq;
    ex.srq = a.srq;
    ex.cap = a.cap;
    ex.qp_type = a.qp_type;
    ex.sq_sig_all = a.sq_sig_all;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = listener->ep_pd;
    if (create_qp_ex(child, &ex) != 0) {
      const int e = errno;
      reject(child, nullptr, 0);
      destroy_id(child);
      return fail(e);
    }
  }
  *out = child;
  return 0;
}

int create_ep(rdma_cm_id** out, const rdma_addrinfo* res, ibv_pd* pd, const ibv_qp_init_attr* qp_init_attr) {
  if (out == nullptr || res == nullptr) return fail(EINVAL);
  rdma_cm_id* pub = nullptr;
  if (create_id(nullptr, &pub, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) != 0) return -1;
  CmId* id = from_pub(pub);
  id->pub.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  auto undo = [&] {
    const int e = errno;
    destroy_id(pub);
    return fail(e);
  };
  if (res->ai_flags & RAI_PASSIVE) {
    if (res->ai_src_addr == nullptr || bind_addr(pub, res->ai_src_addr) != 0) return undo();
    if (qp_init_attr != nullptr) {
      std::lock_guard<std::mutex> lock(Agent::get().mu);
      id->ep_has_qp = true;
      id->ep_qp_attr = *qp_init_attr;
      id->ep_qp_attr.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      id->ep_pd = pd;
    }
    *out = pub;
    return 0;
  }
  if (resolve_addr(pub, res->ai_src_addr, res->ai_dst_addr, 2000) != 0) return undo();
  if (resolve_route(pub, 2000) != 0) return undo();
  if (qp_init_attr != nullptr) {
    ibv_qp_init_attr_ex ex{};
    ex.qp_context = qp_init_attr->qp_context;
    ex.send_cq = qp_init_attr->send_cq;
    ex.recv_cq = qp_init_attr->recv_cq;
    ex.srq = qp_init_attr->srq;
    ex.cap = qp_init_attr->cap;
    ex.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    ex.sq_sig_all = qp_init_attr->sq_sig_all;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd;
    if (create_qp_ex(pub, &ex) != 0) return undo();
  }
  *out = pub;
  return 0;
}

int destroy_id(rdma_cm_id* pub) {
  if (pub == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  Agent& agent = Agent::get();
  if (id->sync && id->pub.event != nullptr) {
    ack_event(id->pub.event);
    id->pub.event = nullptr;
  }
  std::unique_lock<std::mutex> lock(agent.mu);
  if (id->sidr_passive && id->state == IdState::kReqReceived) {
    sidr_reply(id, wc::SidrRep::kRejected, 0, nullptr, 0);
  } else if (id->pub.qp_type == IBV_QPT_UD) {
    // Datagram ids have no connection to take down.
  } else switch (id->state) {
    case IdState::kEstablished:
    case IdState::kRepReceived:
      send_dreq(id, false);
      break;
    case IdState::kReqReceived:
    case IdState::kRepSent:
      send_mad_rej(id, wc::Rej::kConsumerReject, nullptr, 0);
      break;
    case IdState::kReqSent:
      send_mad_rej(id, wc::Rej::kTimeout, nullptr, 0);
      break;
    default:
      break;
  }
  if (id->state == IdState::kListen) {
    // Requests not yet handed out die with their listener (rejected).
    std::vector<CmId*> children;
    for (CmId* c : agent.ids()) {
      if (c->listener == id && !c->reported) children.push_back(c);
    }
    for (CmId* c : children) {
      send_mad_rej(c, wc::Rej::kConsumerReject, nullptr, 0);
      c->channel->drop_for(c);
      agent.remove(c);
      delete c;
    }
  }
  agent.disarm(id);
  unbind(id);
  agent.remove(id);
  id->outstanding_events -= id->channel->drop_for(id);
  agent.acked.wait(lock, [id] { return id->outstanding_events <= 0; });
  lock.unlock();
  if (id->own_cqs) destroy_qp(pub);
  if (id->sync) delete id->channel;
  delete id;
  return 0;
}

int create_qp_ex(rdma_cm_id* pub, ibv_qp_init_attr_ex* attr) {
  if (pub == nullptr || attr == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  if (id->pub.verbs == nullptr || id->pub.qp != nullptr) return fail(EINVAL);
  ibv_pd* pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) != 0 && attr->pd != nullptr ? attr->pd : id->pub.pd;
  if (pd == nullptr || pd->context != id->pub.verbs) return fail(EINVAL);
  ibv_qp_init_attr init{};
  init.qp_context = attr->qp_context;
  init.send_cq = attr->send_cq;
  init.recv_cq = attr->recv_cq;
  init.srq = attr->srq != nullptr ? attr->srq : id->pub.srq;
  init.cap = attr->cap;
  init.qp_type = attr->qp_type;
  init.sq_sig_all = attr->sq_sig_all;
  // Like librdmacm: CQs the caller did not give are made here, on
  // completion channels of their own, and go with the QP.
  if (init.send_cq == nullptr || init.recv_cq == nullptr) {
    ibv_context* ctx = id->pub.verbs;
    if (init.recv_cq == nullptr) {
      id->pub.recv_cq_channel = ibv_create_comp_channel(ctx);
      id->pub.recv_cq = id->pub.recv_cq_channel != nullptr
                            ? ibv_create_cq(ctx, std::max<int>(int(init.cap.max_recv_wr), 1), id, id->pub.recv_cq_channel, 0)
                            : nullptr;
      init.recv_cq = id->pub.recv_cq;
    }
    if (init.send_cq == nullptr) {
      id->pub.send_cq_channel = ibv_create_comp_channel(ctx);
      id->pub.send_cq = id->pub.send_cq_channel != nullptr
                            ? ibv_create_cq(ctx, std::max<int>(int(init.cap.max_send_wr), 1), id, id->pub.send_cq_channel, 0)
                            : nullptr;
      init.send_cq = id->pub.send_cq;
    }
    id->own_cqs = true;
    if (init.send_cq == nullptr || init.recv_cq == nullptr) {
      destroy_qp(pub);
      return fail(ENOMEM);
    }
  }
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (qp == nullptr) {
    const int e = errno;
    if (id->own_cqs) destroy_qp(pub);
    return fail(e);
  }
  attr->cap = init.cap;
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  id->pub.qp = qp;
  ibv_qp_attr a;
  int mask = 0;
  const bool ud = qp->qp_type == IBV_QPT_UD;
  for (ibv_qp_state s : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
    if (s != IBV_QPS_INIT && !ud) break;  // a connected QP goes on at connect/accept
    int rc = fill_qp_attr(id, s, &a, &mask);
    if (rc == 0) rc = ibv_modify_qp(qp, &a, mask);
    if (rc != 0) {
      SV_LOG(kDebug, "rdma_create_qp: moving the QP to state %d failed", int(s));
      ibv_destroy_qp(qp);
      id->pub.qp = nullptr;
      return fail(rc > 0 ? rc : errno);
    }
  }
  return 0;
}

void destroy_qp(rdma_cm_id* pub) {
  if (pub == nullptr) return;
  CmId* id = from_pub(pub);
  if (id->pub.qp != nullptr) {
    ibv_destroy_qp(id->pub.qp);
    id->pub.qp = nullptr;
  }
  if (!id->own_cqs) return;
  if (id->pub.send_cq != nullptr && id->pub.send_cq != id->pub.recv_cq) ibv_destroy_cq(id->pub.send_cq);
  if (id->pub.recv_cq != nullptr) ibv_destroy_cq(id->pub.recv_cq);
  if (id->pub.send_cq_channel != nullptr) ibv_destroy_comp_channel(id->pub.send_cq_channel);
  if (id->pub.recv_cq_channel != nullptr) ibv_destroy_comp_channel(id->pub.recv_cq_channel);
  id->pub.send_cq = id->pub.recv_cq = nullptr;
  id->pub.send_cq_channel = id->pub.recv_cq_channel = nullptr;
  id->own_cqs = false;
}

int init_qp_attr(rdma_cm_id* pub, ibv_qp_attr* attr, int* mask) {
  if (pub == nullptr || attr == nullptr || mask == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  if (id->dev == nullptr) return fail(EINVAL);
  return fill_qp_attr(id, attr->qp_state, attr, mask);
}

int get_event(EventChannel* ch, rdma_cm_event** out) {
  if (ch == nullptr || out == nullptr) return fail(EINVAL);
  Event* ev = nullptr;
  if (ch->get(&ev) != 0) return -1;
  {
    std::lock_guard<std::mutex> lock(Agent::get().mu);
    if (ev->pub.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      ev->id->reported = true;
      ev->id->listener = nullptr;
    }
  }
  *out = &ev->pub;
  return 0;
}

int ack_event(rdma_cm_event* pub) {
  if (pub == nullptr) return fail(EINVAL);
  auto* ev = reinterpret_cast<Event*>(pub);
  {
    std::lock_guard<std::mutex> lock(Agent::get().mu);
    --ev->id->outstanding_events;
  }
  Agent::get().acked.notify_all();
  delete ev;
  return 0;
}

}  // namespace softverbs::cm
