// lock_service: one process's verbs objects — a device context, a PD, one CQ
// for every QP, one registered page (remote READ, WRITE and atomics) and the
// QPs themselves — plus the two connection steps and a completion wait.
//
// Thread-safety: none; each process drives its Node from one thread.
// wait() and the posting the caller does allocate nothing.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exchange.h"

namespace lock_service {

using Clock = std::chrono::steady_clock;

class Node {
 public:
  // Opens `device` (port 1 must be ACTIVE) and registers one page.
  static std::unique_ptr<Node> open(const std::string& device, std::string* error);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // A QP of `type` (RC or UC) on the Node's CQ, taken to INIT; nullptr and
  // `error` on failure.
  ibv_qp* create_qp(ibv_qp_type type, std::string* error);
  QpAddress address(const ibv_qp* qp) const;
  // INIT -> RTR -> RTS against `peer`, with the attributes `qp`'s type needs.
  bool connect(ibv_qp* qp, const QpAddress& peer, std::string* error);

  // Busy-polls the CQ for `n` completions (the signaled WRs just posted);
  // false, with `error` naming the failed WR's wr_id and status, on an error
  // completion or at `deadline`.
  bool wait(int n, Clock::time_point deadline, std::string* error);

  uint8_t* page() const { return page_; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }

 private:
  Node() = default;

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  uint8_t* page_ = nullptr;
  std::vector<ibv_qp*> qps_;
  ibv_port_attr port_ = {};
  ibv_gid gid_ = {};
  int max_rd_atomic_ = 1;
  int max_dest_rd_atomic_ = 1;
};

}  // namespace lock_service
