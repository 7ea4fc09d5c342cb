#include "node.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace lock_service {
namespace {

constexpr int kPort = 1;
constexpr int kCqDepth = 64;
constexpr uint32_t kSendDepth = 16;  // a round posts at most three WRs at once
constexpr size_t kPageBytes = 4096;

std::string failed(const char* verb, int err) { return std::string(verb) + ": " + std::strerror(err); }

}  // namespace

std::unique_ptr<Node> Node::open(const std::string& device, std::string* error) {
  std::unique_ptr<Node> node(new Node());
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    *error = failed("ibv_get_device_list", errno);
    return nullptr;
  }
  std::string seen;
  for (int i = 0; i < n && node->ctx_ == nullptr; ++i) {
    seen += std::string(seen.empty() ? "" : ", ") + ibv_get_device_name(list[i]);
    if (device == ibv_get_device_name(list[i])) node->ctx_ = ibv_open_device(list[i]);
  }
  const int open_errno = errno;
  ibv_free_device_list(list);
  if (node->ctx_ == nullptr) {
    *error = seen.find(device) == std::string::npos
                 ? "no " + device + " device (the loaded libibverbs lists: " + (seen.empty() ? "none" : seen) + ")"
                 : failed("ibv_open_device", open_errno);
    return nullptr;
  }
  ibv_device_attr dev = {};
  if (int rc = ibv_query_device(node->ctx_, &dev); rc != 0) {
    *error = failed("ibv_query_device", rc);
    return nullptr;
  }
  node->max_rd_atomic_ = std::clamp(dev.max_qp_init_rd_atom, 1, 16);
  node->max_dest_rd_atomic_ = std::clamp(dev.max_qp_rd_atom, 1, 16);
  if (int rc = ibv_query_port(node->ctx_, kPort, &node->port_); rc != 0) {
    *error = failed("ibv_query_port", rc);
    return nullptr;
  }
  if (node->port_.state != IBV_PORT_ACTIVE) {
    *error = std::string("port 1 is ") + ibv_port_state_str(node->port_.state);
    return nullptr;
  }
  if (ibv_query_gid(node->ctx_, kPort, 0, &node->gid_) != 0) {
    *error = failed("ibv_query_gid", errno);
    return nullptr;
  }
  node->pd_ = ibv_alloc_pd(node->ctx_);
  if (node->pd_ == nullptr) {
    *error = failed("ibv_alloc_pd", errno);
    return nullptr;
  }
  node->cq_ = ibv_create_cq(node->ctx_, kCqDepth, nullptr, nullptr, 0);
  if (node->cq_ == nullptr) {
    *error = failed("ibv_create_cq", errno);
    return nullptr;
  }
  void* mem = ::mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    *error = failed("mmap", errno);
    return nullptr;
  }
  node->page_ = static_cast<uint8_t*>(mem);  // zero: the lock is free, the counter 0
  node->mr_ = ibv_reg_mr(node->pd_, mem, kPageBytes,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_ATOMIC);
  if (node->mr_ == nullptr) {
    *error = failed("ibv_reg_mr", errno);
    return nullptr;
  }
  return node;
}

Node::~Node() {
  for (ibv_qp* qp : qps_) ibv_destroy_qp(qp);
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  if (page_ != nullptr) ::munmap(page_, kPageBytes);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

ibv_qp* Node::create_qp(ibv_qp_type type, std::string* error) {
  ibv_qp_init_attr init = {};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = type;
  init.cap.max_send_wr = kSendDepth;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  if (qp == nullptr) {
    *error = failed("ibv_create_qp", errno);
    return nullptr;
  }
  qps_.push_back(qp);
  ibv_qp_attr attr = {};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = kPort;
  // UC carries no READ and no atomics: remote write is all it can grant.
  attr.qp_access_flags = type == IBV_QPT_RC
                             ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC
                             : IBV_ACCESS_REMOTE_WRITE;
  if (int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    *error = failed("ibv_modify_qp(INIT)", rc);
    return nullptr;
  }
  return qp;
}

QpAddress Node::address(const ibv_qp* qp) const {
  QpAddress a;
  a.qpn = qp->qp_num;
  a.psn = (qp->qp_num * 2654435761u) & 0xffffff;  // any start will do; a fixed one per QP is simplest
  a.lid = port_.lid;
  std::memcpy(a.gid, gid_.raw, sizeof a.gid);
  return a;
}

bool Node::connect(ibv_qp* qp, const QpAddress& peer, std::string* error) {
  const bool rc_qp = qp->qp_type == IBV_QPT_RC;
  ibv_qp_attr attr = {};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = port_.active_mtu;
  attr.dest_qp_num = peer.qpn;
  attr.rq_psn = peer.psn;
  attr.max_dest_rd_atomic = static_cast<uint8_t>(max_dest_rd_atomic_);
  attr.min_rnr_timer = 12;
  attr.ah_attr.dlid = peer.lid;
  attr.ah_attr.port_num = kPort;
  if (peer.lid == 0 || port_.link_layer == IBV_LINK_LAYER_ETHERNET) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid, sizeof peer.gid);
    attr.ah_attr.grh.hop_limit = 64;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (rc_qp) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (int rc = ibv_modify_qp(qp, &attr, mask); rc != 0) {
    *error = failed("ibv_modify_qp(RTR)", rc);
    return false;
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = address(qp).psn;
  attr.timeout = 14;  // 67 ms: the UDP link may lose a datagram
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = static_cast<uint8_t>(max_rd_atomic_);
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (rc_qp) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  if (int rc = ibv_modify_qp(qp, &attr, mask); rc != 0) {
    *error = failed("ibv_modify_qp(RTS)", rc);
    return false;
  }
  return true;
}

bool Node::wait(int n, Clock::time_point deadline, std::string* error) {
  ibv_wc wc[4];
  uint32_t spins = 0;
  while (n > 0) {
    const int got = ibv_poll_cq(cq_, std::min(n, 4), wc);
    if (got < 0) {
      *error = "ibv_poll_cq failed";
      return false;
    }
    for (int i = 0; i < got; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        *error = "WR " + std::to_string(wc[i].wr_id) + " completed with " + ibv_wc_status_str(wc[i].status);
        return false;
      }
    }
    n -= got;
    // The clock only now and then: a completion usually comes within a few polls.
    if (got == 0 && (++spins & 1023) == 0 && Clock::now() > deadline) {
      *error = "no completion before the deadline (" + std::to_string(n) + " outstanding)";
      return false;
    }
  }
  return true;
}

}  // namespace lock_service
