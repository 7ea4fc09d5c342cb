#include "mad/agent.h"

#include "mad/mad_layout.h"
#include "mad/pma.h"
#include "mad/pma_counters.h"
#include "mad/port_view.h"
#include "shm/port_qos.h"

namespace softverbs::mad {

Disposition answer_mad(const shm::Segment& seg, const uint8_t* in, size_t len, uint8_t* out) {
  if (in == nullptr || len < kMadBytes) return Disposition::kDrop;
  switch (static_cast<MgmtClassId>(MgmtClass::get(in))) {
    case MgmtClassId::kSubnLidRouted:
    case MgmtClassId::kSubnDirectedRoute: {
      if (Method::get(in) != static_cast<uint8_t>(MethodId::kSet) || ResponseBit::get(in) != 0)
        return answer_smp(port_view(seg), in, len, out);
      // A Set reads, changes and stores the tables: one at a time, so two
      // SMs' Sets of different blocks do not undo each other.
      shm::ControlLock lock(seg);
      SmpEffect effect;
      const Disposition d = answer_smp(port_view(seg), in, len, out, &effect);
      if (effect.qos_changed) shm::store_qos(seg.header(), effect.qos);
      return d;
    }
    case MgmtClassId::kPerfMgmt: {
      const PmaCounters raw = raw_pma_counters(seg);
      uint64_t reset = 0;
      const Disposition d = answer_pma(pma_counters(seg), in, len, out, &reset);
      reset_pma_counters(seg, raw, reset);
      return d;
    }
  }
  return Disposition::kDrop;
}

}  // namespace softverbs::mad
