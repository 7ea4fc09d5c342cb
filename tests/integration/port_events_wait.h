// Waiting for a context's port events (IBV_EVENT_PORT_ACTIVE, LID_CHANGE,
// PKEY_CHANGE…) in the tests of the port's state and its partitions.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <set>

#include "harness.h"

namespace softverbs::integration {

// The port events that reach `ctx` until all of `want` came or the deadline;
// each must name port 1.
inline std::set<int> port_events(ibv_context* ctx, const std::set<int>& want) {
  std::set<int> got;
  Deadline d = Deadline::op();
  while (!std::includes(got.begin(), got.end(), want.begin(), want.end()) && !d.expired()) {
    pollfd p{ctx->async_fd, POLLIN, 0};
    if (poll(&p, 1, d.poll_ms(100)) <= 0) continue;
    ibv_async_event e{};
    if (ibv_get_async_event(ctx, &e) != 0) continue;
    EXPECT_EQ(1, e.element.port_num) << ibv_event_type_str(e.event_type);
    got.insert(e.event_type);
    ibv_ack_async_event(&e);
  }
  return got;
}

}  // namespace softverbs::integration
