// The attributes an id's QP takes in each state (rdma_init_qp_attr), from
// what its connection agreed, as Linux's CM computes them.
#include <cerrno>
#include <cstring>

#include "cm/protocol.h"
#include "cm/qp_attrs.h"
#include "wire/cm_mad.h"

namespace softverbs::cm {

namespace {
// The RNR NAK delay asked of the peer: 0.64 ms (IBA table 45, value 12).
// Linux's CM leaves 0 (655 ms) to the verbs consumer; softverbs' programs
// repost receives in microseconds.
constexpr uint8_t kMinRnrTimer = 12;
}  // namespace

int fill_qp_attr(CmId* id, ibv_qp_state state, ibv_qp_attr* a, int* mask) {
  std::memset(a, 0, sizeof *a);
  a->qp_state = state;
  const ibv_qp_type type = id->pub.qp != nullptr ? id->pub.qp->qp_type : id->pub.qp_type;
  switch (state) {
    case IBV_QPS_INIT:
      a->port_num = 1;
      a->pkey_index = 0;
      if (type == IBV_QPT_UD) {
        a->qkey = kUdpQkey;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      } else {
        // Before a connection agrees on reads, no remote access (as Linux);
        // RTR grants what the connection allows.
        a->qp_access_flags = connected_access(id);
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      if (type == IBV_QPT_UD) {
        *mask = IBV_QP_STATE;
        return 0;
      }
      if (id->remote_qpn == 0) {
        errno = EINVAL;
        return -1;
      }
      a->path_mtu = static_cast<ibv_mtu>(id->path_mtu);
      a->dest_qp_num = id->remote_qpn;
      a->rq_psn = id->remote_psn;
      a->qp_access_flags = connected_access(id);
      a->ah_attr.port_num = 1;
      a->ah_attr.dlid = id->dev->ep->port_attr().lid;
      if (id->dev->roce) {
        a->ah_attr.is_global = 1;
        a->ah_attr.grh.dgid = id->peer.gid;
        a->ah_attr.grh.sgid_index = 0;
        a->ah_attr.grh.hop_limit = 64;
        a->ah_attr.dlid = 0;
      }
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_ACCESS_FLAGS;
      if (type == IBV_QPT_RC) {
        a->max_dest_rd_atomic = id->responder_resources;
        a->min_rnr_timer = kMinRnrTimer;
        *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
      return 0;
    case IBV_QPS_RTS:
      a->sq_psn = id->local_psn;
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      if (type == IBV_QPT_RC) {
        a->timeout = id->ack_timeout;
        a->retry_cnt = id->retry_count;
        a->rnr_retry = id->rnr_retry_count;
        a->max_rd_atomic = id->initiator_depth;
        *mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      }
      return 0;
    default:
      errno = EINVAL;
      return -1;
  }
}

int connected_access(const CmId* id) {
  if (id->remote_qpn == 0) return 0;
  int access = IBV_ACCESS_REMOTE_WRITE;
  if (id->responder_resources > 0) access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  return access;
}

int qp_to_rts(CmId* id) {
  ibv_qp_attr a;
  int mask = 0;
  for (ibv_qp_state s : {IBV_QPS_RTR, IBV_QPS_RTS}) {
    if (fill_qp_attr(id, s, &a, &mask) != 0) return -1;
    if (const int rc = ibv_modify_qp(id->pub.qp, &a, mask); rc != 0) {
      errno = rc;
      return -1;
    }
  }
  return 0;
}

void qp_to_error(CmId* id) {
  if (id->pub.qp == nullptr) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(id->pub.qp, &a, IBV_QP_STATE);
}

}  // namespace softverbs::cm
