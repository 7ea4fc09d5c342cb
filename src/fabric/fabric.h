// A fabric carries request messages from a requester to the responder of the
// destination QP and brings the response back.
//
// The verbs layer and the QP machinery never know which fabric carries a
// request: a QP's fabric is chosen from its address at RTR. The host fabric
// answers synchronously (the responder runs inside transmit); the UDP fabric
// will answer asynchronously through the completer.
#pragma once

#include <infiniband/verbs.h>

#include <optional>

#include "transport/request.h"
#include "transport/send_side.h"

namespace softverbs::fabric {

struct TransmitResult {
  // A local error found before anything left (ibv_wc_status), or IBV_WC_SUCCESS.
  ibv_wc_status local_status = IBV_WC_SUCCESS;
  transport::Response response;
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  // REQUIRES: side.lock held. Sends the WQE's request; returns its response
  // when the fabric is synchronous, nullopt when it will come later.
  virtual std::optional<TransmitResult> transmit(transport::SendSide& side, transport::SendWqe& wqe) = 0;
  // REQUIRES: side.lock held. Whether the WQE may be sent now (a packet
  // fabric bounds the READs and atomics in flight by max_rd_atomic).
  virtual bool can_transmit(const transport::SendSide&, const transport::SendWqe&) { return true; }
  // REQUIRES: side.lock held; `wr` is a valid RDMA WRITE of `length` bytes,
  // about to be queued with nothing ahead of it. A synchronous fabric may
  // place its payload now, when the responder would take it, and return a
  // nonzero token; the WQE is queued with it in `placed`, and its transmit
  // then skips the copy. 0: not placed.
  virtual uint32_t place_at_post(transport::SendSide&, const ibv_send_wr&, uint64_t /*length*/) { return 0; }
  // Called by a thread that polls an empty CQ of a QP on this fabric: a
  // packet fabric may receive and handle what has arrived on that thread,
  // when no other thread is receiving. Whether it handled anything.
  virtual bool receive_now() { return false; }
};

}  // namespace softverbs::fabric
