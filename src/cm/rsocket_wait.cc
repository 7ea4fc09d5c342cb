// rsockets' progress and waiting: completions, CM events and credits
// handled in the caller's thread, and sleeps in poll(2) with the socket's
// mutex released (cm/rsocket.h, invariant 2).
#include <poll.h>
#include <time.h>

#include <cerrno>

#include "cm/event_channel.h"
#include "cm/rsocket.h"

namespace softverbs::cm {
namespace rsimpl {

int fail(int err) {
  errno = err;
  return -1;
}

uint64_t now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000 + uint64_t(ts.tv_nsec) / 1000;
}

void progress(Rsocket* rs) {
  if (rs->cq != nullptr) poll_cq(rs);
  process_cm_events(rs);
  if ((rs->state & kRsConnected) != 0) update_credits(rs);
}

void arm_cq(Rsocket* rs) {
  if (rs->cq != nullptr && !rs->cq_armed) {
    ibv_req_notify_cq(rs->cq, 0);
    rs->cq_armed = true;
  }
}

void drain_cq_channel(ibv_comp_channel* ch, ibv_cq* cq, bool* armed, unsigned* unacked) {
  ibv_cq* event_cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(ch, &event_cq, &ctx) == 0) {
    *armed = false;
    if (++*unacked >= 256) {
      ibv_ack_cq_events(cq, *unacked);
      *unacked = 0;
    }
  }
}

void drain_cq_events(Rsocket* rs) {
  if (rs->cq_ch != nullptr) drain_cq_channel(rs->cq_ch, rs->cq, &rs->cq_armed, &rs->unacked_cq_events);
}

int wait_for(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock, bool (*test)(Rsocket*)) {
  const uint64_t spin_until = now_us() + 10;
  for (;;) {
    progress(rs);
    if (test(rs)) return 0;
    if ((rs->state & (kRsError | kRsConnectError)) != 0 && rs->err != 0) return fail(rs->err);
    if (nonblock) return fail(EWOULDBLOCK);
    if (now_us() < spin_until) continue;
    arm_cq(rs);
    progress(rs);
    if (test(rs)) return 0;
    // SO_KEEPALIVE: a zero-length RDMA WRITE every keepidle seconds (on
    // rdma-core's timer it is the same), so a dead peer surfaces as a
    // failed completion.
    if ((rs->so_opts & (1u << SO_KEEPALIVE)) != 0 && (rs->state & kRsConnected) != 0 &&
        now_us() - rs->last_activity_us > uint64_t(rs->keepidle_s) * 1000000) {
      post_keepalive(rs);
      rs->last_activity_us = now_us();
    }
    pollfd fds[2];
    nfds_t n = 0;
    fds[n++] = pollfd{rs->ch->pub()->fd, POLLIN, 0};
    if (rs->cq_ch != nullptr) fds[n++] = pollfd{rs->cq_ch->fd, POLLIN, 0};
    lk.unlock();
    const int rc = ::poll(fds, n, kWakeMs);
    lk.lock();
    if (rc < 0 && errno == EINTR) return -1;
    drain_cq_events(rs);
  }
}

}  // namespace rsimpl
}  // namespace softverbs::cm
