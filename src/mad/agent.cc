#include "mad/agent.h"

#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "mad/ca_devices.h"
#include "mad/mad_layout.h"
#include "mad/pma.h"
#include "mad/pma_counters.h"
#include "mad/qos_config_file.h"
#include "mad/port_view.h"
#include "mad/subnet_boot_qos.h"
#include "mad/subnet_pma.h"
#include "mad/subnet_sma.h"
#include "mad/vl15_buffer.h"
#include "shm/port_events.h"
#include "shm/port_qos.h"
#include "shm/qp_pkeys.h"
#include "util/log.h"
#include "util/time.h"
#include "verbs/sysfs_port.h"

namespace softverbs::mad {
namespace {

struct LoadedSubnet {
  bool failed = false;
  Topology topology;
  std::unique_ptr<shm::SubnetState> state;
  std::string state_path;
  Subnet subnet;
};

// SOFTVERBS_TOPOLOGY, read once per process; its state file sits beside the
// device segment and names the topology's digest.
const LoadedSubnet& loaded_subnet(const shm::Segment& seg) {
  static const LoadedSubnet* loaded = [&seg] {
    auto* l = new LoadedSubnet;  // lives as long as the process
    const char* path = std::getenv("SOFTVERBS_TOPOLOGY");
    if (path == nullptr || *path == '\0') return l;
    TopologyParse p = load_topology(path);
    if (!p.ok()) {
      SV_LOG(kError, "SOFTVERBS_TOPOLOGY %s: %s", path, p.error.c_str());
      l->failed = true;
      return l;
    }
    l->topology = std::move(p.topology);
    char digest[17];
    std::snprintf(digest, sizeof digest, "%016" PRIx64, topology_hash(l->topology));
    // Without an SM, the ports keep the tables the file gives them.
    const Topology& t = l->topology;
    l->state_path = seg.path() + ".subnet-" + digest;
    auto st = shm::SubnetState::open(l->state_path, [&t](shm::SubnetNode* nodes) { boot_subnet_qos(t, nodes); });
    if (!st.is_ok()) {
      l->failed = true;
      return l;
    }
    l->state = std::move(st.value());
    l->subnet.topology = &l->topology;
    l->subnet.state = l->state.get();
    return l;
  }();
  return *loaded;
}

// REQUIRES: the caller holds the segment's control lock, which also orders
// the events and the sysfs files of successive changes.
void store_effect(const shm::Segment& seg, const SmpEffect& effect) {
  if (effect.qos_changed) shm::store_qos(seg.header(), effect.qos);
  if (effect.pkeys_changed) {
    shm::store_pkeys(seg.header(), effect.pkeys);
    shm::refresh_qp_pkeys(seg, 0, effect.pkeys);
  }
  shm::SegmentHeader& h = seg.header();
  const shm::PortSnapshot was{h.lid, h.sm_lid, h.port_state.load(std::memory_order_relaxed)};
  shm::PortSnapshot now = was;
  if (effect.port_changed) {
    __atomic_store_n(&h.lid, effect.lid, __ATOMIC_RELAXED);
    __atomic_store_n(&h.sm_lid, effect.sm_lid, __ATOMIC_RELAXED);
    h.port_state.store(effect.port_state, std::memory_order_release);
    now = {effect.lid, effect.sm_lid, effect.port_state};
  }
  // As a hardware HCA: every open context hears of it (shm/port_events.h),
  // and the sysfs tree shows the port as it now is.
  uint64_t events = shm::port_change_events(was, now, effect.client_reregister);
  if (effect.pkeys_changed) events |= 1ull << IBV_EVENT_PKEY_CHANGE;
  shm::append_port_events(seg, events);
  if (effect.port_changed || effect.pkeys_changed) verbs::refresh_sysfs_port(seg);
}

// Another CA's QPs follow its table as the device's follow the device's
// (shm/qp_pkeys.h). REQUIRES: the subnet's lock and the control lock.
void refresh_ca_device_qps(const shm::Segment& seg, const std::vector<CaDevicePortState>& was,
                           const std::vector<CaDevicePortState>& now) {
  for (size_t i = 0; i < was.size() && i < now.size(); ++i) {
    if (was[i].view.pkeys == now[i].view.pkeys) continue;
    shm::note_pkeys_changed(seg.header());
    shm::refresh_qp_pkeys(seg, static_cast<uint8_t>(i + 1), now[i].view.pkeys);
  }
}

Disposition answer_in_subnet(const shm::Segment& seg, const uint8_t* in, size_t len, uint16_t dlid, uint8_t* out,
                             RaisedTraps* traps) {
  const LoadedSubnet& l = loaded_subnet(seg);
  if (l.state == nullptr) return Disposition::kDrop;  // no subnet: nothing beyond the port
  Subnet s = l.subnet;
  SmpEffect effect;
  // Lock order: the subnet's, then the segment's control lock, held across
  // read, change and store as for the device's own Sets (below).
  shm::SubnetLock lock(*l.state);
  shm::ControlLock control(seg);
  s.local = port_view(seg);
  // The other CAs' contexts hear of their ports' changes as the device's
  // hear of its own.
  const std::vector<CaDevicePortState> was = ca_device_port_states(s);
  const Disposition d = answer_subnet_smp(s, in, len, dlid, out, &effect, traps);
  store_effect(seg, effect);
  const std::vector<CaDevicePortState> now = ca_device_port_states(s);
  refresh_ca_device_qps(seg, was, now);
  append_ca_device_events(seg, was, now, reregistered_devices(s, effect.reregistered_ca_nodes));
  return d;
}

// The subnet's PMAs: the node that holds `*dlid`, or with none the device's
// own CA. The reset point of the port facing the device's lives beside the
// subnet's state, so it goes with that subnet. Counters are read and reset
// outside the subnet's lock (they take a file lock of their own).
Disposition answer_pma_in_subnet(const shm::Segment& seg, const LoadedSubnet& l, const uint8_t* in, size_t len,
                                 const uint16_t* dlid, uint8_t* out) {
  const std::string peer_baseline = l.state_path + ".pma-peer";
  const PmaCounters raw = raw_pma_counters(seg);
  const PmaCounters peer_raw = mirror_pma_counters(raw);
  const LinkPmaCounters counters{since_reset(raw, pma_baseline(seg)), since_reset(peer_raw, peer_baseline)};
  LinkPmaReset reset;
  Disposition d;
  {
    Subnet s = l.subnet;
    shm::SubnetLock lock(*l.state);
    s.local = port_view(seg);
    d = dlid != nullptr ? answer_subnet_pma(s, counters, in, len, *dlid, out, &reset)
                        : answer_local_ca_pma(s, counters, in, len, out, &reset);
  }
  reset_pma_counters(seg, raw, reset.local);
  reset_counters(peer_baseline, peer_raw, reset.peer);
  return d;
}

}  // namespace

const Subnet* loaded_subnet_of(const shm::Segment& seg) {
  const LoadedSubnet& l = loaded_subnet(seg);
  return l.state != nullptr ? &l.subnet : nullptr;
}

Disposition answer_remote_gmp(const shm::Segment& seg, const uint8_t* in, size_t len, uint16_t dlid, uint8_t* out) {
  if (in == nullptr || len < kMadBytes || MgmtClass::get(in) != static_cast<uint8_t>(MgmtClassId::kPerfMgmt))
    return Disposition::kDrop;
  const LoadedSubnet& l = loaded_subnet(seg);
  if (l.state == nullptr) return Disposition::kDrop;  // no subnet: nothing beyond the port
  return answer_pma_in_subnet(seg, l, in, len, &dlid, out);
}

void claim_boot_qos(const shm::Segment& seg) {
  shm::SegmentHeader& h = seg.header();
  const QosConfigParse* config = process_qos_config();
  const shm::QosTables* own = config != nullptr && config->ok() && config->gives_tables ? &config->tables : nullptr;
  if (h.qos.boot_claimed.load(std::memory_order_acquire) == 0) {
    // A file that cannot be used claims nothing: the process that brings a
    // good one gives the port its tables.
    const LoadedSubnet& l = loaded_subnet(seg);
    if (l.failed) return;
    uint32_t unclaimed = 0;
    if (h.qos.boot_claimed.compare_exchange_strong(unclaimed, 1, std::memory_order_acq_rel)) {
      // SOFTVERBS_QOS_CONFIG is this port's own; a topology's qos_ca_* lines
      // are every CA's.
      const shm::QosTables* t = own != nullptr ? own : l.topology.ca_qos.given ? &l.topology.ca_qos.tables : nullptr;
      if (t != nullptr) {
        shm::ControlLock lock(seg);
        shm::store_qos(h, *t);
      }
      h.qos.boot_claimed.store(2, std::memory_order_release);
      return;
    }
  }
  // Told once per process, as for SOFTVERBS_LINK (verbs/device.cc). A port
  // still being given its tables (1) is not compared.
  static std::atomic<bool> told{false};
  if (own != nullptr && h.qos.boot_claimed.load(std::memory_order_acquire) == 2 && !(shm::load_qos(h) == *own) &&
      !told.exchange(true))
    SV_LOG(kWarn, "the port's QoS tables were set by the process that created the device or by an SM: "
                  "SOFTVERBS_QOS_CONFIG ignored");
}

bool topology_failed() {
  const char* path = std::getenv("SOFTVERBS_TOPOLOGY");
  if (path == nullptr || *path == '\0') return false;
  const TopologyParse p = load_topology(path);
  if (!p.ok()) SV_LOG(kError, "SOFTVERBS_TOPOLOGY %s: %s", path, p.error.c_str());
  return !p.ok();
}

Disposition answer_mad(const shm::Segment& seg, const uint8_t* in, size_t len, uint16_t dlid, uint8_t* out,
                       RaisedTraps* traps) {
  if (in == nullptr || len < kMadBytes) return Disposition::kDrop;
  const uint8_t klass = MgmtClass::get(in);
  const bool smp = klass == static_cast<uint8_t>(MgmtClassId::kSubnLidRouted) ||
                   klass == static_cast<uint8_t>(MgmtClassId::kSubnDirectedRoute);
  // Every SMP this port takes in, a request for its SMA or an answer from
  // the subnet, passes through VL15's buffer; one that finds it full is lost.
  std::optional<Vl15Slot> vl15;
  if (smp) {
    vl15.emplace(seg.header().vl15, vl15_buffer_from_env(), now_ns());
    if (!vl15->held()) return Disposition::kDrop;
  }
  // With a topology every SMP goes through the subnet, so the device's CA
  // is the topology's (its port count) whichever way it is asked.
  if (smp && (loaded_subnet(seg).state != nullptr || leaves_port(port_view(seg), in, len, dlid)))
    return answer_in_subnet(seg, in, len, dlid, out, traps);
  switch (static_cast<MgmtClassId>(klass)) {
    case MgmtClassId::kSubnLidRouted:
    case MgmtClassId::kSubnDirectedRoute: {
      if (Method::get(in) != static_cast<uint8_t>(MethodId::kSet) || ResponseBit::get(in) != 0)
        return answer_smp(port_view(seg), in, len, out);
      // A Set reads, changes and stores the tables: one at a time, so two
      // SMs' Sets of different blocks do not undo each other.
      shm::ControlLock lock(seg);
      SmpEffect effect;
      const Disposition d = answer_smp(port_view(seg), in, len, out, &effect);
      store_effect(seg, effect);
      return d;
    }
    case MgmtClassId::kPerfMgmt: {
      // With a topology the device's CA has the topology's ports, as for the SMA.
      const LoadedSubnet& l = loaded_subnet(seg);
      if (l.state != nullptr) return answer_pma_in_subnet(seg, l, in, len, nullptr, out);
      PmaCounters raw = raw_pma_counters(seg);
      PmaMask reset;
      std::atomic<uint32_t>& op_select = seg.header().op_select;
      uint32_t select = op_select.load(std::memory_order_acquire);
      const uint32_t was = select;
      const Disposition d = answer_pma(since_reset(raw, pma_baseline(seg)), in, len, out, &reset, &select);
      if (select != was) {
        // A new OpCode changes what its counters count: their zero is what
        // they count from now on.
        op_select.store(select, std::memory_order_release);
        raw = raw_pma_counters(seg);
      }
      reset_pma_counters(seg, raw, reset);
      return d;
    }
  }
  return Disposition::kDrop;
}

}  // namespace softverbs::mad
