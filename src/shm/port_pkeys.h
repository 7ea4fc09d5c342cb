// The port's P_Key table (IBA 10.9) and its P_Key violation count, kept in
// the segment header (shm::PortPKeys) so that every process, the SMA and the
// data path read one copy (issue 19).
//
// Writers (an SM's Set(P_KeyTable), mad/agent.cc) hold SegmentHeader::control.
// Each QP keeps the entry at its pkey_index in SharedQp::pkey, taken when it
// is modified and refreshed by every change (shm/qp_pkeys.h), so the data
// path never reads the table: it compares a packet's P_Key with its QP's,
// one load and one compare when they agree.
//
// Header-only: the responder's fuzzer links the segment without the verbs layer.
#pragma once

#include <array>
#include <cstdint>

#include "shm/objects.h"

namespace softverbs::shm {

using PKeyTable = std::array<uint16_t, kPKeyTableCap>;

inline constexpr uint16_t kDefaultPKey = 0xffff;     // IBA 10.9.1.2: the default partition, full member
inline constexpr uint16_t kPKeyFullMember = 0x8000;  // the membership bit
inline constexpr uint16_t kPKeyBaseMask = 0x7fff;

// What a port boots with: the default P_Key at index 0, the rest invalid (0).
inline PKeyTable default_pkeys() {
  PKeyTable t{};
  t[0] = kDefaultPKey;
  return t;
}

inline PKeyTable load_pkeys(const SegmentHeader& h) {
  PKeyTable t;
  for (unsigned i = 0; i < kPKeyTableCap; ++i) t[i] = h.pkeys.entry[i].load(std::memory_order_relaxed);
  return t;
}

// REQUIRES: the caller holds SegmentHeader::control (or is the creator).
inline void store_pkeys(SegmentHeader& h, const PKeyTable& t) {
  for (unsigned i = 0; i < kPKeyTableCap; ++i) h.pkeys.entry[i].store(t[i], std::memory_order_relaxed);
  h.pkeys.generation.fetch_add(1, std::memory_order_release);
}

// The entry at `index`; 0 (the invalid P_Key) beyond the table.
inline uint16_t pkey_at(const SegmentHeader& h, unsigned index) {
  return index < kPKeyTableCap ? h.pkeys.entry[index].load(std::memory_order_relaxed) : 0;
}

// IBA 10.9.3 (C10-128..130): two P_Keys match when their base values agree,
// neither is invalid (base 0), and at least one is a full member: two
// limited members of a partition never talk to each other.
constexpr bool pkeys_match(uint16_t a, uint16_t b) {
  return (a & kPKeyBaseMask) == (b & kPKeyBaseMask) && (a & kPKeyBaseMask) != 0 && ((a | b) & kPKeyFullMember) != 0;
}

// What SharedQp::pkey_fast holds for a QP of P_Key `own`: `own` itself for
// a full member of a valid partition, which every request carrying that same
// key matches; otherwise a value no 16-bit P_Key equals, so every request
// takes the closer look of pkeys_match.
inline constexpr uint32_t kNoFastPKey = 0x10000;
constexpr uint32_t fast_pkey(uint16_t own) {
  return (own & kPKeyFullMember) != 0 && (own & kPKeyBaseMask) != 0 ? own : kNoFastPKey;
}

// The index of the first entry that matches `pkey`, or -1.
inline int pkey_index_matching(const SegmentHeader& h, uint16_t pkey) {
  for (unsigned i = 0; i < kPKeyTableCap; ++i)
    if (pkeys_match(h.pkeys.entry[i].load(std::memory_order_relaxed), pkey)) return static_cast<int>(i);
  return -1;
}

// PortInfo:P_KeyViolations (IBA 14.2.5.6): 16 bits that stop at 0xFFFF.
inline uint16_t pkey_violations(const SegmentHeader& h) {
  const uint64_t v = h.pkeys.violations.load(std::memory_order_relaxed);
  return v > 0xffff ? 0xffff : static_cast<uint16_t>(v);
}
inline void count_pkey_violation(SegmentHeader& h) { h.pkeys.violations.fetch_add(1, std::memory_order_relaxed); }

}  // namespace softverbs::shm
