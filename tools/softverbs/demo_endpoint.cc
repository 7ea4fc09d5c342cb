#include "demo_endpoint.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>

namespace softverbs::demo {

namespace {

constexpr int kCqDepth = 256;
constexpr int64_t kSpinBeforeYieldNs = 20'000;  // several round trips of the host fabric
constexpr uint32_t kSendDepth = 128;
constexpr uint32_t kRecvDepth = 64;
constexpr int kAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

constexpr const char* kNotOurs =
    "; is that softverbs' libibverbs? Start the demo as `softverbs demo`, or put softverbs' lib "
    "directory first in LD_LIBRARY_PATH";

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::string loaded_libibverbs() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&ibv_get_device_list), &info) != 0 && info.dli_fname != nullptr) {
    char real[4096];
    if (realpath(info.dli_fname, real) != nullptr) return real;
    return info.dli_fname;
  }
  return "(unknown libibverbs)";
}

Status find_device(const std::string& name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    return Status::fail("no %s device: ibv_get_device_list failed (%s) in %s%s", name.c_str(),
                        std::strerror(errno), loaded_libibverbs().c_str(), kNotOurs);
  }
  std::string seen;
  bool found = false;
  for (int i = 0; i < n; ++i) {
    const char* dev = ibv_get_device_name(list[i]);
    if (dev == nullptr) continue;
    if (name == dev) found = true;
    seen += seen.empty() ? "" : ", ";
    seen += dev;
  }
  ibv_free_device_list(list);
  if (found) return Status::ok();
  return Status::fail("no %s device (%s lists %s)%s", name.c_str(), loaded_libibverbs().c_str(),
                      seen.empty() ? "no devices" : seen.c_str(), kNotOurs);
}

