#include "shm/port_qos.h"

namespace softverbs::shm {

QosTables default_qos() {
  QosTables t;
  const unsigned vls = data_vls(t.oper_vls);
  for (unsigned sl = 0; sl < 16; ++sl) t.sl_to_vl[sl] = static_cast<uint8_t>(sl % vls);
  // Weight 64 x 64 bytes: one 4096-byte MTU per turn.
  for (unsigned i = 0; i < vls && i < kVlArbCap; ++i) t.low[i] = {static_cast<uint8_t>(i), 64};
  return t;
}

QosTables load_qos(const SegmentHeader& h) {
  const PortQos& q = h.qos;
  QosTables t;
  t.oper_vls = q.oper_vls.load(std::memory_order_relaxed);
  t.vl_high_limit = q.vl_high_limit.load(std::memory_order_relaxed);
  for (unsigned sl = 0; sl < 16; ++sl) t.sl_to_vl[sl] = q.sl_to_vl[sl].load(std::memory_order_relaxed);
  for (unsigned i = 0; i < kVlArbCap; ++i) {
    const uint16_t lo = q.vl_arb_low[i].load(std::memory_order_relaxed);
    const uint16_t hi = q.vl_arb_high[i].load(std::memory_order_relaxed);
    t.low[i] = {static_cast<uint8_t>(lo >> 8), static_cast<uint8_t>(lo)};
    t.high[i] = {static_cast<uint8_t>(hi >> 8), static_cast<uint8_t>(hi)};
  }
  return t;
}

void store_qos(SegmentHeader& h, const QosTables& t) {
  PortQos& q = h.qos;
  q.oper_vls.store(t.oper_vls, std::memory_order_relaxed);
  q.vl_high_limit.store(t.vl_high_limit, std::memory_order_relaxed);
  for (unsigned sl = 0; sl < 16; ++sl) q.sl_to_vl[sl].store(t.sl_to_vl[sl], std::memory_order_relaxed);
  for (unsigned i = 0; i < kVlArbCap; ++i) {
    q.vl_arb_low[i].store(static_cast<uint16_t>(t.low[i].vl << 8 | t.low[i].weight), std::memory_order_relaxed);
    q.vl_arb_high[i].store(static_cast<uint16_t>(t.high[i].vl << 8 | t.high[i].weight), std::memory_order_relaxed);
  }
  // Release: a reader that sees the new generation sees the tables it names.
  q.generation.fetch_add(1, std::memory_order_release);
}

}  // namespace softverbs::shm
