// `softverbs status [--json]`: the device as its shared segment shows it —
// port, link (width x speed, pacing, what each VL carried), counters,
// attached processes, and every QP with the host-fabric path
// its requester uses.
#include "status.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "fabric/host/peer_memory.h"
#include "verbs/port_config.h"
#include "shm/port_link.h"
#include "shm/process_registry.h"
#include "shm/segment.h"

namespace {

using nlohmann::json;
namespace shm = softverbs::shm;

const char* qp_state_name(uint8_t s) {
  static const char* kNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return s < 7 ? kNames[s] : "?";
}

const char* qp_type_name(uint8_t t) {
  switch (t) {
    case IBV_QPT_RC: return "RC";
    case IBV_QPT_UC: return "UC";
    case IBV_QPT_UD: return "UD";
    case IBV_QPT_XRC_SEND: return "XRC_SEND";
    case IBV_QPT_XRC_RECV: return "XRC_RECV";
    default: return "?";
  }
}

std::string guid_str(uint64_t be) {
  const uint64_t g = __builtin_bswap64(be);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%04x:%04x:%04x", static_cast<unsigned>(g >> 48),
                static_cast<unsigned>((g >> 32) & 0xffff), static_cast<unsigned>((g >> 16) & 0xffff),
                static_cast<unsigned>(g & 0xffff));
  return buf;
}

