// An RDMA CM event channel: a queue of events whose fd is readable exactly
// while the queue holds one.
//
// Contract:
//   1. The fd is an eventfd whose counter is non-zero iff the queue is not
//      empty (kept under the channel's lock), so poll/select/epoll see it
//      level-triggered, and an application that made it O_NONBLOCK with
//      fcntl gets EAGAIN from get() on an empty queue.
//   2. get() blocks in poll(2) on the fd, never spinning, when the fd is
//      blocking and the queue is empty; several threads may wait at once.
//   3. Events are owned by the channel until get() hands one out; then by
//      the caller until ack (Event::release). drop_for() discards the queued
//      events of an id being destroyed (the kernel drops events it has not
//      reported), and returns how many it dropped.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <deque>
#include <mutex>

namespace softverbs::cm {

struct CmId;

// One event as the application sees it, with room for its private data.
struct Event {
  rdma_cm_event pub{};  // first: rdma_cm_event* <-> Event*
  uint8_t private_data[256];
  CmId* id = nullptr;  // whose event (pub.id), counted in its outstanding events
};

class EventChannel {
 public:
  // NULL with errno when no eventfd can be made.
  static EventChannel* create();
  ~EventChannel();

  rdma_event_channel* pub() { return &pub_; }
  static EventChannel* from(rdma_event_channel* ch) { return reinterpret_cast<EventChannel*>(ch); }

  void push(Event* ev);
  // 0 and the next event, or -1 with errno (EAGAIN, EINTR, ...).
  int get(Event** out);
  int drop_for(const CmId* id);
  // Removes and returns the queued events of `id`, in order (rdma_migrate_id).
  std::deque<Event*> take_for(const CmId* id);
  bool empty();

 private:
  EventChannel() = default;
  void set_readable(bool readable);

  rdma_event_channel pub_{};  // first: the application's handle
  std::mutex mu_;
  std::deque<Event*> queue_;
};

}  // namespace softverbs::cm
