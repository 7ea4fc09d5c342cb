// Objects written straight into a private segment, as the verbs layer would
// leave them, for the tests and fuzzers that drive the transport without
// processes or fabrics. Each is published live last, as objects.h requires.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <new>

#include "shm/slot_high_water.h"
#include "shm/port_pkeys.h"
#include "shm/rings.h"
#include "shm/segment.h"
#include "transport/notifier.h"

namespace softverbs::transport::hand_built {

// Keys as verbs would make them for MR `slot` (its generation bits fixed).
constexpr uint32_t lkey_of(uint32_t mr_slot) { return (0x11u << 16) | mr_slot; }
constexpr uint32_t rkey_of(uint32_t mr_slot) { return (0x22u << 16) | mr_slot; }

inline shm::SharedCq& make_cq(shm::Segment& seg, uint32_t slot, uint32_t capacity, shm::OwnerId owner) {
  shm::SharedCq& cq = seg.cq(slot);
  cq.capacity = capacity;
  cq.ring = seg.arena_alloc(capacity * sizeof(shm::CqeSlot)).value();
  cq.owner = owner;
  cq.slot_state.store(static_cast<uint32_t>(shm::SlotState::kLive));
  shm::raise_high_water(seg.header().high_water.cqs, slot);
  return cq;
}

// A region over process memory (never mapped to a peer: map_fd -1).
inline shm::SharedMr& make_mr(shm::Segment& seg, uint32_t slot, const void* addr, size_t length, uint32_t access,
                              uint32_t pd, shm::OwnerId owner) {
  shm::SharedMr& mr = seg.mr(slot);
  shm::raise_high_water(seg.header().high_water.mrs, slot);
  mr.lkey = lkey_of(slot);
  mr.owner = owner;
  mr.pd_id = pd;
  mr.access = access;
  mr.addr = reinterpret_cast<uint64_t>(addr);
  mr.iova = mr.addr;
  mr.length = length;
  mr.map_fd = -1;
  mr.rkey.store(rkey_of(slot));
  return mr;
}

struct QpShape {
  uint32_t qpn = 0;
  shm::OwnerId owner;
  uint8_t type = IBV_QPT_RC;
  uint8_t state = IBV_QPS_RTS;
  uint32_t pd = 0;
  uint32_t dest_qpn = 0;
  uint32_t access = 0;         // qp_access_flags
  uint32_t recv_cq = shm::kMaxCqs;  // none
  uint32_t send_cq = shm::kMaxCqs;
  uint32_t epsn = 0;
  uint32_t qkey = 0;
  uint16_t pkey = 0xffff;      // the default partition, as a modify to INIT gives it
  uint8_t path_mtu = 0;        // enum ibv_mtu; 0: not set
  uint8_t min_rnr_timer = 0;
  uint32_t rq_capacity = 0;    // 0: no receive queue
  uint32_t rq_max_sge = 1;
};

// The QP in slot `slot`, as `shape` says, every other field zero. A receive
// ring that an earlier make_qp of the same shape left there is reused, so a
// fuzzer can remake its QP per input without the arena running out.
inline shm::SharedQp& make_qp(shm::Segment& seg, uint32_t slot, const QpShape& shape) {
  shm::SharedQp& qp = seg.qp(slot);
  const shm::Offset ring = qp.rq.ring;
  new (&qp) shm::SharedQp();
  qp.qpn = shape.qpn;
  qp.owner = shape.owner;
  qp.qp_type = shape.type;
  qp.state.store(shape.state);
  qp.pd_id = shape.pd;
  qp.dest_qpn = shape.dest_qpn;
  qp.access_flags.store(shape.access);
  qp.recv_cq = shape.recv_cq;
  qp.send_cq = shape.send_cq;
  qp.qkey = shape.qkey;
  qp.pkey = shape.pkey;
  qp.pkey_fast = shm::fast_pkey(shape.pkey);
  qp.path_mtu = shape.path_mtu;
  qp.min_rnr_timer.store(shape.min_rnr_timer);
  qp.resp.epsn = shape.epsn;
  if (shape.rq_capacity != 0) {
    qp.rq.capacity = shape.rq_capacity;
    qp.rq.max_sge = shape.rq_max_sge;
    qp.rq.stride = shm::rq_stride_for(shape.rq_max_sge);
    qp.rq.ring = ring != 0 ? ring : seg.arena_alloc(shape.rq_capacity * qp.rq.stride).value();
  }
  qp.slot_state.store(static_cast<uint32_t>(shm::SlotState::kLive));
  shm::raise_high_water(seg.header().high_water.qps, slot);
  return qp;
}

// Takes every event and forgets it; counts into its own port counters.
class QuietNotifier final : public Notifier {
 public:
  void cq_event(uint32_t, shm::OwnerId) override {}
  void qp_event(uint32_t, shm::OwnerId, uint64_t) override {}
  void srq_event(uint32_t, shm::OwnerId) override {}
  shm::PortCounters& port_counters() override { return counters_; }

 private:
  shm::PortCounters counters_{};
};

}  // namespace softverbs::transport::hand_built
