// Multicast joins of UD ids (src/cm/api_mcast.cc).
#include <rdma/rdma_cma.h>

#include <cerrno>

#include "abi/rdmacm/abi.h"
#include "cm/cm.h"

namespace cm = softverbs::cm;

SV_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return cm::join_multicast(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

// The attribute checks librdmacm makes before the kernel sees the join.
SV_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (attr == nullptr) {
    errno = EINVAL;
    return -1;
  }
  if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED) {
    errno = EINVAL;
    return -1;
  }
  return cm::join_multicast(id, attr->addr, static_cast<uint16_t>(attr->join_flags), context);
}

SV_EXPORT int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) { return cm::leave_multicast(id, addr); }
