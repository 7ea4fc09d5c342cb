// Queue pairs: creation, the state machine (modify/query), posting, and the
// owner-side handling of errors that peers report.
//
// A QP is three pieces: its shared entry (shm::SharedQp: the state, what the
// responder needs, the receive queue), its send side (transport::SendSide:
// the send queue, connection attributes, retry state — process-local), and
// this object, which embeds the ABI's ibv_qp_ex.
//
// Thread-safety: post_send serialises on side_.lock, post_recv on rq_mu_,
// modify/query on modify_mu_; the transport runs under side_.lock.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "transport/send_side.h"
#include "util/spin_mutex.h"
#include "util/status.h"

namespace softverbs::verbs {

class Context;
class Cq;
class Srq;
struct Pd;
struct Xrcd;

class Qp {
 public:
  static Result<Qp*> create(Context* ctx, ibv_qp_init_attr_ex* attr);
  // ibv_open_qp(3): a handle on an XRC_RECV QP of the domain, by number,
  // wherever it was created. It can be queried and closed (destroy), not
  // modified: the QP stays its creator's, and goes when the creator destroys it.
  static Result<Qp*> open(Context* ctx, const ibv_qp_open_attr& attr);
  static Qp* from(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }

  ibv_qp* ibv() { return &ex_.qp_base; }
  ibv_qp_ex* ibv_ex() { return &ex_; }
  Context* context() { return ctx_; }
  transport::SendSide& side() { return side_; }

  Status modify(const ibv_qp_attr& attr, int mask);
  Status query(ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init);
  int post_send(ibv_send_wr* wr, ibv_send_wr** bad);
  int post_recv(ibv_recv_wr* wr, ibv_recv_wr** bad);
  Status destroy();
  // ibv_attach_mcast / ibv_detach_mcast (qp_mcast.cc).
  Status attach_mcast(const ibv_gid* gid, uint16_t lid);
  Status detach_mcast(const ibv_gid* gid, uint16_t lid);

  // Service thread, registry lock held.
  void on_timer();
  void on_remote_event(uint64_t bits);

  // ibv_wr_* (extended posting). WQEs are built in place in the send queue
  // between wr_start and wr_complete, which holds the send-side lock.
  void wr_start();
  int wr_complete();
  void wr_abort();
  // Starts a WQE with ibv_qp_ex's wr_id and wr_flags; nullptr on error.
  transport::SendWqe* wr_begin(ibv_wr_opcode opcode);
  void wr_fail(int err) { wr_error_ = err; }  // the WR being built is refused at wr_complete
  void wr_set_sges(const ibv_sge* sge, size_t n);
  void wr_set_inline(const ibv_data_buf* bufs, size_t n);
  void wr_set_ud_addr(ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey);
  void wr_set_xrc_srqn(uint32_t remote_srqn);

  void ack_async_event();
  uint64_t event_token() const { return event_token_; }
  // Registry lock held (Device::claim_qp_event): ibv_get_async_event took
  // one of this QP's events.
  void note_event_fetched() { events_fetched_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Qp() = default;
  Status validate_attrs(const ibv_qp_attr& a, int mask, ibv_qp_state cur, ibv_qp_state next);
  Result<transport::Link*> choose_fabric(const ibv_ah_attr& ah);
  void apply(const ibv_qp_attr& a, int mask, ibv_qp_state next, transport::Link* rtr_link);
  // The QP holds P_Key index `index` and takes the key there (shm/qp_pkeys.h).
  void take_pkey(uint16_t index);
  // ibv_post_send(3)'s checks of one WR; *length: its payload bytes.
  int check_wr(const ibv_send_wr& wr, uint64_t* length) const;
  int check_local_wr(const ibv_send_wr& wr, uint64_t* length) const;
  // Queues a checked WR (`placed`: Fabric::place_at_post's token).
  void enqueue(const ibv_send_wr& wr, uint64_t length, uint32_t placed);
  // Before the lock: takes the line the WR will land in (see qp.cc).
  void prefetch_landing(const ibv_send_wr& wr);
  void enter_error_locked();
  // Destroy: out of every multicast group it is in.
  void detach_all_mcast();
  void raise_event(ibv_event_type type);
  void add_users(int n);

  ibv_qp_ex ex_{};  // first: ibv_qp* and ibv_qp_ex* are this object
  Context* ctx_ = nullptr;
  Pd* pd_ = nullptr;
  Cq* send_cq_ = nullptr;
  Cq* recv_cq_ = nullptr;
  Srq* srq_ = nullptr;  // receive WQEs come from here when set (no RQ of our own)
  Xrcd* xrcd_ = nullptr;  // XRC_RECV: its domain (also of a handle from open)
  bool opened_ = false;   // a handle from ibv_open_qp, not the QP's creator
  uint32_t slot_ = 0;
  shm::SharedQp* shared_ = nullptr;
  transport::SendSide side_;
  SpinMutex rq_mu_;
  std::mutex modify_mu_;
  ibv_qp_init_attr init_{};
  bool en_sqd_async_notify_ = false;  // the rest of query_qp's answer lives in shared_ and side_
  uint64_t event_token_ = 0;  // slot in the low kQpSlotBits, a per-process serial above
  std::atomic<uint32_t> events_fetched_{0};
  std::atomic<bool> last_wqe_reported_{false};  // IBV_EVENT_QP_LAST_WQE_REACHED since the last Reset

  uint64_t wr_building_ = 0;   // WQEs built since wr_start
  transport::SendWqe* wr_current_ = nullptr;
  int wr_error_ = 0;
};

}  // namespace softverbs::verbs