Status Endpoint::open(const std::string& device, int port, size_t buffer_size,
                      std::unique_ptr<Endpoint>* out) {
  std::unique_ptr<Endpoint> ep(new Endpoint());
  ep->port_ = port;

  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return Status::fail("ibv_get_device_list: %s", std::strerror(errno));
  for (int i = 0; i < n && ep->ctx_ == nullptr; ++i) {
    if (device == ibv_get_device_name(list[i])) {
      ep->ctx_ = ibv_open_device(list[i]);
      if (ep->ctx_ == nullptr) {
        int err = errno;
        ibv_free_device_list(list);
        return Status::fail("ibv_open_device(%s): %s", device.c_str(), std::strerror(err));
      }
    }
  }
  ibv_free_device_list(list);
  if (ep->ctx_ == nullptr) return Status::fail("no %s device", device.c_str());

  if (int rc = ibv_query_device(ep->ctx_, &ep->dev_attr_); rc != 0) {
    return Status::fail("ibv_query_device: %s", std::strerror(rc));
  }
  if (int rc = ibv_query_port(ep->ctx_, static_cast<uint8_t>(port), &ep->port_attr_); rc != 0) {
    return Status::fail("ibv_query_port(%d): %s", port, std::strerror(rc));
  }
  if (ep->port_attr_.state != IBV_PORT_ACTIVE) {
    return Status::fail("port %d is %s, not ACTIVE", port, ibv_port_state_str(ep->port_attr_.state));
  }
  if (int rc = ibv_query_gid(ep->ctx_, static_cast<uint8_t>(port), 0, &ep->gid_); rc != 0) {
    return Status::fail("ibv_query_gid(port %d, index 0): %s", port, std::strerror(errno));
  }

  ep->pd_ = ibv_alloc_pd(ep->ctx_);
  if (ep->pd_ == nullptr) return Status::fail("ibv_alloc_pd: %s", std::strerror(errno));
  int cqe = std::min(kCqDepth, ep->dev_attr_.max_cqe);
  ep->send_cq_ = ibv_create_cq(ep->ctx_, cqe, nullptr, nullptr, 0);
  if (ep->send_cq_ == nullptr) return Status::fail("ibv_create_cq(%d): %s", cqe, std::strerror(errno));
  ep->recv_cq_ = ibv_create_cq(ep->ctx_, cqe, nullptr, nullptr, 0);
  if (ep->recv_cq_ == nullptr) return Status::fail("ibv_create_cq(%d): %s", cqe, std::strerror(errno));

  // Private anonymous, page-aligned memory: what applications usually register.
  long page = sysconf(_SC_PAGESIZE);
  size_t size = std::max(buffer_size, kMinBuffer);
  size = (size + static_cast<size_t>(page) - 1) / static_cast<size_t>(page) * static_cast<size_t>(page);
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Status::fail("mmap(%zu): %s", size, std::strerror(errno));
  ep->buf_ = static_cast<uint8_t*>(mem);
  ep->size_ = size;
  std::memset(ep->buf_, kPoison, size);
  ep->mr_ = ibv_reg_mr(ep->pd_, ep->buf_, size, kAccess);
  if (ep->mr_ == nullptr) return Status::fail("ibv_reg_mr(%zu bytes): %s", size, std::strerror(errno));

  uint32_t max_wr = static_cast<uint32_t>(std::max(ep->dev_attr_.max_qp_wr, 1));
  ibv_qp_init_attr init = {};
  init.send_cq = ep->send_cq_;
  init.recv_cq = ep->recv_cq_;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = std::min(kSendDepth, max_wr);
  init.cap.max_recv_wr = std::min(kRecvDepth, max_wr);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  ep->qp_ = ibv_create_qp(ep->pd_, &init);
  if (ep->qp_ == nullptr) return Status::fail("ibv_create_qp(RC): %s", std::strerror(errno));
  ep->max_send_wr_ = init.cap.max_send_wr;  // ibv_create_qp writes back what it granted

  ibv_qp_attr attr = {};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(port);
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (int rc = ibv_modify_qp(ep->qp_, &attr,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    return Status::fail("ibv_modify_qp(RESET -> INIT): %s", std::strerror(rc));
  }

  std::random_device rd;
  ep->psn_ = rd() & 0xffffff;
  *out = std::move(ep);
  return Status::ok();
}

Endpoint::~Endpoint() { (void)close(); }

EndpointInfo Endpoint::info() const {
  EndpointInfo info;
  info.qpn = qp_->qp_num;
  info.psn = psn_;
  info.rkey = mr_->rkey;
  info.lid = port_attr_.lid;
  std::memcpy(info.gid, gid_.raw, sizeof info.gid);
  info.addr = reinterpret_cast<uintptr_t>(buf_);
  info.size = size_;
  return info;
}

Status Endpoint::connect(const EndpointInfo& peer) {
  peer_ = peer;
  ibv_qp_attr attr = {};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = port_attr_.active_mtu;
  attr.dest_qp_num = peer.qpn;
  attr.rq_psn = peer.psn;
  attr.max_dest_rd_atomic = static_cast<uint8_t>(std::clamp(dev_attr_.max_qp_rd_atom, 0, 16));
  attr.min_rnr_timer = 12;  // 0.64 ms
  attr.ah_attr.dlid = peer.lid;
  attr.ah_attr.sl = 0;
  attr.ah_attr.src_path_bits = 0;
  attr.ah_attr.port_num = static_cast<uint8_t>(port_);
  if (peer.lid == 0 || port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid, sizeof peer.gid);
    attr.ah_attr.grh.sgid_index = 0;
    attr.ah_attr.grh.hop_limit = 64;
  }
  if (int rc = ibv_modify_qp(qp_, &attr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0) {
    return Status::fail("ibv_modify_qp(INIT -> RTR): %s", std::strerror(rc));
  }

  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;  // 4.096 us * 2^14 = 67 ms
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;  // retry forever on RNR NAK
  attr.sq_psn = psn_;
  attr.max_rd_atomic = static_cast<uint8_t>(std::clamp(dev_attr_.max_qp_init_rd_atom, 0, 16));
  if (int rc = ibv_modify_qp(qp_, &attr,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0) {
    return Status::fail("ibv_modify_qp(RTR -> RTS): %s", std::strerror(rc));
  }
  return Status::ok();
}

Status Endpoint::close() {
  Status first = Status::ok();
  auto note = [&first](int rc, const char* verb) {
    if (rc != 0 && first.is_ok()) first = Status::fail("%s: %s", verb, std::strerror(rc));
  };
  if (qp_ != nullptr) note(ibv_destroy_qp(qp_), "ibv_destroy_qp");
  if (mr_ != nullptr) note(ibv_dereg_mr(mr_), "ibv_dereg_mr");
  if (send_cq_ != nullptr) note(ibv_destroy_cq(send_cq_), "ibv_destroy_cq");
  if (recv_cq_ != nullptr) note(ibv_destroy_cq(recv_cq_), "ibv_destroy_cq");
  if (pd_ != nullptr) note(ibv_dealloc_pd(pd_), "ibv_dealloc_pd");
  if (ctx_ != nullptr) note(ibv_close_device(ctx_), "ibv_close_device");
  if (buf_ != nullptr) munmap(buf_, size_);
  qp_ = nullptr;
  mr_ = nullptr;
  send_cq_ = recv_cq_ = nullptr;
  pd_ = nullptr;
  ctx_ = nullptr;
  buf_ = nullptr;
  return first;
}

Status Endpoint::post_send(const SendRequest& req) {
  ibv_sge sge = {};
  sge.addr = reinterpret_cast<uintptr_t>(buf_ + req.local_offset);
  sge.length = req.length;
  sge.lkey = mr_->lkey;
  ibv_send_wr wr = {};
  wr.wr_id = req.wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = req.opcode;
  wr.send_flags = req.signaled ? IBV_SEND_SIGNALED : 0;
  switch (req.opcode) {
    case IBV_WR_SEND_WITH_IMM:
      wr.imm_data = htonl(req.imm);
      break;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      wr.imm_data = htonl(req.imm);
      [[fallthrough]];
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_READ:
      wr.wr.rdma.remote_addr = peer_.addr + req.remote_offset;
      wr.wr.rdma.rkey = peer_.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      wr.wr.atomic.remote_addr = peer_.addr + req.remote_offset;
      wr.wr.atomic.rkey = peer_.rkey;
      wr.wr.atomic.compare_add = req.compare_add;
      wr.wr.atomic.swap = req.swap;
      break;
    default:
      break;
  }
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) {
    return Status::fail("ibv_post_send: %s", std::strerror(rc));
  }
  return Status::ok();
}

Status Endpoint::post_recv(size_t offset, uint32_t length, uint64_t wr_id) {
  ibv_sge sge = {};
  sge.addr = reinterpret_cast<uintptr_t>(buf_ + offset);
  sge.length = length;
  sge.lkey = mr_->lkey;
  ibv_recv_wr wr = {};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) {
    return Status::fail("ibv_post_recv: %s", std::strerror(rc));
  }
  return Status::ok();
}

