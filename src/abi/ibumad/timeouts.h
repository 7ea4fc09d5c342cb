// The timer thread: sends that expect an answer that may not come return,
// after timeout_ms x (retries + 1), as a record with status ETIMEDOUT. A
// request routed to another process's agent waits here until its answer
// claims it (by TID) or its time runs out. One thread per process, started
// by the first send that waits (a forked child starts its own).
//
// Thread-safety: both functions may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "abi/ibumad/open_port.h"

namespace softverbs::umad {

struct PendingSend {
  std::chrono::steady_clock::time_point due;
  std::shared_ptr<OpenPort> port;
  std::vector<uint8_t> record;  // what comes back when no answer came
  // For a request an answer may claim: who sent it, and what it carried.
  bool awaits_answer = false;
  uint32_t agent = 0;
  uint64_t tid = 0;
  uint8_t mgmt_class = 0;
};

void add_pending(PendingSend send);

// Whether a request of `agent` on `port` with this TID and class still
// waits; it then stops waiting. An answer nobody waits for is dropped, as
// the kernel drops it (mad.c: no send matches the response).
bool claim_answer(const OpenPort* port, uint32_t agent, uint64_t tid, uint8_t mgmt_class);

}  // namespace softverbs::umad
