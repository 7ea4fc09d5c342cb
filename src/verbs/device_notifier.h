// How the transport tells the owner of a CQ or QP that something happened to
// it (transport::Notifier), for the device of this process: our own objects
// directly, another process's through bits in its process entry and its
// doorbell, which its service thread drains (verbs/service_thread.h).
#pragma once

#include <cstdint>

#include "shm/segment.h"
#include "transport/notifier.h"

namespace softverbs::verbs {

class Device;

class DeviceNotifier final : public transport::Notifier {
 public:
  explicit DeviceNotifier(Device& device) : device_(device) {}

  void cq_event(uint32_t cq_slot, shm::OwnerId owner) override;
  void qp_event(uint32_t qp_slot, shm::OwnerId owner, uint64_t bits) override;
  void srq_event(uint32_t srq_slot, shm::OwnerId owner) override;
  shm::PortCounters& port_counters() override;

  // Wakes a process's service thread.
  void ring(shm::OwnerId who);
  // Service thread: delivers what peers posted for our objects. Whether any.
  bool drain();

 private:
  Device& device_;
};

}  // namespace softverbs::verbs
