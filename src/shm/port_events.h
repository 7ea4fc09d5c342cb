// The port's asynchronous events, from whoever changes the port to every
// process attached to the device.
//
// An SM programs the port with PortInfo Sets that arrive in its own process
// (mad/agent.cc); a real HCA raises PORT_ACTIVE, PORT_ERR, LID_CHANGE,
// SM_CHANGE, CLIENT_REREGISTER on every open context of the device (the
// kernel's ib_dispatch_event to each uverbs file). Here the process that
// stores the change appends the events to the segment's log
// (shm::PortEventLog) and rings every attached process; each service thread
// reads the log from its own cursor and raises what it finds on its
// contexts.
//
// Thread-safety: append_port_events REQUIRES the segment's control lock
// (one writer); PortEventReader is one reader's cursor, used by one thread.
// Off the data path: nothing here runs per message.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "shm/segment.h"

namespace softverbs::shm {

// The port's addresses and state before and after a change.
struct PortSnapshot {
  uint16_t lid = 0;
  uint16_t sm_lid = 0;
  uint8_t state = 0;  // IBA PortState: 2 INIT, 3 ARMED, 4 ACTIVE
};

// The events a hardware HCA raises for the change from `was` to `now`
// (IBA 14.2.5.6; rdma-core's ibv_get_async_event(3)), as a bit set of
// (1 << ibv_event_type). `client_reregister`: the Set carried
// PortInfo:ClientReregister.
uint64_t port_change_events(const PortSnapshot& was, const PortSnapshot& now, bool client_reregister);

// Appends the events of `bits` for the port of device `ca` (0: the
// device's own; k > 0: a topology's other CA, softverbsk), then wakes every
// attached process.
// REQUIRES: the segment's control lock.
void append_port_events(const Segment& seg, uint64_t bits, uint8_t ca = 0);

class PortEventReader {
 public:
  // Starts at the log's head: events before it are not this reader's.
  void start(const Segment& seg) { next_ = seg.header().port_events.head.load(std::memory_order_acquire); }
  // Calls fn(ibv_event_type, ca) for each event appended since the last call,
  // oldest first. Events a whole log behind are lost, as a full kernel event
  // queue would drop them. Whether any.
  template <class Fn>
  bool read(const Segment& seg, Fn&& fn) {
    const PortEventLog& log = seg.header().port_events;
    const uint32_t head = log.head.load(std::memory_order_acquire);
    if (head == next_) return false;
    if (head - next_ > kPortEventLog) next_ = head - kPortEventLog;
    for (; next_ != head; ++next_) {
      const uint32_t e = log.entry[next_ % kPortEventLog].load(std::memory_order_relaxed);
      if ((e >> 16) != (next_ & 0xffff)) continue;  // overwritten since: lost
      fn(static_cast<ibv_event_type>(e & 0xff), static_cast<uint8_t>(e >> 8));
    }
    return true;
  }

 private:
  uint32_t next_ = 0;
};

}  // namespace softverbs::shm
