// Shared by the bench programs that connect RC QPs to each other on one
// device (bench/scale, bench/cost): the error exit and the
// RESET -> INIT -> RTR -> RTS steps, with the attributes every one of them uses.
#pragma once
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace svbench {

[[noreturn]] inline void die_errno(const char* tool, const char* what) {
  std::fprintf(stderr, "%s: %s: %s\n", tool, what, std::strerror(errno));
  std::exit(1);
}

inline void modify_or_die(const char* tool, ibv_qp* qp, ibv_qp_attr& a, int mask, const char* what) {
  errno = ibv_modify_qp(qp, &a, mask);
  if (errno != 0) die_errno(tool, what);
}

inline void to_init(const char* tool, ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  modify_or_die(tool, qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
}

// RTR towards `dest` on this device's port 1, then RTS. On an Ethernet port
// the destination is `dgid`, or this port's own GID 0 if null.
inline void to_rts(const char* tool, ibv_qp* qp, uint32_t dest, const ibv_port_attr& port, ibv_context* ctx,
                   const ibv_gid* dgid = nullptr) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dest;
  a.ah_attr.dlid = port.lid;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (a.ah_attr.is_global) {
    a.ah_attr.grh.hop_limit = 64;
    if (dgid != nullptr)
      a.ah_attr.grh.dgid = *dgid;
    else if (ibv_query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid) != 0)
      die_errno(tool, "ibv_query_gid");
  }
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  modify_or_die(tool, qp, a,
                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                "RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  modify_or_die(tool, qp, a,
                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC,
                "RTS");
}

// An RC QP on `cq` with room for 16 one-SGE WRs each way.
inline ibv_qp* create_rc_or_die(const char* tool, ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (qp == nullptr) die_errno(tool, "ibv_create_qp");
  return qp;
}

}  // namespace svbench
