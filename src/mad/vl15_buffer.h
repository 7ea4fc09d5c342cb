// VL15's receive buffer (issue 20): subnet management packets travel on
// VL15, which has no flow control and is never arbitrated against the data
// VLs (IBA 7.6; 7.6.9: VL15 goes ahead of every data VL). A port holds the
// SMPs it has taken in, and not yet handed to its SMA or QP0, in a small
// buffer of its own; an SMP that arrives when that buffer is full is dropped
// and counted in PortCounters:VL15Dropped (IBA 16.1.3.5). The sender sees
// no answer and retries, as on hardware.
//
// Here the SMA answers in the sender's thread (mad/agent.h), so an SMP
// holds its slot from its arrival at the port until its answer is made:
// more SMPs at once than the buffer holds (a flood from several threads or
// processes) is what overflows it. Data never passes through this buffer,
// and the buffer never waits for data: an SMP takes a slot or is dropped at
// once.
//
// Thread-safety: any thread of any process attached to the segment. The
// buffer lives in the segment header (shm::Vl15Buffer); its size is fixed
// by the first SMP the port takes, from that process's SOFTVERBS_VL15_BUFFER.
#pragma once

#include <cstdint>

#include "shm/objects.h"

namespace softverbs::mad {

// A few SMPs, as a channel adapter's VL15 buffer holds: enough for an SM's
// usual few outstanding SMPs and a diagnostic tool beside it.
inline constexpr uint32_t kVl15BufferDefault = 8;
// How long a slot stays claimed by a holder that never gives it back (it
// died): far longer than any answer takes.
inline constexpr uint64_t kVl15LeaseNs = 1'000'000'000;

// SOFTVERBS_VL15_BUFFER: a number of MADs, 1 to shm::kVl15BufferMax. Null
// or empty: the default; *error set (and the default returned) otherwise.
uint32_t parse_vl15_buffer(const char* text, bool* error);
// This process's SOFTVERBS_VL15_BUFFER, read once (a bad value is logged).
uint32_t vl15_buffer_from_env();

// One slot of the port's VL15 buffer, held for the life of the object.
class Vl15Slot {
 public:
  // Claims a slot, fixing the buffer at `capacity` slots if no SMP has yet;
  // with every slot taken, counts the SMP in VL15Dropped instead.
  Vl15Slot(shm::Vl15Buffer& buffer, uint32_t capacity, uint64_t now);
  ~Vl15Slot();
  Vl15Slot(const Vl15Slot&) = delete;
  Vl15Slot& operator=(const Vl15Slot&) = delete;

  // False: the SMP was dropped.
  bool held() const { return index_ >= 0; }

 private:
  shm::Vl15Buffer& buffer_;
  int index_ = -1;
  uint64_t lease_ = 0;
};

}  // namespace softverbs::mad