json snapshot(shm::Segment& seg) {
  const shm::SegmentHeader& h = seg.header();
  json j;
  const softverbs::verbs::PortConfig& config = softverbs::verbs::port_config();
  j["device"] = config.device_name;
  j["segment"] = seg.path();
  j["node_guid"] = guid_str(h.node_guid);
  if (config.roce) {
    // An Ethernet port: no LIDs, a RoCE v2 GID per address.
    j["port"] = {{"number", 1},      {"state", "ACTIVE"}, {"link_layer", "Ethernet"}, {"lid", 0},
                 {"sm_lid", 0},      {"active_mtu", 128u << config.mtu},
                 {"port_guid", guid_str(h.port_guid)}, {"udp_port", config.udp_port},
                 {"gids", config.addrs}};
  } else {
    // IBA PortState: an external SM (SOFTVERBS_SM=none) moves it.
    static const char* const kStates[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE"};
    const unsigned state = h.port_state.load(std::memory_order_relaxed);
    j["port"] = {{"number", 1},
                 {"state", state < 5 ? kStates[state] : "?"},
                 {"link_layer", "InfiniBand"},
                 {"lid", h.lid},
                 {"sm_lid", h.sm_lid},
                 {"active_mtu", 4096},
                 {"port_guid", guid_str(h.port_guid)}};
  }
  // The port's link (issue 20): width x speed, pacing, what each VL's lane
  // carried while paced (4-octet words, LRH to VCRC).
  const shm::LinkConfig link = shm::load_link(h, config.link);
  json lanes = json::object();
  for (unsigned vl = 0; vl < shm::kVls; ++vl) {
    const uint64_t words = h.link.lane[vl].xmit_words.load();
    if (words != 0) lanes["VL" + std::to_string(vl)] = words;
  }
  j["link"] = {{"lanes", shm::link_lanes(link.width)},
               {"data_mbps", shm::link_data_mbps(link)},
               {"paced", link.paced},
               {"vl_xmit_words", lanes}};
  // The header keeps what dead processes counted; live ones count in their slot.
  json counters = json::object();
  auto add = [&](const shm::PortCounters& c) {
    const std::pair<const char*, const std::atomic<uint64_t>*> fields[] = {
        {"xmit_packets", &c.xmit_packets},
        {"xmit_bytes", &c.xmit_bytes},
        {"rcv_packets", &c.rcv_packets},
        {"rcv_bytes", &c.rcv_bytes},
        {"rcv_errors", &c.rcv_errors},
        {"local_access_errors", &c.local_access_errors},
        {"remote_access_errors", &c.remote_access_errors},
        {"cq_overruns", &c.cq_overruns},
        {"dropped_requests", &c.dropped_requests},
        {"icrc_errors", &c.icrc_errors},
        {"malformed_packets", &c.malformed_packets},
        {"unknown_qp_packets", &c.unknown_qp_packets},
        {"send_errors", &c.send_errors},
        {"faults_dropped", &c.faults_dropped},
        {"faults_duplicated", &c.faults_duplicated},
        {"faults_reordered", &c.faults_reordered},
        {"faults_corrupted", &c.faults_corrupted},
        {"faults_delayed", &c.faults_delayed},
        {"sl_vl15_discards", &c.sl_vl15_discards},
        {"port_state_discards", &c.port_state_discards}};
    for (const auto& [name, v] : fields) counters[name] = counters.value(name, uint64_t{0}) + v->load();
  };
  add(h.port);
  for (uint32_t i = 0; i < shm::kMaxProcesses; ++i)
    if (seg.process(i).state.load() == static_cast<uint32_t>(shm::SlotState::kLive)) add(seg.process(i).port);
  // Live QPs hold the host fabric's share until they go (shm::fold_port_share).
  for (uint32_t i = 2; i < shm::kMaxQpSlots; ++i) {
    const shm::SharedQp& q = seg.qp(i);
    if (q.slot_state.load() != static_cast<uint32_t>(shm::SlotState::kLive)) continue;
    const std::pair<const char*, const std::atomic<uint64_t>*> shares[] = {
        {"xmit_packets", &q.counters.port_xmit_packets},
        {"xmit_bytes", &q.counters.port_xmit_bytes},
        {"rcv_packets", &q.counters.port_rcv_packets},
        {"rcv_bytes", &q.counters.port_rcv_bytes}};
    for (const auto& [name, v] : shares) counters[name] = counters.value(name, uint64_t{0}) + v->load();
  }
  j["counters"] = counters;
  json procs = json::array();
  for (uint32_t i = 0; i < shm::kMaxProcesses; ++i) {
    shm::ProcessSlot& p = seg.process(i);
    if (p.state.load() != static_cast<uint32_t>(shm::SlotState::kLive)) continue;
    procs.push_back({{"slot", i}, {"pid", p.pid}, {"alive", shm::process_alive(seg, {i, p.generation})}});
  }
  j["processes"] = procs;
  json qps = json::array();
  for (uint32_t i = 2; i < shm::kMaxQpSlots; ++i) {
    shm::SharedQp& q = seg.qp(i);
    if (q.slot_state.load() != static_cast<uint32_t>(shm::SlotState::kLive)) continue;
    const shm::QpCounters& k = q.counters;
    qps.push_back({{"qpn", q.qpn},
                   {"type", qp_type_name(q.qp_type)},
                   {"state", qp_state_name(q.state.load())},
                   {"pid", seg.process(q.owner.slot).pid},
                   {"dest_qpn", q.dest_qpn},
                   {"host_path", softverbs::fabric::host::path_name(
                                     static_cast<softverbs::fabric::host::Path>(q.host_path))},
                   {"counters",
                    {{"sent_packets", k.sent_packets.load()},
                     {"received_packets", k.received_packets.load()},
                     {"sent_messages", k.sent_messages.load()},
                     {"sent_bytes", k.sent_bytes.load()},
                     {"received_messages", k.received_messages.load()},
                     {"received_bytes", k.received_bytes.load()},
                     {"rnr_naks_sent", k.rnr_naks_sent.load()},
                     {"rnr_naks_received", k.rnr_naks_received.load()},
                     {"retries", k.retries.load()},
                     {"retry_exceeded", k.retry_exceeded.load()},
                     {"rnr_retry_exceeded", k.rnr_retry_exceeded.load()},
                     {"remote_errors", k.remote_errors.load()},
                     {"duplicate_requests", k.duplicate_requests.load()},
                     {"out_of_sequence", k.out_of_sequence.load()},
                     {"sequence_naks_received", k.sequence_naks_received.load()},
                     {"ack_timeouts", k.ack_timeouts.load()},
                     {"tail_probes", k.tail_probes.load()}}}});
  }
  j["qps"] = qps;
  uint32_t cqs = 0, mrs = 0, mapped = 0, windows = 0;
  for (uint32_t i = 0; i < shm::kMaxCqs; ++i)
    cqs += seg.cq(i).slot_state.load() == static_cast<uint32_t>(shm::SlotState::kLive);
  for (uint32_t i = 0; i < shm::kFirstMwSlot; ++i)
    if (seg.mr(i).rkey.load() != 0) {
      ++mrs;
      mapped += seg.mr(i).map_fd >= 0;
    }
  for (uint32_t i = shm::kFirstMwSlot; i < shm::kMaxMrs; ++i) windows += seg.mr(i).rkey.load() != 0;
  j["cqs"] = cqs;
  j["mrs"] = {{"registered", mrs}, {"mappable", mapped}, {"bound_windows", windows}};
  return j;
}

void print_human(const json& j) {
  std::printf("%s  node_guid %s  (%s)\n", j["device"].get<std::string>().c_str(),
              j["node_guid"].get<std::string>().c_str(), j["segment"].get<std::string>().c_str());
  const json& p = j["port"];
  std::printf("  port 1: %s, %s, LID %u, MTU %u\n", p["state"].get<std::string>().c_str(),
              p["link_layer"].get<std::string>().c_str(), p["lid"].get<unsigned>(), p["active_mtu"].get<unsigned>());
  if (p.contains("gids")) {
    std::printf("  RoCE v2, UDP port %u, GIDs:", p["udp_port"].get<unsigned>());
    for (const json& g : p["gids"]) std::printf(" %s", g.get<std::string>().c_str());
    std::printf("\n");
  }
  const json& l = j["link"];
  std::printf("  link: %uX, %llu Mb/s of data, %s", l["lanes"].get<unsigned>(),
              l["data_mbps"].get<unsigned long long>(), l["paced"].get<bool>() ? "paced" : "not paced");
  for (auto& [k, v] : l["vl_xmit_words"].items()) std::printf(" %s=%llu", k.c_str(), v.get<unsigned long long>());
  std::printf("\n  counters:");
  for (auto& [k, v] : j["counters"].items()) std::printf(" %s=%llu", k.c_str(), v.get<unsigned long long>());
  std::printf("\n  processes: %zu attached\n", j["processes"].size());
  for (const json& proc : j["processes"])
    std::printf("    pid %-8d slot %-4u %s\n", proc["pid"].get<int>(), proc["slot"].get<unsigned>(),
                proc["alive"].get<bool>() ? "alive" : "dead (reclaim pending)");
  std::printf("  QPs: %zu   CQs: %u   MRs: %u (%u mappable)\n", j["qps"].size(), j["cqs"].get<unsigned>(),
              j["mrs"]["registered"].get<unsigned>(), j["mrs"]["mappable"].get<unsigned>());
  if (!j["qps"].empty())
    std::printf("    %-8s %-4s %-5s %-8s %-8s %-7s %10s %10s %6s %6s %6s %6s\n", "QPN", "type", "state", "pid", "dest",
                "path", "sent", "received", "rnr", "retry", "dup", "oos");
  for (const json& q : j["qps"]) {
    const json& k = q["counters"];
    std::printf("    %#-8x %-4s %-5s %-8d %#-8x %-7s %10llu %10llu %6llu %6llu %6llu %6llu\n", q["qpn"].get<unsigned>(),
                q["type"].get<std::string>().c_str(), q["state"].get<std::string>().c_str(), q["pid"].get<int>(),
                q["dest_qpn"].get<unsigned>(), q["host_path"].get<std::string>().c_str(),
                k["sent_messages"].get<unsigned long long>(), k["received_messages"].get<unsigned long long>(),
                k["rnr_naks_received"].get<unsigned long long>(), k["retries"].get<unsigned long long>(),
                k["duplicate_requests"].get<unsigned long long>(), k["out_of_sequence"].get<unsigned long long>());
  }
}

}  // namespace

namespace softverbs::cli {

int run_status(bool as_json) {
  const std::string path = softverbs::verbs::device_segment_path();
  const std::string name = softverbs::verbs::port_config().device_name;
  softverbs::Result<std::unique_ptr<shm::Segment>> seg = shm::Segment::open(path, /*create=*/false);
  if (!seg.is_ok()) {
    if (seg.code() == ENOENT) {
      if (as_json)
        std::printf("%s\n", json{{"device", name}, {"segment", path}, {"state", "not created"}}.dump(2).c_str());
      else
        std::printf("%s: no device state yet (%s is created by the first program that opens the device)\n",
                    name.c_str(), path.c_str());
      return 0;
    }
    std::fprintf(stderr, "softverbs status: cannot open %s: %s\n", path.c_str(), std::strerror(seg.code()));
    return 1;
  }
  // Bury processes that exited since anyone last looked (any process with the
  // segment mapped may: it is what every attached process's service thread
  // does), so an exited process is never reported as attached.
  shm::sweep(*seg.value());
  const json j = snapshot(*seg.value());
  if (as_json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    print_human(j);
  return 0;
}

}  // namespace softverbs::cli
