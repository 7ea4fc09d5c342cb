// A scripted packet link for protocol tests: the transport's own request and
// response packets (transport/request_packets.h, response_packets.h), carried
// between QPs of one process through two in-memory queues instead of
// sockets, each packet's fate decided by the test — delivered, lost,
// duplicated, held back behind the next one (reordered) or delayed until the
// test releases it. Everything else is the engine both real fabrics use:
// requester, responder, completer, timers.
//
// Single-threaded: the test calls post/pump/run from one thread; nothing
// here takes SendSide::lock (the test owns the QPs outright). Not part of the
// library (src/CMakeLists.txt leaves fabric/fake/ out of softverbs_core).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "shm/segment.h"
#include "transport/link.h"
#include "transport/notifier.h"

namespace softverbs::fabric::fake {

enum class Direction : uint8_t { kRequest, kResponse };

enum class Fate : uint8_t {
  kDeliver,
  kLose,
  kDuplicate,  // delivered twice in a row
  kHoldBack,   // delivered after the next packet in the same direction
  kDelay,      // kept until release_delayed()
};

// What the test sees of each packet as it enters the wire.
struct PacketInfo {
  Direction direction;
  const std::vector<uint8_t>& bytes;  // BTH through ICRC slot
  uint32_t psn;
  uint8_t opcode;
  uint32_t seq;  // how many packets went this direction before it
};

using Script = std::function<Fate(const PacketInfo&)>;

// Records the earliest deadline the completer asked for.
class FakeTimers final : public transport::TimerService {
 public:
  void arm(transport::SendSide&, uint64_t deadline_ns) override {
    if (next_ == 0 || deadline_ns < next_) next_ = deadline_ns;
  }
  uint64_t next() const { return next_; }
  void clear() { next_ = 0; }

 private:
  uint64_t next_ = 0;
};

class FakeLink final : public transport::Link {
 public:
  // `requester` sends to the QP in `responder_slot`; both live in `seg`.
  FakeLink(shm::Segment& seg, transport::SendSide& requester, uint32_t responder_slot, transport::Notifier& notifier);

  void set_script(Script script) { script_ = std::move(script); }

  ibv_wc_status transmit(transport::SendSide& side, transport::SendWqe& wqe, const transport::IoList& local,
                         uint32_t from_psn) override;

  // Delivers queued packets (and what they cause) until both queues are
  // empty. Returns how many packets were delivered.
  int pump();
  // Delayed packets join their queues again.
  void release_delayed();
  // Pumps; when the wire is quiet and the requester still has WQEs out,
  // waits for the completer's deadline and fires it; until every posted WQE
  // has completed or `max_timeouts` deadlines have fired.
  void run(int max_timeouts = 16);

  FakeTimers& timers() { return timers_; }
  // Every packet that entered the wire, in order, whatever its fate.
  const std::vector<std::vector<uint8_t>>& sent(Direction d) const { return log_[static_cast<int>(d)]; }

 private:
  struct Queue {
    std::deque<std::vector<uint8_t>> ready;
    std::vector<std::vector<uint8_t>> held_back;
    std::vector<std::vector<uint8_t>> delayed;
    uint32_t seq = 0;
  };
  void enter(Direction d, std::vector<uint8_t> packet);
  void deliver(Direction d, const std::vector<uint8_t>& packet);

  shm::Segment& seg_;
  transport::SendSide& requester_;
  uint32_t responder_slot_;
  transport::Notifier& notifier_;
  FakeTimers timers_;
  Script script_;
  Queue queues_[2];
  std::vector<std::vector<uint8_t>> log_[2];
};

}  // namespace softverbs::fabric::fake