Status Endpoint::wait_one(ibv_cq* cq, ibv_wc* wc, int timeout_ms, const char* what) {
  int64_t start = now_ns();
  int64_t deadline = start + int64_t{timeout_ms} * 1'000'000;
  bool yielding = false;
  for (uint64_t spins = 0;; ++spins) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return Status::fail("%s: ibv_poll_cq returned %d", what, n);
    if (n == 1) {
      if (wc->status != IBV_WC_SUCCESS) {
        return Status::fail("%s: completion with error: %s", what, describe(*wc).c_str());
      }
      return Status::ok();
    }
    // Spin for a while, then yield on every poll: on a machine with fewer free
    // cores than busy threads the peer (or the device's service thread) runs.
    if (yielding) sched_yield();
    if ((spins & 63) == 63) {
      int64_t t = now_ns();
      yielding = t - start > kSpinBeforeYieldNs;
      if (t > deadline) return Status::fail("%s: no completion within %d ms", what, timeout_ms);
      if (watch_fd_ >= 0 && (spins & 65535) == 65535) {
        pollfd pfd = {watch_fd_, POLLRDHUP, 0};
        if (::poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
          return Status::fail("%s: no completion, and the peer process has exited", what);
        }
      }
    }
  }
}

std::string describe(const ibv_wc& wc) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "status %s (%d), opcode %d, vendor_err 0x%x, wr_id %llu, byte_len %u",
                ibv_wc_status_str(wc.status), static_cast<int>(wc.status), static_cast<int>(wc.opcode),
                wc.vendor_err, static_cast<unsigned long long>(wc.wr_id), wc.byte_len);
  return buf;
}

}  // namespace softverbs::demo
