// A process's CM agent on one device: the UD QP through which its CM sends
// and receives CM MADs, with Q_Key 0x80010000 as a GSI's.
//
// Contract:
//   1. Built from public verbs only (this library runs over any
//      libibverbs.so.1 the process loaded): a PD, a send CQ, a receive CQ on
//      a completion channel whose fd the agent thread polls, a UD QP in RTS,
//      and one registered buffer for 128 receives and 64 sends.
//   2. send() and drain() are called under the CM's lock; send() reclaims
//      finished sends itself, so it never blocks.
//   3. A MAD is delivered to the handler with the sender's GID/LID and QPN
//      (from the work completion and the GRH).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "wire/cm_mad.h"

namespace softverbs::cm {

struct MadSource {
  uint32_t qpn = 0;
  uint16_t lid = 0;
  ibv_gid gid{};
  bool has_grh = false;
};

// Where a MAD goes: the agent's QPN, and the port's LID or GID.
struct MadDest {
  uint32_t qpn = 0;
  uint16_t lid = 0;
  ibv_gid gid{};
  bool global = false;
};

class GsiEndpoint {
 public:
  // nullptr with errno when a verb fails.
  static std::unique_ptr<GsiEndpoint> create(ibv_context* ctx, uint8_t port);
  ~GsiEndpoint();

  uint32_t qpn() const { return qp_->qp_num; }
  int event_fd() const { return channel_->fd; }
  ibv_context* context() const { return ctx_; }
  uint8_t port() const { return port_; }
  const ibv_port_attr& port_attr() const { return port_attr_; }
  const ibv_gid& gid() const { return gid_; }
  bool roce() const { return port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET; }

  // 0, or an errno value.
  int send(const MadDest& to, const uint8_t (&mad)[wire::cm::kMadBytes]);
  // Takes the completion event, hands every received MAD to `handler`, and
  // reposts the buffers.
  void drain(const std::function<void(const uint8_t* mad, const MadSource& from)>& handler);

 private:
  GsiEndpoint() = default;
  ibv_ah* ah_for(const MadDest& to);
  int post_recv(uint32_t index);
  void reclaim_sends();

  static constexpr uint32_t kRecvs = 128;
  static constexpr uint32_t kSends = 64;
  static constexpr uint32_t kRecvBytes = 40 + wire::cm::kMadBytes;  // GRH + MAD

  ibv_context* ctx_ = nullptr;
  uint8_t port_ = 1;
  ibv_port_attr port_attr_{};
  ibv_gid gid_{};
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  uint8_t* buf_ = nullptr;
  uint32_t next_send_ = 0;
  uint32_t sends_in_flight_ = 0;
  std::map<std::pair<uint16_t, std::pair<uint64_t, uint64_t>>, ibv_ah*> ahs_;
};

}  // namespace softverbs::cm
