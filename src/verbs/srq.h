// Shared receive queues: basic SRQs and XRC SRQs.
//
// An SRQ is its shared entry (shm::SharedSrq: the receive ring and its limit,
// in the segment, so that a responder in any process can take from it) and
// this object, which embeds the ABI's ibv_srq. QPs of this process created
// with init_attr.srq take their receive WQEs from it
// (transport/responder.cc, take_recv_wqe); each completion goes to the
// taking QP's recv_cq with that QP's qp_num.
//
// An XRC SRQ (IBA Annex A14) belongs to an XRC domain and names its own CQ:
// an XRC_RECV QP of that domain takes from it the SRQ that each request's
// XRCETH names, and the completion goes to the SRQ's CQ. Its number
// (ibv_get_srq_num) is shm::SharedSrq::srqn.
//
// Invariant 4 (docs/DESIGN.md): this process is the ring's one producer
// (post_recv, serialised on post_mu_); responders are the consumers. A QP
// that goes to Error flushes none of the SRQ's WQEs (they belong to the SRQ
// and its other QPs); destroy discards whatever is still queued.
//
// Limit (IBA 10.2.9.3, ibv_modify_srq(3)): modify arms it; the responder
// that takes the queue below it disarms it (CAS to 0) and raises
// IBV_EVENT_SRQ_LIMIT_REACHED through the taking QP's events
// (transport::Notifier::qp_event: the QP's owner is this SRQ's owner), which
// Qp::on_remote_event hands to raise_limit_event(); an XRC SRQ's, whose
// taker may be another process's QP, through Notifier::srq_event. One-shot:
// the application re-arms it.
//
// Known gaps: a limit event whose QP is destroyed before the service thread
// delivers it is lost (the limit is already disarmed); a WQE a responder
// holds mid-message (UDP, multi-packet SEND) when its QP is reset is not
// returned to the SRQ; receive SGEs are checked against the taking QP's PD.
//
// Thread-safety: post_recv serialises on post_mu_, modify/query on
// modify_mu_; raise_limit_event runs on the service thread.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "shm/objects.h"
#include "util/spin_mutex.h"
#include "util/status.h"

namespace softverbs::verbs {

class Context;
class Cq;
struct Pd;
struct Xrcd;

class Srq {
 public:
  // Fills attr->attr.max_wr and max_sge with what the SRQ got.
  static Result<Srq*> create(Context* ctx, ibv_srq_init_attr_ex* attr);
  static Srq* from(ibv_srq* s) { return reinterpret_cast<Srq*>(s); }

  ibv_srq* ibv() { return &ibv_; }
  Context* context() { return ctx_; }
  uint32_t slot() const { return slot_; }

  // IBV_SRQ_MAX_WR above the size grows the ring (shm::rq_move), keeping
  // the WQEs it holds in order; a smaller size keeps the ring.
  Status modify(const ibv_srq_attr& attr, int mask);
  Status query(ibv_srq_attr* attr);
  int post_recv(ibv_recv_wr* wr, ibv_recv_wr** bad);
  Status destroy();
  // ibv_get_srq_num(3): XRC SRQs only.
  Status number(uint32_t* srqn) const;

  // QPs that take from this SRQ: destroy fails with EBUSY while > 0.
  std::atomic<uint32_t>& users() { return users_; }
  // Service thread (registry lock held): a responder took the queue below
  // the armed limit.
  void raise_limit_event();
  // Its asynchronous events name it by this token (the slot in the low bits,
  // a per-process serial above), never by address: an event still queued
  // when the SRQ is destroyed is skipped, not handed out dangling.
  static constexpr unsigned kTokenSlotBits = 16;
  static_assert(shm::kMaxSrqs <= 1u << kTokenSlotBits);
  uint64_t event_token() const { return event_token_; }
  // Registry lock held (Device::claim_srq_event): ibv_get_async_event took
  // one of its events; ibv_destroy_srq waits for that many acknowledgements.
  void note_event_fetched() { events_fetched_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Srq() = default;

  ibv_srq ibv_{};  // first: ibv_srq* is this object
  Context* ctx_ = nullptr;
  Pd* pd_ = nullptr;
  Xrcd* xrcd_ = nullptr;  // XRC SRQs: their domain and CQ
  Cq* cq_ = nullptr;
  uint32_t slot_ = 0;
  shm::SharedSrq* shared_ = nullptr;
  SpinMutex post_mu_;
  Status grow_to(uint32_t capacity);  // REQUIRES: modify_mu_ held
  std::mutex modify_mu_;
  std::atomic<uint32_t> users_{0};
  uint64_t event_token_ = 0;
  std::atomic<uint32_t> events_fetched_{0};
};

}  // namespace softverbs::verbs
