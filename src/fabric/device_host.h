// What the fabrics need of the device they serve (verbs::Device implements
// it), so that no fabric depends on the verbs layer.
#pragma once

#include <cstdint>

#include "shm/segment.h"
#include "transport/notifier.h"
#include "transport/send_side.h"

namespace softverbs::fabric {

class DeviceHost {
 public:
  virtual ~DeviceHost() = default;
  virtual shm::Segment& seg() = 0;
  virtual shm::OwnerId self() const = 0;
  virtual transport::Notifier& notifier() = 0;
  // Runs fn with the send side of this process's QP `qpn` (in `qp_slot`)
  // locked, so the QP cannot go away meanwhile. False if there is none.
  virtual bool with_send_side(uint32_t qp_slot, uint32_t qpn, void (*fn)(transport::SendSide&, void*),
                              void* arg) = 0;
};

}  // namespace softverbs::fabric
