// The P_Keys QPs hold (IBA 10.9.3): a QP holds an index into its port's
// P_Key table, so a table change reaches every QP at once; each QP's
// SharedQp::pkey/pkey_fast copy the entry at its index so that the data path
// reads no table (issue 19).
//
// Thread-safety: every writer holds SegmentHeader::control: an SM's
// Set(P_KeyTable), in whichever process sent it, stores the table, bumps
// PortPKeys::generation and refreshes the port's QPs; a QP's owner sets its
// index and key (modify_qp) after reading the table outside the lock, and
// reads the table again if the generation moved meanwhile (the other CAs'
// tables sit behind the subnet's lock, taken before the control lock). The
// data path reads the copies with relaxed __atomic loads, no lock.
#pragma once

#include <cstdint>

#include "shm/port_pkeys.h"
#include "shm/segment.h"

namespace softverbs::shm {

// What the data path reads: the QP's key, and what a packet may carry to
// pass with one compare.
inline uint16_t qp_pkey(const SharedQp& qp) { return __atomic_load_n(&qp.pkey, __ATOMIC_RELAXED); }
inline uint32_t qp_pkey_fast(const SharedQp& qp) { return __atomic_load_n(&qp.pkey_fast, __ATOMIC_RELAXED); }

// REQUIRES: the caller holds SegmentHeader::control.
inline void store_qp_pkey(SharedQp& qp, uint16_t pkey) {
  __atomic_store_n(&qp.pkey, pkey, __ATOMIC_RELAXED);
  __atomic_store_n(&qp.pkey_fast, fast_pkey(pkey), __ATOMIC_RELAXED);
}

// The owner gives its QP an index and the key there.
// REQUIRES: the caller holds SegmentHeader::control and owns the QP.
inline void set_qp_pkey(SharedQp& qp, uint16_t index, uint16_t pkey) {
  __atomic_store_n(&qp.pkey_index, index, __ATOMIC_RELAXED);
  store_qp_pkey(qp, pkey);
}

// Gives every live QP of CA `ca` (SharedQp::ca) the entry of `table` at
// its index.
// REQUIRES: the caller holds SegmentHeader::control and has already bumped
// PortPKeys::generation (store_pkeys does), so an owner that read the old
// table reads it again.
void refresh_qp_pkeys(const Segment& seg, uint8_t ca, const PKeyTable& table);

// For a change of another CA's table, which lives outside the segment.
// REQUIRES: the caller holds SegmentHeader::control.
inline void note_pkeys_changed(SegmentHeader& h) { h.pkeys.generation.fetch_add(1, std::memory_order_release); }

}  // namespace softverbs::shm
