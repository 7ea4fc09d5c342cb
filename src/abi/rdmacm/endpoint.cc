// rdma_create_ep / rdma_destroy_ep: a synchronous id from rdma_getaddrinfo's
// result, bound (passive) or resolved with a QP (active).
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "abi/rdmacm/abi.h"
#include "cm/cm.h"

namespace cm = softverbs::cm;

SV_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  return cm::create_ep(id, res, pd, qp_init_attr);
}

SV_EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
  if (id == nullptr) return;
  cm::destroy_qp(id);
  cm::destroy_id(id);
}
