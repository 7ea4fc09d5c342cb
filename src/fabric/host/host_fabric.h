// The host fabric: every process of this host on the shared device.
//
// The requester carries its request out itself, against the target QP's
// shared state (transport/responder.h) and the target's memory
// (peer_memory.h), so a one-sided operation completes while the target
// process sleeps. Synchronous: transmit reports the responder's answer to
// the completer (transport/completer.h) before it returns. A message is one
// request of any length, its PSNs consumed at once.
#pragma once

#include "shm/segment.h"
#include "transport/link.h"

namespace softverbs::fabric::host {

class HostFabric final : public transport::Link {
 public:
  ibv_wc_status transmit(transport::SendSide& side, transport::SendWqe& wqe, const transport::IoList& local,
                         uint32_t from_psn) override;
  // A WRITE on an RC/UC QP, without faults. The token: the target's QP slot
  // and the responder's answer.
  uint32_t place_at_post(transport::SendSide& side, const ibv_send_wr& wr, uint64_t length) override;
};

HostFabric& host_fabric();

}  // namespace softverbs::fabric::host
