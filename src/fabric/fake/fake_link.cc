#include "fabric/fake/fake_link.h"

#include <time.h>

#include "transport/completer.h"
#include "transport/mtu.h"
#include "transport/request_packets.h"
#include "transport/requester.h"
#include "transport/response_packets.h"
#include "transport/target_memory.h"
#include "util/time.h"
#include "wire/packet.h"

namespace softverbs::fabric::fake {
namespace {

class QueueSink final : public transport::PacketSink {
 public:
  explicit QueueSink(std::function<void(std::vector<uint8_t>)> to) : to_(std::move(to)) {}
  void send(std::span<uint8_t> packet) override { to_({packet.begin(), packet.end()}); }

 private:
  std::function<void(std::vector<uint8_t>)> to_;
};

}  // namespace

FakeLink::FakeLink(shm::Segment& seg, transport::SendSide& requester, uint32_t responder_slot,
                   transport::Notifier& notifier)
    : seg_(seg), requester_(requester), responder_slot_(responder_slot), notifier_(notifier) {}

ibv_wc_status FakeLink::transmit(transport::SendSide& s, transport::SendWqe& w, const transport::IoList& local,
                                 uint32_t from_psn) {
  transport::RequestPackets packets(s, w, local, from_psn);
  uint8_t buf[wire::kMaxPacketBytes];
  while (!packets.done()) {
    const std::span<uint8_t> p = packets.next(buf);
    if (p.empty()) break;
    enter(Direction::kRequest, {p.begin(), p.end()});
  }
  return IBV_WC_SUCCESS;
}

void FakeLink::enter(Direction d, std::vector<uint8_t> packet) {
  Queue& q = queues_[static_cast<int>(d)];
  log_[static_cast<int>(d)].push_back(packet);
  const wire::PacketView v = wire::PacketView::parse(packet, 4096);
  const PacketInfo info{d, packet, v.ok() ? v.bth().psn.value() : 0, packet.empty() ? uint8_t{0} : packet[0], q.seq++};
  const Fate fate = script_ ? script_(info) : Fate::kDeliver;
  switch (fate) {
    case Fate::kLose:
      return;
    case Fate::kDuplicate:
      q.ready.push_back(packet);
      break;
    case Fate::kHoldBack:
      q.held_back.push_back(std::move(packet));
      return;
    case Fate::kDelay:
      q.delayed.push_back(std::move(packet));
      return;
    case Fate::kDeliver:
      break;
  }
  q.ready.push_back(std::move(packet));
  // What was held back comes after this one.
  for (std::vector<uint8_t>& held : q.held_back) q.ready.push_back(std::move(held));
  q.held_back.clear();
}

void FakeLink::release_delayed() {
  for (Queue& q : queues_) {
    for (std::vector<uint8_t>& p : q.delayed) q.ready.push_back(std::move(p));
    q.delayed.clear();
  }
}

void FakeLink::deliver(Direction d, const std::vector<uint8_t>& packet) {
  const wire::PacketView v = wire::PacketView::parse(packet, 4096);
  if (!v.ok()) return;
  if (d == Direction::kRequest) {
    const shm::SharedQp& qp = seg_.qp(responder_slot_);
    QueueSink back([this](std::vector<uint8_t> p) { enter(Direction::kResponse, std::move(p)); });
    transport::LocalMemory mem;
    transport::serve_request_packet(seg_, responder_slot_, v, transport::mtu_bytes(qp.path_mtu), nullptr, mem,
                                    notifier_, back);
    return;
  }
  transport::on_response_packet(requester_, v);
  transport::progress(requester_);
}

int FakeLink::pump() {
  int delivered = 0;
  for (;;) {
    bool any = false;
    for (int d = 0; d < 2; ++d) {
      Queue& q = queues_[d];
      if (q.ready.empty()) continue;
      const std::vector<uint8_t> p = std::move(q.ready.front());
      q.ready.pop_front();
      deliver(static_cast<Direction>(d), p);
      ++delivered;
      any = true;
    }
    if (!any) return delivered;
  }
}

void FakeLink::run(int max_timeouts) {
  for (int fired = 0;;) {
    pump();
    if (requester_.sq.done == requester_.sq.posted) return;
    const uint64_t deadline = timers_.next();
    if (deadline == 0 || fired == max_timeouts) return;
    ++fired;
    // The completer's deadlines are on the real clock: wait for this one.
    for (uint64_t now = now_ns(); now < deadline; now = now_ns()) {
      const uint64_t wait = deadline - now;
      const timespec ts{static_cast<time_t>(wait / 1'000'000'000), static_cast<long>(wait % 1'000'000'000)};
      nanosleep(&ts, nullptr);
    }
    timers_.clear();
    transport::on_timer(requester_);
  }
}

}  // namespace softverbs::fabric::fake
