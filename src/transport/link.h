// A link carries a QP's requests to the responder of its destination QP and
// the answers back; each fabric (src/fabric/) implements one. The transport
// defines what it needs of a link here, so it depends on no fabric.
//
// The protocol — PSNs, opcodes, ACK/NAK, retries, timers, completions — is
// the transport's (requester.h, responder.h, completer.h), the same on every
// fabric; a link only carries requests there and answers back:
//   - the host fabric is synchronous: transmit runs the target's responder
//     and reports its answer through the completer's events before it
//     returns (memory reached through shared mappings, CMA or a bounce);
//   - a packet fabric (RoCEv2 over UDP) sends the requester's packets, and
//     the answers come later as packets that it hands to the completer.
//
// A QP's link is chosen from its address at RTR (verbs::Qp).
#pragma once

#include <infiniband/verbs.h>

#include "transport/iov.h"
#include "transport/send_side.h"

namespace softverbs::transport {

class Link {
 public:
  virtual ~Link() = default;
  // REQUIRES: side.lock held; `local` is the WQE's resolved local memory
  // (what it sends, or where a READ's data or an atomic's result lands).
  // Carries WQE `wqe`'s request from PSN `from_psn` on (a resumed READ or
  // go-back-N may start inside a message). A request lost on the way is
  // not an error: the requester's timer recovers it. Returns a local error
  // found before anything left (ibv_wc_status), or IBV_WC_SUCCESS.
  virtual ibv_wc_status transmit(SendSide& side, SendWqe& wqe, const IoList& local,
                                 uint32_t from_psn) = 0;
  // REQUIRES: side.lock held; requests are outstanding. Whether the link
  // takes more of this QP's requests now (a packet fabric bounds what is
  // unacknowledged).
  virtual bool can_transmit(const SendSide&, const SendWqe&) { return true; }
  // REQUIRES: side.lock held; `wr` is a valid RDMA WRITE of `length` bytes,
  // about to be queued with nothing ahead of it, as the requester's next
  // PSN. A synchronous link may carry it out now — the responder checks it
  // and places the payload, which the peer may be polling for, before the
  // WR is even queued — and return a nonzero token that the WQE keeps in
  // `placed`; its transmit then only reports the answer. 0: not carried out.
  // A token with kPlacedAndDone set says the answer completes the WR at once
  // (RC: an ACK; UC: it left): the requester retires it without queueing it
  // (transport::complete_at_post), and the link has counted its packets.
  static constexpr uint32_t kPlacedAndDone = 1u << 30;
  virtual uint32_t place_at_post(SendSide&, const ibv_send_wr&, uint64_t /*length*/) { return 0; }
  // Called by a thread that polls an empty CQ of a QP on this fabric: a
  // packet fabric may receive and handle what has arrived on that thread,
  // when no other thread is receiving. Whether it handled anything.
  virtual bool receive_now() { return false; }
  // Whether receive_now can ever handle anything: only then do the CQs of
  // this link's QPs call it when they find themselves empty.
  virtual bool receives_on_poll() const { return false; }
};

}  // namespace softverbs::transport
