#include "transport/link_pacing.h"

#include <time.h>

#include <algorithm>

#include "shm/port_link.h"
#include "shm/port_qos.h"
#include "transport/qp_types.h"
#include "transport/requester.h"
#include "transport/vl.h"
#include "transport/vl_arbiter.h"
#include "util/time.h"

namespace softverbs::transport {
namespace {

constexpr uint32_t kPacketOverhead = 8 + 12 + 4 + 2;  // LRH, BTH, ICRC, VCRC

// A VL counts as busy while its lane is reserved, or someone waited on it,
// this recently: long enough to bridge a sender's scheduling gaps between
// turns on shared cores, short enough that an idle VL's share soon goes to
// the others.
constexpr uint64_t kBusyGraceNs = 50'000'000;
// A lane whose sender came back this late (it slept past its turn, or was
// not scheduled) goes on from where its last turn ended, catching up, so its
// long-run rate holds on busy cores. Later than that it counts as having
// been idle: it starts now, with no credit, so a lane that others' shares
// covered meanwhile never sends that time twice, and the first request on
// an idle link takes its full time.
constexpr uint64_t kCatchUpNs = 20'000'000;
// How often a sender without a share looks again.
constexpr uint64_t kStarvedPollNs = 20'000;

uint32_t busy_vls(const shm::PortLink& link, uint64_t now) {
  uint32_t busy = 0;
  for (unsigned v = 0; v < shm::kVls; ++v) {
    const shm::VlLane& l = link.lane[v];
    if (l.free_at_ns.load(std::memory_order_relaxed) + kBusyGraceNs > now ||
        l.waiting_ns.load(std::memory_order_relaxed) + kBusyGraceNs > now)
      busy |= 1u << v;
  }
  return busy;
}

}  // namespace

void sleep_until(uint64_t t) {
  timespec ts{static_cast<time_t>(t / 1'000'000'000ull), static_cast<long>(t % 1'000'000'000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

uint64_t request_wire_bytes(const SendSide& s, const SendWqe& w, const WrOpcodeInfo& op, uint32_t from_psn,
                            uint32_t* packets) {
  const uint32_t done = std::min((from_psn - w.psn) & 0xffffff, w.packets - 1);
  // A READ's PSNs are its responses': the request is one packet, as an atomic's.
  const bool multi = op.kind == ReqKind::kSend || op.kind == ReqKind::kWrite;
  const uint32_t n = multi ? std::max(w.packets, 1u) - done : 1;
  uint64_t payload = 0;
  uint64_t first = 0;  // extension headers of the first packet (or the only one)
  switch (op.kind) {
    case ReqKind::kSend: payload = w.length; break;
    case ReqKind::kWrite: payload = w.length; first = 16; break;                 // RETH
    case ReqKind::kRead: first = 16; break;                                      // RETH; the data comes back
    case ReqKind::kCmpSwap: case ReqKind::kFetchAdd: first = 28; break;          // AtomicETH
    case ReqKind::kAtomicWrite: payload = 8; first = 16; break;                  // RETH + the value
    case ReqKind::kFlush: first = 16 + 4; break;                                 // RETH + FETH
  }
  payload -= std::min<uint64_t>(payload, static_cast<uint64_t>(done) * s.conn.mtu);
  uint64_t per_packet = kPacketOverhead;
  if (s.qp.qp_type == IBV_QPT_UD) per_packet += 8 + (w.ah != nullptr && w.ah->is_global ? 40 : 0);  // DETH, GRH
  if (s.qp.qp_type == IBV_QPT_XRC_SEND) per_packet += 4;                                            // XRCETH
  if (op.has_imm || op.has_inv) first += 4;  // ImmDt / IETH, on the last packet
  *packets = n;
  return payload + n * per_packet + first;
}

uint64_t response_wire_bytes(const SendSide& s, const SendWqe& w, const WrOpcodeInfo& op, uint32_t from_psn,
                             uint32_t* packets) {
  *packets = 0;
  if (!reliable_qp(s.qp.qp_type)) return 0;  // UC and UD answer nothing
  constexpr uint64_t kAeth = 4;
  switch (op.kind) {
    case ReqKind::kRead: {
      // READ RESPONSE FIRST, MIDDLE..., LAST (or ONLY) for what is left to
      // read from `from_psn` on (a resumed READ asks for the rest only);
      // the FIRST and the LAST carry an AETH.
      const uint32_t done = std::min((from_psn - w.psn) & 0xffffff, std::max(w.packets, 1u) - 1);
      const uint32_t n = std::max(w.packets, 1u) - done;
      const uint64_t payload = w.length - std::min<uint64_t>(w.length, static_cast<uint64_t>(done) * s.conn.mtu);
      *packets = n;
      return payload + n * kPacketOverhead + (n == 1 ? kAeth : 2 * kAeth);
    }
    case ReqKind::kCmpSwap:
    case ReqKind::kFetchAdd:
      *packets = 1;
      return kPacketOverhead + kAeth + 8;  // ATOMIC ACKNOWLEDGE: AETH, AtomicAckETH
    case ReqKind::kAtomicWrite:
    case ReqKind::kFlush:
      *packets = 1;
      return kPacketOverhead + kAeth;  // a READ RESPONSE ONLY without data
    case ReqKind::kSend:
    case ReqKind::kWrite:
      // One ACKNOWLEDGE for the message (its last packet asks for one).
      *packets = 1;
      return kPacketOverhead + kAeth;
  }
  return 0;
}

Turn try_turn(shm::SegmentHeader& h, uint8_t vl, uint64_t wire_bytes, uint32_t packets, uint32_t mtu,
              uint64_t* waiting_since, uint64_t* retry_at) {
  const uint64_t mbps = shm::link_data_mbps(shm::load_link(h, {}));
  const shm::QosTables tables = shm::load_qos(h);
  const VlWeights weights = vl_weights(tables);
  if (mbps == 0 || vl >= shm::kVls || (weights.high[vl] == 0 && weights.low[vl] == 0)) return Turn::kDiscard;
  shm::VlLane& lane = h.link.lane[vl];
  const uint32_t packet = mtu + kPacketOverhead;
  for (;;) {
    const uint64_t now = now_ns();
    const double share = arbitration_share(tables, weights, busy_vls(h.link, now), vl, packet);
    if (share <= 0) {
      // Only a wait without a share counts (PortVLXmitWait, the lifetime):
      // waiting for the VL's own previous stretch to pass is its own data.
      if (*waiting_since == 0) *waiting_since = now;
      const uint64_t since = *waiting_since;
      if (now - since > kHeadOfQueueLifeNs) {
        lane.xmit_wait_ns.fetch_add(now - since, std::memory_order_relaxed);
        return Turn::kDiscard;
      }
      lane.waiting_ns.store(now, std::memory_order_relaxed);
      *retry_at = now + kStarvedPollNs;
      return Turn::kLater;
    }
    uint64_t old = lane.free_at_ns.load(std::memory_order_relaxed);
    // The lane's last stretch has not passed: another request of this VL
    // (any process's) is on the wire until then.
    if (old > now) {
      *retry_at = old;
      return Turn::kLater;
    }
    // bits / (Mb/s) = us; x 1000 = ns.
    const auto duration = static_cast<uint64_t>(static_cast<double>(wire_bytes) * 8 * 1000 / (mbps * share));
    const uint64_t start = old + kCatchUpNs >= now ? old : now;
    if (!lane.free_at_ns.compare_exchange_weak(old, start + duration, std::memory_order_relaxed)) continue;
    lane.xmit_words.fetch_add(wire_bytes / 4, std::memory_order_relaxed);
    lane.xmit_packets.fetch_add(packets, std::memory_order_relaxed);
    // The VL waited while it had no share at all, and, sending at its share,
    // for the stretches in which the other VLs' packets had the link: what
    // its bytes take beyond their time alone (PortVLXmitWaitCounters).
    const auto alone = static_cast<uint64_t>(static_cast<double>(wire_bytes) * 8 * 1000 / mbps);
    const uint64_t starved = *waiting_since != 0 ? now - *waiting_since : 0;
    lane.xmit_wait_ns.fetch_add(starved + (duration > alone ? duration - alone : 0), std::memory_order_relaxed);
    return Turn::kGo;
  }
}

bool take_turn(shm::SegmentHeader& h, uint8_t vl, uint64_t wire_bytes, uint32_t packets, uint32_t mtu) {
  uint64_t since = 0, at = 0;
  for (;;) {
    switch (try_turn(h, vl, wire_bytes, packets, mtu, &since, &at)) {
      case Turn::kDiscard: return false;
      case Turn::kLater: sleep_until(at); continue;
      case Turn::kGo: sleep_until(h.link.lane[vl].free_at_ns.load(std::memory_order_relaxed)); return true;
    }
  }
}

Turn port_turn(SendSide& s, const SendWqe& w, const WrOpcodeInfo& op, uint32_t from_psn) {
  shm::SegmentHeader& h = s.qp.seg->header();
  const uint8_t vl = s.qp.qp_type == IBV_QPT_UD ? shm::vl_of_sl(h, w.ah->sl) : path_vl(s);
  if (vl == shm::kVl15) return Turn::kDiscard;
  if (!shm::load_link(h, {}).paced) return Turn::kGo;
  uint32_t packets = 0, response_packets = 0;
  // The request's turn covers its answers too (docs/DESIGN.md, "Paced
  // link"): they cross the port's link on the same VL.
  const uint64_t bytes = request_wire_bytes(s, w, op, from_psn, &packets) +
                         response_wire_bytes(s, w, op, from_psn, &response_packets);
  packets += response_packets;
  CompleterState& c = s.completer;
  const Turn t = try_turn(h, vl, bytes, packets, s.qp.qp_type == IBV_QPT_UD ? s.qp.ud_mtu : s.conn.mtu,
                          &c.turn_since, &c.turn_at);
  if (t != Turn::kLater) c.turn_since = c.turn_at = 0;
  return t;
}

}  // namespace softverbs::transport
