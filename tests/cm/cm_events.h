// Waiting for an RDMA CM event in a test: the next event of a channel must
// be the one wanted, within a bound.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

namespace cm_test {

inline bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

// The next event of `ch`, which must be `want`; nullptr (and a failure) otherwise.
inline rdma_cm_event* expect_event(rdma_event_channel* ch, rdma_cm_event_type want, int timeout_ms = 5000) {
  if (!readable(ch->fd, timeout_ms)) {
    ADD_FAILURE() << "no event within " << timeout_ms << " ms, waiting for " << rdma_event_str(want);
    return nullptr;
  }
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) {
    ADD_FAILURE() << "rdma_get_cm_event: " << std::strerror(errno);
    return nullptr;
  }
  if (ev->event != want) {
    ADD_FAILURE() << "got " << rdma_event_str(ev->event) << " (status " << ev->status << "), want "
                  << rdma_event_str(want);
    rdma_ack_cm_event(ev);
    return nullptr;
  }
  return ev;
}

inline void expect_and_ack(rdma_event_channel* ch, rdma_cm_event_type want) {
  if (rdma_cm_event* ev = expect_event(ch, want)) rdma_ack_cm_event(ev);
}

}  // namespace cm_test
