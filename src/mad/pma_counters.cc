#include "mad/pma_counters.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "shm/op_select.h"
#include "shm/slot_high_water.h"
#include "shm/port_qos.h"
#include "shm/process_registry.h"
#include "verbs/port_config.h"

namespace softverbs::mad {
namespace {

// What each packet carries besides its payload, as PortXmitData/PortRcvData
// count it (IBA 16.1.3.5: from the LRH to the ICRC): LRH 8 + BTH 12 + ICRC 4
// on InfiniBand; RoCE has no LRH. Extension headers (RETH, AETH...) are not
// known here and left out.
constexpr uint64_t kIbOverheadBytes = 24;
constexpr uint64_t kRoceOverheadBytes = 16;

struct Totals {
  uint64_t xmit_packets = 0, xmit_bytes = 0, rcv_packets = 0, rcv_bytes = 0;
  uint64_t rcv_errors = 0, xmit_discards = 0, symbol_errors = 0;
  uint64_t icrc_errors = 0, malformed = 0, inactive_discards = 0;
  uint64_t xmit_words_sl[16] = {}, rcv_words_sl[16] = {}, rcv_packets_sl[16] = {}, xmit_packets_sl[16] = {};
  // What the OpCode selectors counted (shm/op_select.h).
  uint64_t op_rcv_packets = 0, op_rcv_words = 0, vl_op_packets_sl[16] = {}, vl_op_words_sl[16] = {};
};

void add(Totals& t, const shm::PortCounters& c) {
  t.xmit_packets += c.xmit_packets.load(std::memory_order_relaxed);
  t.xmit_bytes += c.xmit_bytes.load(std::memory_order_relaxed);
  t.rcv_packets += c.rcv_packets.load(std::memory_order_relaxed);
  t.rcv_bytes += c.rcv_bytes.load(std::memory_order_relaxed);
  // Packets the port received and could not use.
  t.rcv_errors += c.rcv_errors.load(std::memory_order_relaxed) + c.icrc_errors.load(std::memory_order_relaxed) +
                  c.malformed_packets.load(std::memory_order_relaxed);
  // Packets that never left: the socket refused them, the fault injector
  // dropped them, their SL maps to VL15, or the port was not ACTIVE.
  t.xmit_discards += c.send_errors.load(std::memory_order_relaxed) + c.faults_dropped.load(std::memory_order_relaxed) +
                     c.sl_vl15_discards.load(std::memory_order_relaxed) +
                     c.port_state_discards.load(std::memory_order_relaxed);
  // Their details (IBA 16.1.4.2/3): an ICRC error is a local physical
  // error, a header that does not parse a malformed packet, a request
  // posted while the port was not ACTIVE an inactive discard.
  t.icrc_errors += c.icrc_errors.load(std::memory_order_relaxed);
  t.malformed += c.malformed_packets.load(std::memory_order_relaxed);
  t.inactive_discards += c.port_state_discards.load(std::memory_order_relaxed);
  // A corrupted packet is what a bad symbol on a real link becomes.
  t.symbol_errors += c.faults_corrupted.load(std::memory_order_relaxed);
  for (unsigned sl = 0; sl < 16; ++sl) {
    t.xmit_words_sl[sl] += c.xmit_words_sl[sl].load(std::memory_order_relaxed);
    t.rcv_words_sl[sl] += c.rcv_words_sl[sl].load(std::memory_order_relaxed);
    t.rcv_packets_sl[sl] += c.rcv_packets_sl[sl].load(std::memory_order_relaxed);
    t.xmit_packets_sl[sl] += c.xmit_packets_sl[sl].load(std::memory_order_relaxed);
    t.vl_op_packets_sl[sl] += c.vl_op_packets_sl[sl].load(std::memory_order_relaxed);
    t.vl_op_words_sl[sl] += c.vl_op_words_sl[sl].load(std::memory_order_relaxed);
  }
  t.op_rcv_packets += c.op_rcv_packets.load(std::memory_order_relaxed);
  t.op_rcv_words += c.op_rcv_words.load(std::memory_order_relaxed);
}

// A file written before the last counters were added is shorter: those
// start from zero, the others keep their reset point.
PmaCounters read_baseline(int fd) {
  PmaCounters b;
  const ssize_t n = pread(fd, b.v, sizeof b.v, 0);
  if (n < 0 || n % static_cast<ssize_t>(sizeof b.v[0]) != 0) return PmaCounters{};
  return b;  // what the read did not reach stays 0
}

}  // namespace

PmaCounters raw_pma_counters(const shm::Segment& seg) {
  using shm::OpSelector;
  // An applied OpCode selector counts its opcode's packets; without one the
  // Op attributes count every packet received.
  const uint32_t select = seg.header().op_select.load(std::memory_order_acquire);
  Totals t;
  add(t, seg.header().port);
  for (uint32_t i = 0; i < shm::kMaxProcesses; ++i)
    if (seg.process(i).state.load(std::memory_order_acquire) == static_cast<uint32_t>(shm::SlotState::kLive))
      add(t, seg.process(i).port);
  for (uint32_t i = 2, end = shm::walk_end(seg.header().high_water.qps, shm::kMaxQpSlots); i < end; ++i) {
    const shm::SharedQp& q = seg.qp(i);
    if (q.slot_state.load(std::memory_order_acquire) != static_cast<uint32_t>(shm::SlotState::kLive)) continue;
    t.xmit_packets += q.counters.port_xmit_packets.load(std::memory_order_relaxed);
    t.xmit_bytes += q.counters.port_xmit_bytes.load(std::memory_order_relaxed);
    t.rcv_packets += q.counters.port_rcv_packets.load(std::memory_order_relaxed);
    t.rcv_bytes += q.counters.port_rcv_bytes.load(std::memory_order_relaxed);
    // A live QP's share is its SL's (shm::SharedQp::sl).
    const unsigned sl = q.sl.load(std::memory_order_relaxed) & 15;
    t.xmit_words_sl[sl] += shm::sl_words(q.counters.port_xmit_bytes.load(std::memory_order_relaxed),
                                         q.counters.port_xmit_packets.load(std::memory_order_relaxed));
    t.rcv_words_sl[sl] += shm::sl_words(q.counters.port_rcv_bytes.load(std::memory_order_relaxed),
                                        q.counters.port_rcv_packets.load(std::memory_order_relaxed));
    t.rcv_packets_sl[sl] += q.counters.port_rcv_packets.load(std::memory_order_relaxed);
    t.xmit_packets_sl[sl] += q.counters.port_xmit_packets.load(std::memory_order_relaxed);
  }
  PmaCounters c;
  c.v[kSymbolErrors] = t.symbol_errors;
  c.v[kRcvErrors] = t.rcv_errors;
  c.v[kXmitDiscards] = t.xmit_discards;
  c.v[kLocalPhysicalErrors] = t.icrc_errors;
  c.v[kMalformedPktErrors] = t.malformed;
  c.v[kInactiveDiscards] = t.inactive_discards;
  // The host link counts payload; the UDP link counts whole datagrams (BTH
  // to ICRC) on transmit and payload on receipt (src/fabric/udp).
  const bool roce = verbs::port_config().roce;
  const uint64_t xmit_overhead = roce ? 0 : kIbOverheadBytes;
  const uint64_t rcv_overhead = roce ? kRoceOverheadBytes : kIbOverheadBytes;
  c.v[kXmitData] = (t.xmit_bytes + t.xmit_packets * xmit_overhead) / 4;
  c.v[kRcvData] = (t.rcv_bytes + t.rcv_packets * rcv_overhead) / 4;
  for (unsigned sl = 0; sl < 16; ++sl) {
    c.v[kXmitDataSl0 + sl] = t.xmit_words_sl[sl];
    c.v[kRcvDataSl0 + sl] = t.rcv_words_sl[sl];
    // PortVLOpPackets/PortVLOpData: each SL's share under the VL the port's
    // SL2VL table maps it to now (a table changed mid-run moves what was
    // counted before; docs/DESIGN.md). VL15 carries no data: an SL mapped
    // there is discarded before it leaves.
    const uint8_t vl = shm::vl_of_sl(seg.header(), static_cast<uint8_t>(sl));
    if (vl >= shm::kVl15) continue;
    c.v[kRcvPktsVl0 + vl] +=
        shm::op_applied(select, OpSelector::kVlOpPackets) ? t.vl_op_packets_sl[sl] : t.rcv_packets_sl[sl];
    c.v[kRcvDataVl0 + vl] +=
        shm::op_applied(select, OpSelector::kVlOpData) ? t.vl_op_words_sl[sl] : t.rcv_words_sl[sl];
    // The port chooses the VL its packets leave on by the same table.
    c.v[kXmitPktsVl0 + vl] += t.xmit_packets_sl[sl];
    c.v[kXmitDataVl0 + vl] += t.xmit_words_sl[sl];
  }
  c.v[kVl15Dropped] = seg.header().vl15.dropped.load(std::memory_order_relaxed);
  // The paced link's lanes (transport/link_pacing.h); without pacing no VL
  // ever waits for another.
  for (unsigned vl = 0; vl < 16; ++vl)
    c.v[kXmitWaitVl0 + vl] = seg.header().link.lane[vl].xmit_wait_ns.load(std::memory_order_relaxed) / kXmitWaitTickNs;
  c.v[kXmitPkts] = t.xmit_packets;
  c.v[kRcvPkts] = t.rcv_packets;
  const bool op_rcv = shm::op_applied(select, OpSelector::kOpRcv);
  c.v[kOpRcvPkts] = op_rcv ? t.op_rcv_packets : c.v[kRcvPkts];
  c.v[kOpRcvData] = op_rcv ? t.op_rcv_words : c.v[kRcvData];
  return c;
}

PmaCounters since_reset(const PmaCounters& raw, const std::string& baseline) {
  PmaCounters c = raw;
  const int fd = open(baseline.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return c;
  flock(fd, LOCK_SH);
  const PmaCounters base = read_baseline(fd);
  close(fd);
  for (unsigned i = 0; i < kPmaCounterCount; ++i) c.v[i] -= std::min(c.v[i], base.v[i]);
  return c;
}

void reset_counters(const std::string& baseline, const PmaCounters& raw, const PmaMask& mask) {
  if (mask.none()) return;
  const int fd = open(baseline.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  flock(fd, LOCK_EX);
  PmaCounters base = read_baseline(fd);
  for (unsigned i = 0; i < kPmaCounterCount; ++i)
    if (mask.test(i)) base.v[i] = raw.v[i];
  (void)!pwrite(fd, base.v, sizeof base.v, 0);
  close(fd);
}

std::string pma_baseline(const shm::Segment& seg) { return seg.path() + ".pma"; }

PmaCounters pma_counters(const shm::Segment& seg) { return since_reset(raw_pma_counters(seg), pma_baseline(seg)); }

void reset_pma_counters(const shm::Segment& seg, const PmaCounters& raw, const PmaMask& mask) {
  reset_counters(pma_baseline(seg), raw, mask);
}

PmaCounters mirror_pma_counters(const PmaCounters& local) {
  PmaCounters m;
  m.v[kXmitData] = local.v[kRcvData];
  m.v[kRcvData] = local.v[kXmitData];
  m.v[kXmitPkts] = local.v[kRcvPkts];
  m.v[kRcvPkts] = local.v[kXmitPkts];
  m.v[kMcastXmitPkts] = local.v[kMcastRcvPkts];
  m.v[kMcastRcvPkts] = local.v[kMcastXmitPkts];
  for (unsigned sl = 0; sl < 16; ++sl) {
    m.v[kXmitDataSl0 + sl] = local.v[kRcvDataSl0 + sl];
    m.v[kRcvDataSl0 + sl] = local.v[kXmitDataSl0 + sl];
  }
  // What the device's port sent, every opcode (the device's OpCode
  // selectors count what it received), on the VLs its SL2VL table chose (a
  // sender picks the VL of the link).
  m.v[kOpRcvPkts] = local.v[kXmitPkts];
  m.v[kOpRcvData] = local.v[kXmitData];
  for (unsigned vl = 0; vl < 16; ++vl) {
    m.v[kRcvPktsVl0 + vl] = local.v[kXmitPktsVl0 + vl];
    m.v[kRcvDataVl0 + vl] = local.v[kXmitDataVl0 + vl];
    m.v[kXmitPktsVl0 + vl] = local.v[kRcvPktsVl0 + vl];
    m.v[kXmitDataVl0 + vl] = local.v[kRcvDataVl0 + vl];
  }
  return m;
}

}  // namespace softverbs::mad
