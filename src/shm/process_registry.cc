#include "shm/process_registry.h"

#include "shm/slot_high_water.h"

#include <infiniband/verbs.h>
#include <linux/futex.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "shm/rings.h"
#include "util/log.h"
#include "util/time.h"

namespace softverbs::shm {

uint64_t process_start_time(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return 0;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Field 22 (starttime) comes after the parenthesised command, which may hold spaces.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  unsigned long long start = 0;
  int field = 2;
  for (const char* q = p + 1; *q != '\0'; ++q) {
    if (*q == ' ') {
      ++field;
      if (field == 22) {
        std::sscanf(q + 1, "%llu", &start);
        break;
      }
    }
  }
  return start;
}

Result<OwnerId> attach_process(Segment& seg) {
  const int pid = getpid();
  const uint64_t start = process_start_time(pid);
  for (int pass = 0; pass < 2; ++pass) {
    {
      ControlLock lock(seg);
      for (uint32_t i = 0; i < kMaxProcesses; ++i) {
        ProcessSlot& p = seg.process(i);
        if (p.state.load(std::memory_order_acquire) != static_cast<uint32_t>(SlotState::kFree)) continue;
        int rc = pthread_mutex_trylock(&p.liveness);
        if (rc == EOWNERDEAD) {
          pthread_mutex_consistent(&p.liveness);
          rc = 0;
        }
        if (rc != 0) continue;  // still held by a process between detach and exit
        p.generation += 1;
        p.pid = pid;
        p.start_time = start;
        p.dead_since_ns = 0;
        p.doorbell.store(0);
        p.sleeping.store(0);
        p.cma_refused.store(0);
        for (auto& w : p.cq_event_bits) w.store(0, std::memory_order_relaxed);
        for (auto& w : p.qp_event_bits) w.store(0, std::memory_order_relaxed);
        for (auto& w : p.srq_event_bits) w.store(0, std::memory_order_relaxed);
        for (auto& b : p.bounce) b.state.store(static_cast<uint32_t>(BounceState::kFree));
        p.state.store(static_cast<uint32_t>(SlotState::kLive), std::memory_order_release);
        return OwnerId{i, p.generation};
      }
    }
    sweep(seg);  // the table may be full of the dead
  }
  SV_LOG(kError, "device %s: all %u process slots are in use", seg.path().c_str(), kMaxProcesses);
  return Status::error(EAGAIN);
}

bool process_alive(Segment& seg, OwnerId who) {
  if (who.slot >= kMaxProcesses) return false;
  ProcessSlot& p = seg.process(who.slot);
  if (p.state.load(std::memory_order_acquire) != static_cast<uint32_t>(SlotState::kLive) ||
      p.generation != who.generation)
    return false;
  // Every transmit asks, so the common answer comes from a plain load of the
  // robust futex word, which keeps the line shared; a trylock is a locked
  // write to the target's line. The kernel's robust-futex protocol puts the
  // holder's TID there and, when the holder dies, replaces it with
  // FUTEX_OWNER_DIED: a TID without that bit is a live holder.
  const int word = __atomic_load_n(&p.liveness.__data.__lock, __ATOMIC_ACQUIRE);
  if ((word & FUTEX_TID_MASK) != 0 && (word & FUTEX_OWNER_DIED) == 0) return true;
  int rc = pthread_mutex_trylock(&p.liveness);
  if (rc == EBUSY) return true;
  if (rc == EOWNERDEAD) pthread_mutex_consistent(&p.liveness);
  if (rc == 0 || rc == EOWNERDEAD) pthread_mutex_unlock(&p.liveness);
  return false;
}

namespace {

// A process's counters outlive it in the header's totals.
void fold_counters(Segment& seg, OwnerId who) {
  PortCounters& from = seg.process(who.slot).port;
  PortCounters& to = seg.header().port;
  auto fold = [](std::atomic<uint64_t>& a, std::atomic<uint64_t>& b) { b.fetch_add(a.exchange(0)); };
  fold(from.xmit_packets, to.xmit_packets);
  fold(from.xmit_bytes, to.xmit_bytes);
  fold(from.rcv_packets, to.rcv_packets);
  fold(from.rcv_bytes, to.rcv_bytes);
  fold(from.rcv_errors, to.rcv_errors);
  fold(from.local_access_errors, to.local_access_errors);
  fold(from.remote_access_errors, to.remote_access_errors);
  fold(from.cq_overruns, to.cq_overruns);
  fold(from.dropped_requests, to.dropped_requests);
  fold(from.icrc_errors, to.icrc_errors);
  fold(from.malformed_packets, to.malformed_packets);
  fold(from.unknown_qp_packets, to.unknown_qp_packets);
  fold(from.send_errors, to.send_errors);
  fold(from.faults_dropped, to.faults_dropped);
  fold(from.faults_duplicated, to.faults_duplicated);
  fold(from.faults_reordered, to.faults_reordered);
  fold(from.faults_corrupted, to.faults_corrupted);
  fold(from.faults_delayed, to.faults_delayed);
  fold(from.sl_vl15_discards, to.sl_vl15_discards);
  fold(from.port_state_discards, to.port_state_discards);
  for (unsigned sl = 0; sl < 16; ++sl) {
    fold(from.xmit_words_sl[sl], to.xmit_words_sl[sl]);
    fold(from.rcv_words_sl[sl], to.rcv_words_sl[sl]);
    fold(from.rcv_packets_sl[sl], to.rcv_packets_sl[sl]);
    fold(from.xmit_packets_sl[sl], to.xmit_packets_sl[sl]);
    fold(from.vl_op_packets_sl[sl], to.vl_op_packets_sl[sl]);
    fold(from.vl_op_words_sl[sl], to.vl_op_words_sl[sl]);
  }
  fold(from.op_rcv_packets, to.op_rcv_packets);
  fold(from.op_rcv_words, to.op_rcv_words);
}

}  // namespace

void fold_port_share(QpCounters& from, PortCounters& to, uint8_t sl) {
  const uint64_t xmit_packets = from.port_xmit_packets.exchange(0);
  const uint64_t xmit_bytes = from.port_xmit_bytes.exchange(0);
  const uint64_t rcv_packets = from.port_rcv_packets.exchange(0);
  const uint64_t rcv_bytes = from.port_rcv_bytes.exchange(0);
  to.xmit_packets.fetch_add(xmit_packets);
  to.xmit_bytes.fetch_add(xmit_bytes);
  to.rcv_packets.fetch_add(rcv_packets);
  to.rcv_bytes.fetch_add(rcv_bytes);
  to.xmit_words_sl[sl & 15].fetch_add(sl_words(xmit_bytes, xmit_packets));
  to.rcv_words_sl[sl & 15].fetch_add(sl_words(rcv_bytes, rcv_packets));
  to.rcv_packets_sl[sl & 15].fetch_add(rcv_packets);
  to.xmit_packets_sl[sl & 15].fetch_add(xmit_packets);
}

void retire_objects_of(Segment& seg, OwnerId who) {
  const uint64_t now = now_ns();
  fold_counters(seg, who);
  const SlotHighWater& hw = seg.header().high_water;
  // The key table's two halves: regions, then windows (limits.h).
  auto retire_keys = [&](uint32_t first, uint32_t end) {
    for (uint32_t i = first; i < end; ++i) {
      SharedMr& m = seg.mr(i);
      // An unbound window has no R_Key but holds its slot (lkey != 0).
      const bool held = m.rkey.load(std::memory_order_relaxed) != 0 || (i >= kFirstMwSlot && m.lkey != 0);
      if (held && m.owner == who) {
        m.rkey.store(0, std::memory_order_release);
        m.lkey = 0;  // the slot is free again
      }
    }
  };
  retire_keys(0, walk_end(hw.mrs, kFirstMwSlot));
  retire_keys(kFirstMwSlot, kFirstMwSlot + walk_end(hw.windows, kMaxMrs - kFirstMwSlot));
  for (uint32_t i = 0, end = walk_end(hw.qps, kMaxQpSlots); i < end; ++i) {
    SharedQp& q = seg.qp(i);
    if (q.slot_state.load(std::memory_order_relaxed) == static_cast<uint32_t>(SlotState::kLive) && q.owner == who) {
      fold_port_share(q.counters, seg.header().port, q.sl.load(std::memory_order_relaxed));
      q.state.store(IBV_QPS_ERR, std::memory_order_release);
      mark_dead(seg, q, now);
    }
  }
  for (uint32_t i = 0, end = walk_end(hw.cqs, kMaxCqs); i < end; ++i) {
    SharedCq& c = seg.cq(i);
    if (c.slot_state.load(std::memory_order_relaxed) == static_cast<uint32_t>(SlotState::kLive) && c.owner == who)
      mark_dead(seg, c, now);
  }
  for (uint32_t i = 0, end = walk_end(hw.srqs, kMaxSrqs); i < end; ++i) {
    SharedSrq& s = seg.srq(i);
    if (s.slot_state.load(std::memory_order_relaxed) == static_cast<uint32_t>(SlotState::kLive) && s.owner == who)
      mark_dead(seg, s, now);
  }
}

void release_xrcds_of(Segment& seg, OwnerId who) {
  for (uint32_t i = 0; i < kMaxXrcds; ++i) {
    SharedXrcd& x = seg.xrcd(i);
    if (x.slot_state.load(std::memory_order_relaxed) != static_cast<uint32_t>(SlotState::kLive) ||
        x.opens_by[who.slot] == 0)
      continue;
    x.opens -= x.opens_by[who.slot];
    x.opens_by[who.slot] = 0;
    if (x.opens == 0) x.slot_state.store(static_cast<uint32_t>(SlotState::kFree), std::memory_order_release);
  }
}

void detach_process(Segment& seg, OwnerId self) {
  retire_objects_of(seg, self);
  {
    ControlLock lock(seg);
    release_xrcds_of(seg, self);
  }
  ProcessSlot& p = seg.process(self.slot);
  p.dead_since_ns = now_ns();
  p.state.store(static_cast<uint32_t>(SlotState::kDead), std::memory_order_release);
}

namespace {

// `now` may predate `since`: another process buried the object after this
// sweep read the clock.
bool grace_over(uint64_t since, uint64_t now) { return now >= since && now - since >= kReclaimGraceNs; }

template <class Obj>
bool past_grace(Obj& o, uint64_t now) {
  return o.slot_state.load(std::memory_order_acquire) == static_cast<uint32_t>(SlotState::kDead) &&
         grace_over(o.dead_since_ns, now);
}

uint64_t recv_ring_bytes(const RecvQueue& rq) { return static_cast<uint64_t>(rq.capacity) * rq.stride; }

// The ring is read before the CAS: once the slot is free a new owner may
// overwrite it. The CAS makes exactly one sweeper free the ring.
template <class Obj>
bool release_slot(Segment& seg, Obj& o, Offset ring, uint64_t bytes) {
  uint32_t dead = static_cast<uint32_t>(SlotState::kDead);
  if (!o.slot_state.compare_exchange_strong(dead, static_cast<uint32_t>(SlotState::kFree),
                                            std::memory_order_acq_rel))
    return false;
  seg.header().pending_reclaim.fetch_sub(1, std::memory_order_relaxed);
  if (ring != 0) seg.arena_free(ring, bytes);
  return true;
}

void reclaim_processes(Segment& seg, uint64_t now) {
  for (uint32_t i = 0; i < kMaxProcesses; ++i) {
    ProcessSlot& p = seg.process(i);
    uint32_t dead = static_cast<uint32_t>(SlotState::kDead);
    // A CAS: since we looked, another sweeper may have freed the slot and a
    // newcomer taken it.
    if (p.state.load(std::memory_order_acquire) == dead && grace_over(p.dead_since_ns, now))
      p.state.compare_exchange_strong(dead, static_cast<uint32_t>(SlotState::kFree), std::memory_order_acq_rel);
  }
}

}  // namespace

void sweep(Segment& seg) {
  const uint64_t now = now_ns();
  for (uint32_t i = 0; i < kMaxProcesses; ++i) {
    ProcessSlot& p = seg.process(i);
    if (p.state.load(std::memory_order_acquire) != static_cast<uint32_t>(SlotState::kLive)) continue;
    const OwnerId who{i, p.generation};
    if (process_alive(seg, who)) continue;
    // Bury it under the control lock, which attach_process holds to reuse a
    // slot: other sweepers may have buried it and a newcomer taken the slot
    // since we looked, and the newcomer must not be buried in its place.
    ControlLock lock(seg);
    if (p.state.load(std::memory_order_acquire) != static_cast<uint32_t>(SlotState::kLive) ||
        p.generation != who.generation || process_alive(seg, who))
      continue;
    SV_LOG(kInfo, "process %d (slot %u) died; reclaiming its objects", p.pid, i);
    retire_objects_of(seg, who);
    release_xrcds_of(seg, who);
    p.dead_since_ns = now_ns();
    p.state.store(static_cast<uint32_t>(SlotState::kDead), std::memory_order_release);
  }
  // Tables are only walked when something waits for phase 2, so an idle
  // device's sweep touches the process table alone.
  if (seg.header().pending_reclaim.load(std::memory_order_relaxed) == 0) return reclaim_processes(seg, now);
  const SlotHighWater& hw = seg.header().high_water;
  for (uint32_t i = 0, end = walk_end(hw.qps, kMaxQpSlots); i < end; ++i) {
    SharedQp& q = seg.qp(i);
    if (past_grace(q, now)) release_slot(seg, q, q.rq.ring, recv_ring_bytes(q.rq));
  }
  for (uint32_t i = 0, end = walk_end(hw.srqs, kMaxSrqs); i < end; ++i) {
    SharedSrq& s = seg.srq(i);
    if (!past_grace(s, now)) continue;
    // Read before the slot is freed (release_slot): a new owner resets them.
    const uint32_t retired = std::min(s.retired_count, kMaxSrqRingMoves);
    RetiredRing rings[kMaxSrqRingMoves];
    std::copy_n(s.retired, retired, rings);
    if (release_slot(seg, s, s.rq.ring, recv_ring_bytes(s.rq)))
      for (uint32_t k = 0; k < retired; ++k) seg.arena_free(rings[k].ring, rings[k].bytes);
  }
  for (uint32_t i = 0, end = walk_end(hw.cqs, kMaxCqs); i < end; ++i) {
    SharedCq& c = seg.cq(i);
    if (past_grace(c, now)) release_slot(seg, c, c.ring, cq_ring_bytes(c.capacity, c.stamps != 0));
  }
  reclaim_processes(seg, now);
}

}  // namespace softverbs::shm
