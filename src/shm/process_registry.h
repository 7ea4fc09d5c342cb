// Which processes are attached to the device, whether they are alive, and
// reclaiming what dead ones leave behind.
//
// Liveness: each attached process's service thread holds its slot's robust
// mutex for the life of the process. The kernel marks a robust mutex
// "owner died" when its holder exits, however it exits, so a peer learns of a
// death with one trylock and no syscall while the owner lives.
//
// Reclaim is two-phase: phase 1 makes every object of the dead process
// unreachable (QPs to ERR and dead, keys invalid); phase 2, a grace period
// later, frees their slots and ring memory. Objects destroyed normally go
// through phase 2 too, so a peer caught mid-access never touches reused memory.
#pragma once

#include <cstdint>

#include "shm/segment.h"

namespace softverbs::shm {

inline constexpr uint64_t kReclaimGraceNs = 2'000'000'000ull;

// Claims a process slot for this process. Must run on the thread that will
// hold the liveness mutex (the service thread) until the process ends.
Result<OwnerId> attach_process(Segment& seg);
// Clean detach at exit: everything the process still owns goes to phase 1.
void detach_process(Segment& seg, OwnerId self);

bool process_alive(Segment& seg, OwnerId who);
// Runs phase 1 for every dead process and phase 2 for everything past its grace.
void sweep(Segment& seg);
// Phase 1 for all objects of `who` (exposed for tests).
void retire_objects_of(Segment& seg, OwnerId who);
// The XRC domain handles `who` held open; a domain no process holds is freed.
// REQUIRES: the control lock.
void release_xrcds_of(Segment& seg, OwnerId who);

// Moves a QP's share of the port counters (QpCounters::port_*) into `to`,
// its data and received packets also under `sl` (PortCounters::*_sl).
void fold_port_share(QpCounters& from, PortCounters& to, uint8_t sl);

// 4-octet words of data, as PortXmitDataSL/PortRcvDataSL count it: each
// packet from the LRH to the ICRC (LRH 8, BTH 12, ICRC 4 besides payload).
constexpr uint64_t sl_words(uint64_t payload_bytes, uint64_t packets) { return (payload_bytes + packets * 24) / 4; }

uint64_t process_start_time(int pid);

// Phase 1 for one QP, CQ or SRQ: unreachable now, freed after the grace period.
template <class Obj>
void mark_dead(Segment& seg, Obj& o, uint64_t now_ns) {
  o.dead_since_ns = now_ns;
  seg.header().pending_reclaim.fetch_add(1, std::memory_order_relaxed);
  o.slot_state.store(static_cast<uint32_t>(SlotState::kDead), std::memory_order_release);
}

}  // namespace softverbs::shm
