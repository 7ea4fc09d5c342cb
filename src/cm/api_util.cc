// Helpers the librdmacm calls share (api_util.h).
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

int bind_on(CmId* id, const sockaddr* addr, const std::vector<Device*>& devs) {
  Agent& agent = Agent::get();
  if (devs.empty()) return fail(EADDRNOTAVAIL);
  sockaddr_storage own{};
  std::memcpy(&own, addr, sockaddr_len(addr));
  addr = reinterpret_cast<const sockaddr*>(&own);
  uint16_t ps = static_cast<uint16_t>(id->pub.ps);
  if (addr->sa_family == AF_IB) {
    ps = select_ib_ps(ps, reinterpret_cast<sockaddr_ib*>(&own));
    if (ps == 0) return fail(EPROTONOSUPPORT);
  }
  uint16_t port = port_of(addr);
  for (Device* d : devs) {
    if (const int rc = agent.activate(d); rc != 0) {
      unbind(id);
      return fail(rc);
    }
    const int b = d->table->bind(d->slot, ps, table_addr(addr), &port, id->reuse_addr);
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
  id->sid_ps = ps;
  id->state = IdState::kAddrBound;
  if (devs.size() == 1 && !is_wildcard(addr)) {
    id->dev = devs[0];
    id->pub.verbs = devs[0]->ctx;
    id->pub.pd = devs[0]->pd;
    id->pub.port_num = 1;
  }
  return 0;
}

bool family_ok(const sockaddr* sa) {
  return sa != nullptr && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6 || sa->sa_family == AF_IB);
}

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
  const sockaddr* dst = &id->pub.route.addr.dst_addr;
  const sockaddr* src = &id->pub.route.addr.src_addr;
  // An AF_IB id sends no CMA header (the kernel's cma_user_data_offset).
  const size_t header = src->sa_family == AF_IB ? 0 : wc::CmaHeader::kBytes;
  if (param->private_data_len > wc::SidrReq::kPrivateBytes - header ||
      (param->private_data_len > 0 && param->private_data == nullptr)) {
    return fail(EINVAL);
  }
  Device* d = id->dev;
  id->local_comm_id = Agent::get().new_comm_id(d, id);
  id->tid = new_tid(d);
  id->peer.qpn = wc::kGsiQpn;
  id->peer.lid = d->ep->port_attr().lid;
  id->peer.gid = id->path.dgid;
  id->peer.global = d->roce;
  wc::SidrReq q;
  q.request_id = id->local_comm_id;
  q.pkey = 0xffff;
  q.service_id = service_id_of(static_cast<uint16_t>(id->pub.ps), dst);
  if (header > 0) {
    wc::CmaHeader cma;
    cma.ip_version = src->sa_family == AF_INET6 ? 6 : 4;
    cma.src_port = port_of(src);
    cma.src = table_addr(src).bytes;
    cma.dst = table_addr(dst).bytes;
    cma.encode(q.private_data.data());
  }
  if (param->private_data_len > 0) {
    std::memcpy(q.private_data.data() + header, param->private_data, param->private_data_len);
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
  rep.service_id = uint64_t(id->sid_ps) << 16 | id->port;
  rep.qkey = status == wc::SidrRep::kValid ? kUdpQkey : 0;
  if (len > 0) std::memcpy(rep.private_data.data(), data, len);
  wc::MadHeader h;
  h.tid = id->tid;
  if (status == wc::SidrRep::kValid) {
    // Linux's SIDR_REP carries the accepting id's ECE, which rdma-core's
    // rdma_accept fills as for a REP: the requester's vendor ID (a SIDR_REQ
    // has none, so 0) with the options set by rdma_set_local_ece.
    rep.vendor_id = id->remote_ece.vendor_id;
    h.attr_mod = id->local_ece.options;
  }
  wc::encode(h, rep, id->last_mad);
  send_to_peer(id, id->last_mad, false);
}

int complete_unlocked(std::unique_lock<std::mutex>& lock, CmId* id) {
  lock.unlock();
  return complete(id);
}

}  // namespace softverbs::cm
