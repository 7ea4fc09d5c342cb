#include "cm/event_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace softverbs::cm {

static_assert(offsetof(Event, pub) == 0);

EventChannel* EventChannel::create() {
  const int fd = eventfd(0, EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* ch = new EventChannel();
  ch->pub_.fd = fd;
  return ch;
}

EventChannel::~EventChannel() {
  for (Event* ev : queue_) delete ev;
  close(pub_.fd);
}

// The counter is only ever 0 or 1: write when the queue becomes non-empty,
// drain when it becomes empty. A read of a counter of 1 never blocks.
void EventChannel::set_readable(bool readable) {
  uint64_t v = 1;
  if (readable) {
    (void)!write(pub_.fd, &v, sizeof v);
  } else {
    (void)!read(pub_.fd, &v, sizeof v);
  }
}

void EventChannel::push(Event* ev) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(ev);
  if (queue_.size() == 1) set_readable(true);
}

int EventChannel::get(Event** out) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!queue_.empty()) {
        *out = queue_.front();
        queue_.pop_front();
        if (queue_.empty()) set_readable(false);
        return 0;
      }
      const int flags = fcntl(pub_.fd, F_GETFL);
      if (flags >= 0 && (flags & O_NONBLOCK) != 0) {
        errno = EAGAIN;
        return -1;
      }
    }
    pollfd p{pub_.fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) return -1;
  }
}

int EventChannel::drop_for(const CmId* id) {
  std::lock_guard<std::mutex> lock(mu_);
  int dropped = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->id == id) {
      delete *it;
      it = queue_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  if (dropped > 0 && queue_.empty()) set_readable(false);
  return dropped;
}

std::deque<Event*> EventChannel::take_for(const CmId* id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<Event*> taken;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->id == id) {
      taken.push_back(*it);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  if (!taken.empty() && queue_.empty()) set_readable(false);
  return taken;
}

bool EventChannel::empty() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty();
}

}  // namespace softverbs::cm
