#include "transport/vl_arbiter.h"

#include <algorithm>

namespace softverbs::transport {

VlWeights vl_weights(const shm::QosTables& t) {
  VlWeights w;
  const unsigned vls = shm::data_vls(t.oper_vls);
  for (const shm::VlArbEntry& e : t.high)
    if (e.vl < vls) w.high[e.vl] += e.weight;
  for (const shm::VlArbEntry& e : t.low)
    if (e.vl < vls && w.high[e.vl] == 0) w.low[e.vl] += e.weight;
  return w;
}

double arbitration_share(const shm::QosTables& t, const VlWeights& w, uint32_t active, uint8_t vl, uint32_t packet) {
  if (vl >= shm::kVls || (w.high[vl] == 0 && w.low[vl] == 0)) return 0;
  active |= 1u << vl;
  uint64_t high_sum = 0, low_sum = 0;
  for (unsigned v = 0; v < shm::kVls; ++v) {
    if ((active >> v & 1) == 0) continue;
    high_sum += w.high[v];
    low_sum += w.low[v];
  }
  double high_part = 1;  // of the link, while both lists are busy
  if (high_sum != 0 && low_sum != 0) {
    if (t.vl_high_limit == 255) {
      high_part = 1;
    } else {
      const double h = std::max<double>(t.vl_high_limit * 4096.0, packet);
      high_part = h / (h + packet);
    }
  } else if (high_sum == 0) {
    high_part = 0;
  }
  if (w.high[vl] != 0) return high_part * w.high[vl] / static_cast<double>(high_sum);
  return (1 - high_part) * w.low[vl] / static_cast<double>(low_sum);
}

}  // namespace softverbs::transport
