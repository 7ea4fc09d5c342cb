#include "shm/qp_pkeys.h"

#include "shm/slot_high_water.h"

namespace softverbs::shm {

void refresh_qp_pkeys(const Segment& seg, uint8_t ca, const PKeyTable& table) {
  // IBA 10.9.3: the QP holds the index, not the key: what its packets carry
  // and what it accepts follow the table at once.
  for (uint32_t slot = 0, end = walk_end(seg.header().high_water.qps, kMaxQpSlots); slot < end; ++slot) {
    SharedQp& qp = seg.qp(slot);
    // A QP in RESET is refreshed too: one moving to INIT may have taken its
    // key already, before its state shows it.
    if (qp.slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(SlotState::kLive) || qp.ca != ca)
      continue;
    const uint16_t index = __atomic_load_n(&qp.pkey_index, __ATOMIC_RELAXED);
    store_qp_pkey(qp, index < table.size() ? table[index] : 0);
  }
}

}  // namespace softverbs::shm
