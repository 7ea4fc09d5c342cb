#include "abi/ibumad/timeouts.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace softverbs::umad {
namespace {

using Clock = std::chrono::steady_clock;

struct Timeouts {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<PendingSend> pending;
  pid_t thread_pid = 0;  // the process whose thread runs: a forked child starts its own

  void run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (pending.empty()) {
        cv.wait(lock);
        continue;
      }
      auto first = std::min_element(pending.begin(), pending.end(),
                                    [](const PendingSend& a, const PendingSend& b) { return a.due < b.due; });
      if (Clock::now() < first->due) {
        cv.wait_until(lock, first->due);
        continue;
      }
      PendingSend e = std::move(*first);
      pending.erase(first);
      lock.unlock();
      deliver(*e.port, e.record.data(), e.record.size());
      lock.lock();
    }
  }
};

Timeouts& timeouts() {
  static auto* t = new Timeouts;  // its thread runs until exit
  return *t;
}

}  // namespace

void add_pending(PendingSend send) {
  Timeouts& t = timeouts();
  std::lock_guard<std::mutex> lock(t.mu);
  t.pending.push_back(std::move(send));
  if (t.thread_pid != getpid()) {
    t.thread_pid = getpid();
    std::thread([&t] { t.run(); }).detach();
  }
  t.cv.notify_one();
}

bool claim_answer(const OpenPort* port, uint32_t agent, uint64_t tid, uint8_t mgmt_class) {
  Timeouts& t = timeouts();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = std::find_if(t.pending.begin(), t.pending.end(), [&](const PendingSend& p) {
    return p.awaits_answer && p.port.get() == port && p.agent == agent && p.tid == tid && p.mgmt_class == mgmt_class;
  });
  if (it == t.pending.end()) return false;
  t.pending.erase(it);
  return true;
}

}  // namespace softverbs::umad
