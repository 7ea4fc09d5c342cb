// QPs made through the CM (rdma_create_qp) and the attributes of QPs made
// elsewhere (rdma_init_qp_attr).
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
  ibv_qp* qp = nullptr;
  {
    // The agent thread moves an id's QP to Error on the peer's DREQ, under
    // mu (qp_to_error): taken from the id first, the QP is never modified
    // while it is destroyed.
    std::lock_guard<std::mutex> lock(Agent::get().mu);
    qp = id->pub.qp;
    id->pub.qp = nullptr;
  }
  if (qp != nullptr) ibv_destroy_qp(qp);
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

}  // namespace softverbs::cm
