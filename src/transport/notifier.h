// How the transport tells the owner of an object that something happened to
// it. The owner may be this process or another one; verbs::Device implements
// this (local objects directly, remote ones through the owner's doorbell).
#pragma once

#include <cstdint>

#include "shm/objects.h"

namespace softverbs::transport {

// Bits of SharedQp::pending_async beyond the ibv_event_type values (< 32).
inline constexpr uint64_t kQpFlushRequest = 1ull << 40;  // the QP went to ERR: flush its queues

class Notifier {
 public:
  virtual ~Notifier() = default;
  // An armed CQ got a qualifying entry, or overran.
  virtual void cq_event(uint32_t cq_slot, shm::OwnerId owner) = 0;
  // Something the owner of a QP must act on: (1 << ibv_event_type) | kQpFlushRequest.
  virtual void qp_event(uint32_t qp_slot, shm::OwnerId owner, uint64_t bits) = 0;
  // An XRC SRQ went below its armed limit (its taker may be another owner's QP).
  virtual void srq_event(uint32_t srq_slot, shm::OwnerId owner) = 0;
  // The calling process's port counters.
  virtual shm::PortCounters& port_counters() = 0;
};

}  // namespace softverbs::transport
