// lock_service: what the command line decides, shared by the launcher and the
// processes it starts (they are forked from it, so each has its own copy).
#pragma once

#include <cstdint>
#include <string>

namespace lock_service {

struct Options {
  int clients = 4;
  uint64_t iterations = 2000;  // critical sections per client
  bool fence = true;           // IBV_SEND_FENCE on the release (README.md says why)
  bool uc = false;             // demonstrate that a UC QP refuses atomics, then stop
  bool roce = false;           // softverbs_roce0, each process a host on 127.0.0.<n>
  bool private_device = false; // a device instance of our own, removed at the end
  int timeout_s = 60;          // the whole run; every process is killed after it
  std::string device;          // empty: softverbs0, or softverbs_roce0 with --roce
  std::string json;            // write the verdict and the figures here too
};

// The lock word, the occupancy word and the counter the lock protects, each
// on a line of its own in the server's one registered page.
inline constexpr uint64_t kLockOffset = 0;
inline constexpr uint64_t kHoldersOffset = 64;
inline constexpr uint64_t kCounterOffset = 128;

}  // namespace lock_service
