// Everything about one QP that its requester and completer use: the send
// queue, the connection attributes that modify_qp sets, and the progress
// state. Owned by verbs::Qp; fabric-agnostic.
//
// Thread-safety: every field is guarded by `lock`, except those marked
// constant after the QP is created.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "shm/segment.h"
#include "transport/notifier.h"
#include "transport/send_queue.h"
#include "util/spin_mutex.h"

namespace softverbs::fabric {
class Fabric;
}

namespace softverbs::transport {

struct SendSide;

// Schedules a call to on_timer() for a QP (the service thread implements it).
class TimerService {
 public:
  virtual ~TimerService() = default;
  virtual void arm(SendSide& side, uint64_t deadline_ns) = 0;
};

struct SendSide {
  // Constant after creation.
  shm::Segment* seg = nullptr;
  shm::SharedQp* shared = nullptr;
  uint32_t qp_slot = 0;
  uint32_t qpn = 0;
  uint8_t qp_type = IBV_QPT_RC;
  uint32_t pd_id = 0;
  uint32_t send_cq = 0;        // CQ slot
  bool sig_all = false;
  uint32_t max_sge = 0;
  uint32_t max_inline = 0;
  Notifier* notifier = nullptr;
  TimerService* timers = nullptr;
  shm::OwnerId self;

  SpinMutex lock;

  // Set by modify_qp.
  fabric::Fabric* fabric = nullptr;  // chosen at RTR from the address
  uint32_t dest_qpn = 0;
  ibv_ah_attr ah{};
  uint8_t path_mtu = IBV_MTU_4096;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t max_rd_atomic = 1;
  uint32_t sq_psn = 0;         // next PSN to assign

  // Progress.
  SendQueue sq;
  uint32_t retries_left = 0;   // reloaded from retry_cnt whenever progress is made
  uint32_t rnr_left = 0;
  uint64_t wait_until = 0;     // a retry is scheduled; nothing is sent before it
  bool ack_timeout = false;    // the wait is a local ACK timeout (else an RNR delay)
  // Packet fabrics (requests in flight while more are sent):
  uint64_t ack_deadline = 0;   // local ACK timer of the oldest unacknowledged request; 0: none
  uint64_t timer_at = 0;       // earliest on_timer call already scheduled; 0: none
  uint64_t resume_index = ~0ull;  // the WQE to resend from resume_psn rather than its first PSN
  uint32_t resume_psn = 0;
  bool sq_drained_event = false;

  // Where the last WRITE placed at post landed, as a guess for the next one
  // with the same R_Key: post_send asks for that line before its checks run
  // (Qp::post_send), so that taking it from a peer polling it overlaps them.
  // Read before the lock: a stale guess only prefetches a wrong line.
  std::atomic<uint32_t> write_hint_rkey{0};
  std::atomic<intptr_t> write_hint_delta{0};  // local address = remote address + delta
  // Likewise for a SEND: the slot the target's next receive completion
  // goes to, whose line the target is polling.
  std::atomic<uintptr_t> recv_cqe_hint{0};
};

}  // namespace softverbs::transport
