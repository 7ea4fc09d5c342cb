// The librdmacm calls that connect and disconnect: each checks its
// arguments and sends the first message of its exchange; protocol.cc does
// the rest.
#include <endian.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/address.h"
#include "cm/agent.h"
#include "cm/api_util.h"
#include "cm/cm.h"
#include "cm/event_channel.h"
#include "cm/protocol.h"
#include "cm/qp_attrs.h"
#include "util/log.h"
#include "wire/cma_hdr.h"

namespace softverbs::cm {

namespace wc = wire::cm;

void say_goodbye(CmId* id) { send_dreq(id, false); }

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
    // An AF_IB id's REQ has no CMA header: all 92 bytes are the consumer's
    // (the kernel's cma_user_data_offset).
    const bool ib = id->pub.route.addr.src_addr.sa_family == AF_IB;
    const size_t user_bytes = ib ? wc::Req::kPrivateBytes : kReqUserBytes;
    if (param->private_data_len > user_bytes || (param->private_data_len > 0 && param->private_data == nullptr)) {
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
    id->peer.qpn = wc::kGsiQpn;
    id->peer.lid = d->ep->port_attr().lid;
    id->peer.gid = id->path.dgid;
    id->peer.global = d->roce;

    wc::Req req;
    req.local_comm_id = id->local_comm_id;
    req.service_id = service_id_of(static_cast<uint16_t>(id->pub.ps), dst);
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
    if (!ib) {
      wc::CmaHeader cma;
      cma.ip_version = src->sa_family == AF_INET6 ? 6 : 4;
      cma.src_port = port_of(src);
      const shm::TableAddr s = table_addr(src), t = table_addr(dst);
      cma.src = s.bytes;
      cma.dst = t.bytes;
      cma.encode(req.private_data.data());
    }
    if (param->private_data_len > 0) {
      std::memcpy(req.private_data.data() + (ib ? 0 : wc::CmaHeader::kBytes), param->private_data,
                  param->private_data_len);
    }
    req.vendor_id = id->local_ece.vendor_id;
    uint8_t mad[wc::kMadBytes];
    wc::MadHeader h;
    h.tid = id->tid;
    h.attr_mod = id->local_ece.options;  // Linux cm.c: ECE options in the REQ's AttributeModifier
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
    // As rdma-core's rdma_accept: the vendor ID the request offered, with the
    // options this side accepted (rdma_set_local_ece; none unless set).
    rep.vendor_id = id->remote_ece.vendor_id;
    uint8_t mad[wc::kMadBytes];
    wc::MadHeader h;
    h.tid = id->tid;
    h.attr_mod = id->local_ece.options;
    wc::encode(h, rep, mad);
    id->listener = nullptr;
    id->state = IdState::kRepSent;
    send_to_peer(id, mad, true);
  }
  return complete(id);
}

int reject(rdma_cm_id* pub, const void* data, uint8_t len, uint16_t reason) {
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
  send_mad_rej(id, reason, data, len);
  id->state = IdState::kClosed;
  return 0;
}

// rdma-core's checks: only an id without a QP takes ECE from the consumer
// (rdma_set_local_ece(3)); vendor ID 0 means none and is refused.
int set_local_ece(rdma_cm_id* pub, const ibv_ece* ece) {
  if (pub == nullptr || ece == nullptr || ece->vendor_id == 0 || ece->comp_mask != 0) return fail(EINVAL);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  if (pub->qp != nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  id->local_ece.vendor_id = ece->vendor_id;
  id->local_ece.options = ece->options;
  return 0;
}

int get_remote_ece(rdma_cm_id* pub, ibv_ece* ece) {
  if (pub == nullptr || ece == nullptr) return fail(EINVAL);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  if (pub->qp != nullptr) return fail(EINVAL);
  const CmId* id = from_pub(pub);
  ece->vendor_id = id->remote_ece.vendor_id;
  ece->options = id->remote_ece.options;
  ece->comp_mask = 0;
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
    case IdState::kTimewait:
      // The application decided to go down: its DISCONNECTED need not wait
      // for its polls (held_disconnect.h).
      release_held_disconnect(id);
      return 0;
    case IdState::kDreqSent:
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

}  // namespace softverbs::cm
