// QPs and SRQs made through the CM.
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>

#include "abi/rdmacm/abi.h"
#include "cm/cm.h"

namespace cm = softverbs::cm;

SV_EXPORT int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) { return cm::create_qp_ex(id, attr); }

SV_EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (qp_init_attr == nullptr) {
    errno = EINVAL;
    return -1;
  }
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = qp_init_attr->qp_context;
  ex.send_cq = qp_init_attr->send_cq;
  ex.recv_cq = qp_init_attr->recv_cq;
  ex.srq = qp_init_attr->srq;
  ex.cap = qp_init_attr->cap;
  ex.qp_type = qp_init_attr->qp_type;
  ex.sq_sig_all = qp_init_attr->sq_sig_all;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  const int rc = cm::create_qp_ex(id, &ex);
  if (rc == 0) {
    qp_init_attr->cap = ex.cap;
    qp_init_attr->send_cq = id->qp->send_cq;
    qp_init_attr->recv_cq = id->qp->recv_cq;
  }
  return rc;
}

SV_EXPORT void rdma_destroy_qp(rdma_cm_id* id) { cm::destroy_qp(id); }

SV_EXPORT int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  return cm::init_qp_attr(id, qp_attr, qp_attr_mask);
}

SV_EXPORT int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr || id->verbs == nullptr) {
    errno = EINVAL;
    return -1;
  }
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
    attr->pd = id->pd;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
  if (srq == nullptr) return -1;
  id->srq = srq;
  return 0;
}

SV_EXPORT int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (attr == nullptr) {
    errno = EINVAL;
    return -1;
  }
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd != nullptr ? pd : id->pd;
  const int rc = rdma_create_srq_ex(id, &ex);
  if (rc == 0) attr->attr = ex.attr;
  return rc;
}

SV_EXPORT void rdma_destroy_srq(rdma_cm_id* id) {
  if (id == nullptr || id->srq == nullptr) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
}
