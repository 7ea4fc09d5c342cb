#include "mad/vl15_buffer.h"

#include <cstdlib>
#include <cstring>

#include "util/log.h"

namespace softverbs::mad {

uint32_t parse_vl15_buffer(const char* text, bool* error) {
  *error = false;
  if (text == nullptr || *text == '\0') return kVl15BufferDefault;
  char* end = nullptr;
  const unsigned long n = std::strtoul(text, &end, 10);
  if (*end != '\0' || text[0] == '-' || n < 1 || n > shm::kVl15BufferMax) {
    *error = true;
    return kVl15BufferDefault;
  }
  return static_cast<uint32_t>(n);
}

uint32_t vl15_buffer_from_env() {
  static const uint32_t capacity = [] {
    const char* text = std::getenv("SOFTVERBS_VL15_BUFFER");
    bool error = false;
    const uint32_t n = parse_vl15_buffer(text, &error);
    if (error)
      SV_LOG(kError, "SOFTVERBS_VL15_BUFFER: a number of MADs from 1 to %u, not \"%s\"; using %u",
             shm::kVl15BufferMax, text, n);
    return n;
  }();
  return capacity;
}

Vl15Slot::Vl15Slot(shm::Vl15Buffer& buffer, uint32_t capacity, uint64_t now) : buffer_(buffer) {
  uint32_t size = 0;
  if (!buffer.capacity.compare_exchange_strong(size, capacity, std::memory_order_acq_rel)) capacity = size;
  capacity = capacity < shm::kVl15BufferMax ? capacity : shm::kVl15BufferMax;
  lease_ = now + kVl15LeaseNs;
  for (uint32_t i = 0; i < capacity; ++i) {
    uint64_t held = buffer.slot[i].load(std::memory_order_relaxed);
    // A lease that ended belongs to a holder that died with it.
    if (held != 0 && held > now) continue;
    if (buffer.slot[i].compare_exchange_strong(held, lease_, std::memory_order_acquire)) {
      index_ = static_cast<int>(i);
      return;
    }
  }
  buffer.dropped.fetch_add(1, std::memory_order_relaxed);
}

Vl15Slot::~Vl15Slot() {
  if (index_ < 0) return;
  // Only if still ours: a holder slower than its lease finds the slot taken over.
  uint64_t mine = lease_;
  buffer_.slot[index_].compare_exchange_strong(mine, 0, std::memory_order_release);
}

}  // namespace softverbs::mad
