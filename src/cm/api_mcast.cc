// rdma_join_multicast(_ex) and rdma_leave_multicast: a UD id's QP joins the
// group an IP multicast address maps to (mcast_gid.h) with ibv_attach_mcast,
// and MULTICAST_JOIN tells the application how to send to it. Without an SA
// or IGMP to wait for, the join completes at once: the fabric's own group
// table (softverbs0) or the IP group (softverbs_roce0, joined by the attach)
// is the membership.
#include <cerrno>
#include <cstring>

#include "cm/address.h"
#include "cm/agent.h"
#include "cm/api_util.h"
#include "cm/cm.h"
#include "cm/mcast_gid.h"
#include "cm/protocol.h"
#include "cm/qp_attrs.h"
#include "util/log.h"

namespace softverbs::cm {
namespace {

constexpr uint32_t kMulticastQpn = 0xffffff;  // IBA 10.5.2.5

bool same_group(const McastJoin& j, const sockaddr* addr) {
  return table_addr(reinterpret_cast<const sockaddr*>(&j.addr)) == table_addr(addr);
}

void detach(McastJoin& j) {
  if (j.attached == nullptr) return;
  if (const int rc = ibv_detach_mcast(j.attached, &j.mgid, j.mlid); rc != 0) {
    SV_LOG(kDebug, "CM: leaving a multicast group: ibv_detach_mcast: %d", rc);
  }
  j.attached = nullptr;
}

// What the kernel reports in MULTICAST_JOIN: the group's address handle,
// DestQP 0xffffff and the port space's Q_Key.
rdma_ud_param join_param(const CmId* id, const McastJoin& j, void* context) {
  rdma_ud_param ud{};
  ud.private_data = context;
  ud.qp_num = kMulticastQpn;
  ud.qkey = kUdpQkey;
  ud.ah_attr.port_num = 1;
  ud.ah_attr.dlid = j.mlid;
  ud.ah_attr.is_global = 1;
  ud.ah_attr.grh.dgid = j.mgid;
  ud.ah_attr.grh.sgid_index = 0;
  ud.ah_attr.grh.hop_limit = id->dev->roce ? 64 : 0;
  return ud;
}

}  // namespace

int join_multicast(rdma_cm_id* pub, const sockaddr* addr, uint16_t flags, void* context) {
  if (pub == nullptr || addr == nullptr) return fail(EINVAL);
  if (addr->sa_family == AF_IB) return fail(EAFNOSUPPORT);
  if (!family_ok(addr) || !is_multicast_addr(addr)) return fail(EINVAL);
  if (flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) return fail(EINVAL);
  CmId* id = from_pub(pub);
  {
    std::lock_guard<std::mutex> lock(Agent::get().mu);
    // As the kernel's rdma_join_multicast: an id of a device, bound or
    // resolved (not yet routed or connected), of a datagram port space.
    if (id->dev == nullptr || (id->state != IdState::kAddrBound && id->state != IdState::kAddrResolved)) {
      return fail(EINVAL);
    }
    if (id->pub.qp_type != IBV_QPT_UD) return fail(EINVAL);
    for (const McastJoin& j : id->mcasts) {
      if (same_group(j, addr)) return fail(EADDRINUSE);
    }
    McastJoin j;
    std::memcpy(&j.addr, addr, sockaddr_len(addr));
    j.mgid = mcast_mgid(addr, id->dev->roce, id->pub.ps);
    j.mlid = mcast_mlid(j.mgid, id->dev->roce);
    j.send_only = flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
    // librdmacm attaches the id's QP itself; a send-only member receives
    // nothing, and an id without a QP yet has nothing to attach.
    if (!j.send_only && id->pub.qp != nullptr) {
      if (const int rc = ibv_attach_mcast(id->pub.qp, &j.mgid, j.mlid); rc != 0) return fail(rc);
      j.attached = id->pub.qp;
    }
    id->mcasts.push_back(j);
    queue_ud_event(id, RDMA_CM_EVENT_MULTICAST_JOIN, join_param(id, j, context));
  }
  return complete(id);
}

int leave_multicast(rdma_cm_id* pub, const sockaddr* addr) {
  if (pub == nullptr || addr == nullptr) return fail(EINVAL);
  CmId* id = from_pub(pub);
  std::lock_guard<std::mutex> lock(Agent::get().mu);
  for (auto it = id->mcasts.begin(); it != id->mcasts.end(); ++it) {
    if (!same_group(*it, addr)) continue;
    // The QP may be gone (rdma_destroy_qp before the leave): it left with it.
    if (it->attached == id->pub.qp) detach(*it);
    id->mcasts.erase(it);
    return 0;
  }
  return fail(EADDRNOTAVAIL);  // librdmacm's answer for a group the id is not in
}

void leave_all_multicast(CmId* id) {
  for (McastJoin& j : id->mcasts) {
    if (j.attached == id->pub.qp) detach(j);
  }
  id->mcasts.clear();
}

}  // namespace softverbs::cm
