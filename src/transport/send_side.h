// Everything about one QP that its requester and completer use, one struct
// per role: what is fixed when the QP is created, the connection that
// modify_qp sets, the requester's progress, the completer's retry state and
// timer, and the host fabric's landing hints. Owned by verbs::Qp;
// fabric-agnostic.
//
// Thread-safety: every field is guarded by `lock`, except QpConsts (constant
// after the QP is created) and LandingHints (atomics read without the lock).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "shm/segment.h"
#include "transport/notifier.h"
#include "transport/send_queue.h"
#include "util/spin_mutex.h"

namespace softverbs::transport {

class Link;
struct SendSide;

// Schedules a call to on_timer() for a QP (the service thread implements it).
class TimerService {
 public:
  virtual ~TimerService() = default;
  virtual void arm(SendSide& side, uint64_t deadline_ns) = 0;
};

// Fixed when the QP is created.
struct QpConsts {
  shm::Segment* seg = nullptr;
  shm::SharedQp* shared = nullptr;
  uint32_t qp_slot = 0;
  uint32_t qpn = 0;
  uint32_t wire_src_qpn = 0;  // UD: the datagrams' source QP when not `qpn` (1: the GSI agent)
  uint8_t qp_type = IBV_QPT_RC;
  uint8_t ca = 0;        // shm::SharedQp::ca: whose port the QP sits behind
  bool subnet = false;   // the device has a topology: a peer may be another CA's
  uint32_t pd_id = 0;
  uint32_t send_cq = 0;  // CQ slot
  bool sig_all = false;
  uint32_t max_sge = 0;
  uint32_t max_inline = 0;
  uint32_t ud_mtu = 4096;  // bytes: the port's MTU, a UD message's limit (IBA 11.4.1.1)
  Notifier* notifier = nullptr;
  TimerService* timers = nullptr;
  shm::OwnerId self;
};

// The connection, as modify_qp sets it (query_qp reads it back from here).
struct Connection {
  Link* link = nullptr;  // chosen at RTR from the address
  uint32_t dest_qpn = 0;
  ibv_ah_attr ah{};
  uint8_t path_mtu = IBV_MTU_4096;
  uint32_t mtu = 4096;  // bytes a packet carries: path_mtu's (UD: the port's)
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint8_t max_rd_atomic = 0;  // 0 counts as 1
};

// The requester's progress beyond the send queue's `next`.
// The VL of the path's SL and the table generation it was read at
// (transport/vl.h) sit in the padding, so the struct keeps its size.
struct RequesterState {
  uint32_t next_psn = 0;          // the PSN the next new WQE starts at (sq_psn)
  uint8_t path_vl = 0;
  bool path_to_port = false;      // VL15 or a paced link: transport/vl.h
  uint64_t resume_index = ~0ull;  // the WQE to resend from resume_psn rather than its first PSN
  uint32_t resume_psn = 0;
  uint32_t path_vl_generation = ~0u;  // a new address vector clears it
};
static_assert(sizeof(RequesterState) == 24);

// A packet link's round-trip estimate (transport/round_trip.h); all 0 on
// the host link.
struct RoundTrip {
  uint32_t srtt_ns = 0;  // smoothed; 0: never measured, so no tail-loss probe
  uint32_t rttvar_ns = 0;
  uint64_t sample_sent_ns = 0;  // the sample running; 0: none
  uint32_t sample_psn = 0;
  uint32_t sent_high = 0;  // the highest PSN sent so far
  bool sent_any = false;
  uint64_t last_sent_ns = 0;  // when requests last left
};

// The completer's retry state and the QP's one deadline.
struct CompleterState {
  uint32_t retries_left = 0;  // reloaded from retry_cnt whenever progress is made
  uint32_t rnr_left = 0;
  // The QP's deadline, 0 for none: the local ACK timer of the oldest
  // unacknowledged request, or (rnr_wait) the end of an RNR delay, before
  // which nothing is sent.
  uint64_t deadline = 0;
  bool rnr_wait = false;
  uint64_t timer_at = 0;  // the earliest on_timer call already scheduled; 0: none
  // SQD was asked for with en_sqd_async_notify while requests were out:
  // IBV_EVENT_SQ_DRAINED when the last is answered.
  bool notify_drained = false;
  // Tail-loss probe (completer.cc, packet links only): when to send the
  // next one while the ACK timer runs (0: none), and how many were sent
  // since it was last armed.
  uint64_t probe_at = 0;
  uint8_t probes = 0;
  RoundTrip rtt;
  // A paced request waiting for its VL's turn (transport/link_pacing.h):
  // when to ask again (0: none waits) and since when it has waited.
  uint64_t turn_at = 0;
  uint64_t turn_since = 0;
};

// Where the last WRITE placed at post landed, as a guess for the next one
// with the same R_Key: post_send asks for that line before its checks run
// (Qp::post_send), so that taking it from a peer polling it overlaps them.
// Read before the lock: a stale guess only prefetches a wrong line.
struct LandingHints {
  std::atomic<uint32_t> write_rkey{0};
  std::atomic<intptr_t> write_delta{0};  // local address = remote address + delta
  // Likewise for a SEND: the slot the target's next receive completion
  // goes to, whose line the target is polling.
  std::atomic<uintptr_t> recv_cqe{0};
};

struct SendSide {
  QpConsts qp;
  SpinMutex lock;
  Connection conn;
  SendQueue sq;
  RequesterState requester;
  CompleterState completer;
  LandingHints hints;
};

}  // namespace softverbs::transport
