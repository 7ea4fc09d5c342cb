// QP attributes of an id's QP per state (rdma_init_qp_attr and the CM's own
// transitions). REQUIRES Agent::mu held.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "cm/id.h"

namespace softverbs::cm {

// The Q_Key of RDMA_PS_UDP/IPOIB ids (Linux's RDMA_UDP_QKEY).
inline constexpr uint32_t kUdpQkey = 0x01234567;

// 0, or -1 with errno EINVAL (a state the id cannot give yet).
int fill_qp_attr(CmId* id, ibv_qp_state state, ibv_qp_attr* attr, int* mask);
// The remote access a connected QP grants: writes, and reads and atomics
// when the peer may have reads outstanding.
int connected_access(const CmId* id);

}  // namespace softverbs::cm
