// Futexes on words in memory shared between processes (never FUTEX_PRIVATE).
#pragma once

#include <atomic>
#include <cstdint>

namespace softverbs {

// Sleeps while *word == expected, at most timeout_ns (kForever: no limit).
// Returns false on timeout. Spurious wake-ups return true.
bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns);
void futex_wake(std::atomic<uint32_t>* word, int count);

}  // namespace softverbs
