// softverbs-demo: one side of the RC connection, on the standard verbs API only.
//
// An Endpoint owns, in creation order: the device context, a PD, a send CQ and
// a receive CQ, a page-aligned anonymous buffer registered as one MR (local
// write, remote read/write/atomic), and one RC QP left in INIT. connect() takes
// the QP to RTR and RTS against the peer's EndpointInfo. close() destroys the
// objects in reverse order and reports the first verb that failed.
//
// Thread-safety: none; each process drives its own Endpoint from one thread.
// Datapath methods (post_*, poll_*, wait_*) allocate nothing.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "demo_protocol.h"
#include "demo_status.h"

namespace softverbs::demo {

// The path of the libibverbs that this process actually loaded (dladdr).
std::string loaded_libibverbs();

// Fails fast with "no <name> device ..." when the loaded libibverbs does not
// list it; lists the devices it does see.
Status find_device(const std::string& name);

struct SendRequest {
  ibv_wr_opcode opcode = IBV_WR_SEND;
  size_t local_offset = 0;
  uint32_t length = 0;
  uint64_t remote_offset = 0;  // into the peer's buffer (RDMA and atomics)
  uint32_t imm = 0;            // host order; sent in network order
  uint64_t compare_add = 0;    // atomics
  uint64_t swap = 0;
  uint64_t wr_id = 0;
  bool signaled = true;
};

class Endpoint {
 public:
  // Opens `device`, queries port `port` (must be ACTIVE) and creates the objects.
  static Status open(const std::string& device, int port, size_t buffer_size,
                     std::unique_ptr<Endpoint>* out);
  ~Endpoint();  // close(), ignoring errors
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  EndpointInfo info() const;
  // INIT -> RTR -> RTS, addressing the peer by LID (or GRH when it has no LID).
  Status connect(const EndpointInfo& peer);
  Status close();
  // While waiting for a completion, also fail fast when the stream socket
  // `fd` to the peer process hangs up (the peer died).
  void watch_peer(int fd) { watch_fd_ = fd; }

  uint8_t* buffer() const { return buf_; }
  size_t buffer_size() const { return size_; }
  const ibv_device_attr& device_attr() const { return dev_attr_; }
  const ibv_port_attr& port_attr() const { return port_attr_; }
  uint32_t max_send_wr() const { return max_send_wr_; }
  uint32_t qp_num() const { return qp_->qp_num; }
  const EndpointInfo& peer() const { return peer_; }

  // --- datapath ---
  Status post_send(const SendRequest& req);
  Status post_recv(size_t offset, uint32_t length, uint64_t wr_id);
  // ibv_poll_cq; < 0 is an error.
  int poll_send(ibv_wc* wc, int n) { return ibv_poll_cq(send_cq_, n, wc); }
  int poll_recv(ibv_wc* wc, int n) { return ibv_poll_cq(recv_cq_, n, wc); }
  // Busy-polls for exactly one completion; fails on timeout or a status other
  // than IBV_WC_SUCCESS. `what` names the operation in the message.
  Status wait_send(ibv_wc* wc, int timeout_ms, const char* what) {
    return wait_one(send_cq_, wc, timeout_ms, what);
  }
  Status wait_recv(ibv_wc* wc, int timeout_ms, const char* what) {
    return wait_one(recv_cq_, wc, timeout_ms, what);
  }

 private:
  Endpoint() = default;
  Status wait_one(ibv_cq* cq, ibv_wc* wc, int timeout_ms, const char* what);

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint8_t* buf_ = nullptr;
  size_t size_ = 0;
  int port_ = 1;
  int watch_fd_ = -1;
  uint32_t psn_ = 0;
  uint32_t max_send_wr_ = 0;
  ibv_device_attr dev_attr_ = {};
  ibv_port_attr port_attr_ = {};
  ibv_gid gid_ = {};
  EndpointInfo peer_;
};

// Text for the wc fields a failure message needs.
std::string describe(const ibv_wc& wc);

}  // namespace softverbs::demo
