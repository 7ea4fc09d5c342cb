// Resetting a shared slot (QP, SRQ, XRC domain) for a new owner.
//
// Other threads and processes read a slot's `slot_state` at any time, with
// atomic loads and without the control lock (sweeps, event delivery, the
// responder's lookups). Value-initializing the whole slot in place would
// write that word with a plain store: a data race with those readers. So
// only the bytes after `slot_state` are reset, to those of a freshly
// constructed object; `slot_state` itself is left to the caller's atomic
// store.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>

namespace softverbs::shm {

// REQUIRES: the control lock; `slot.slot_state` (the first member) is not
// kLive, so no reader looks past it.
template <class Slot>
void reset_slot_after_state(Slot& slot) {
  static_assert(offsetof(Slot, slot_state) == 0);
  constexpr size_t kState = sizeof(slot.slot_state);
  alignas(Slot) static thread_local unsigned char fresh[sizeof(Slot)];
  new (fresh) Slot();
  std::memcpy(reinterpret_cast<unsigned char*>(static_cast<void*>(&slot)) + kState, fresh + kState,
              sizeof(Slot) - kState);
}

}  // namespace softverbs::shm
