// The librdmacm calls on ids, addresses and events: argument checks,
// address and port handling; connections are api_connect.cc's.
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
#include "cm/mcast_gid.h"
#include "cm/protocol.h"
#include "cm/qp_attrs.h"
#include "util/log.h"
#include "wire/cma_hdr.h"

namespace softverbs::cm {

namespace wc = wire::cm;

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

namespace {

// An IB address binds on the InfiniBand ports only, as the kernel's cma:
// the zero GID on every one, a GID on its own; a RoCE port's GID is ENODEV
// (cma_validate_port: an IB address on a port without the IB protocol).
int bind_ib(CmId* id, const sockaddr* addr, const std::vector<Device*>& devs) {
  std::vector<Device*> ib;
  for (Device* d : devs) {
    if (!d->roce) ib.push_back(d);
  }
  if (is_wildcard(addr)) return ib.empty() ? fail(ENODEV) : bind_on(id, addr, ib);
  const ibv_gid g = gid_of(addr);
  if (Device* d = ib_device_of_gid(devs, g)) return bind_on(id, addr, {d});
  for (Device* d : devs) {
    if (std::memcmp(d->gid.raw, g.raw, 16) == 0) return fail(ENODEV);
  }
  return fail(EADDRNOTAVAIL);
}

// rdma_resolve_addr to an IB address: no address resolution, the GID is
// the address (the kernel's cma_resolve_ib_addr); the source is the port
// that reaches it, with the destination's P_Key.
Device* resolve_ib(CmId* id, const sockaddr* src, const sockaddr* dst, const std::vector<Device*>& devs, int* err) {
  Device* d = ib_device_for_dest(devs, gid_of(dst));
  if (d == nullptr) {
    *err = ENODEV;
    return nullptr;
  }
  if (id->state != IdState::kIdle) return d;
  sockaddr_ib s{};
  if (src != nullptr && src->sa_family == AF_IB) std::memcpy(&s, src, sizeof s);
  s.sib_family = AF_IB;
  if (src == nullptr || src->sa_family != AF_IB) s.sib_pkey = reinterpret_cast<const sockaddr_ib*>(dst)->sib_pkey;
  if (is_wildcard(reinterpret_cast<sockaddr*>(&s))) {
    std::memcpy(&s.sib_addr, d->gid.raw, 16);
  } else if (ib_device_of_gid(devs, gid_of(reinterpret_cast<sockaddr*>(&s))) != d) {
    *err = EADDRNOTAVAIL;
    return nullptr;
  }
  if (bind_on(id, reinterpret_cast<sockaddr*>(&s), {d}) != 0) {
    *err = errno;
    return nullptr;
  }
  return d;
}

}  // namespace

int bind_addr(rdma_cm_id* pub, const sockaddr* addr) {
  if (pub == nullptr || addr == nullptr) return fail(EINVAL);
  if (!family_ok(addr)) return fail(EAFNOSUPPORT);
  CmId* id = from_pub(pub);
  Agent& agent = Agent::get();
  std::lock_guard<std::mutex> lock(agent.mu);
  if (id->state != IdState::kIdle) return fail(EINVAL);
  const auto devs = agent.devices();
  if (addr->sa_family == AF_IB) return bind_ib(id, addr, devs);
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
    Device* d = nullptr;
    if (id->state == IdState::kAddrBound && (id->pub.route.addr.src_addr.sa_family == AF_IB) != (dst->sa_family == AF_IB)) {
      return fail(EINVAL);  // an IB source with an IP destination, or the reverse
    }
    if (dst->sa_family == AF_IB) {
      if (src != nullptr && src->sa_family != AF_IB && src->sa_family != AF_UNSPEC) return fail(EINVAL);
      int err = 0;
      d = resolve_ib(id, src, dst, devs, &err);
      if (d == nullptr) return fail(err);
    } else if (src != nullptr && src->sa_family == AF_IB) {
      return fail(EINVAL);
    } else {
      d = is_multicast_addr(dst) ? device_for_group(devs, id->dev, src) : device_for_dest(devs, dst);
    }
    if (dst->sa_family == AF_IB) {
      // bound above
    } else if (id->state == IdState::kIdle) {
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
    const sockaddr* dst = &id->pub.route.addr.dst_addr;
    p.dgid = d->roce || dst->sa_family == AF_IB ? gid_of(dst) : d->gid;
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
  leave_all_multicast(id);
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
