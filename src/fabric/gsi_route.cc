#include "fabric/gsi_route.h"

#include <sys/socket.h>

#include <map>
#include <memory>
#include <mutex>

#include "shm/gsi_table.h"

#include "wire/cm_mad.h"
#include "wire/cma_hdr.h"

namespace softverbs::fabric {

namespace wc = wire::cm;

namespace {

// Never destroyed: the UDP link's receive threads route datagrams to QP1
// until the process ends, after static destruction.
std::mutex& mu = *new std::mutex;
auto& tables = *new std::map<std::string, std::unique_ptr<shm::GsiTable>>;  // by segment path

shm::GsiTable* table_of(const std::string& segment_path) {
  auto& t = tables[segment_path];
  if (!t) {
    auto opened = shm::GsiTable::open(shm::GsiTable::path_for(segment_path));
    if (!opened) return nullptr;
    t = std::make_unique<shm::GsiTable>(std::move(*opened));
  }
  return t.get();
}

}  // namespace

uint32_t gsi_route(const std::string& segment_path, std::span<const uint8_t> mad) {
  if (mad.size() < wc::kMadBytes) return 0;
  const wc::MadHeader h = wc::MadHeader::decode(mad.data());
  if (h.base_version != wc::kBaseVersion || h.mgmt_class != wc::kMgmtClassCm) return 0;
  std::lock_guard<std::mutex> lock(mu);
  shm::GsiTable* t = table_of(segment_path);
  if (t == nullptr) return 0;
  const auto attr = static_cast<wc::AttrId>(h.attr_id);
  if (attr == wc::AttrId::kReq || attr == wc::AttrId::kSidrReq) {
    const uint64_t sid = attr == wc::AttrId::kReq ? wc::req_service_id(mad.data()) : wc::sidr_req_service_id(mad.data());
    // The CMA header opens the private data: 140 bytes into a REQ, 16 into a SIDR_REQ.
    const size_t private_at = wc::kMadHeaderBytes + (attr == wc::AttrId::kReq ? 140 : 16);
    const wc::CmaHeader cma = wc::CmaHeader::decode(mad.data() + private_at);
    shm::TableAddr dst;
    dst.family = cma.ip_version == 6 ? AF_INET6 : AF_INET;
    dst.bytes = cma.dst;
    const int slot = t->listener_slot(static_cast<uint16_t>(sid >> 16), static_cast<uint16_t>(sid), dst);
    const uint32_t agent = slot >= 0 ? t->agent_of_slot(slot) : 0;
    return agent != 0 ? agent : t->any_agent();
  }
  const uint32_t comm_id = attr == wc::AttrId::kSidrRep ? wire::BeField<wc::kMadHeaderBytes, 4>::get(mad.data())
                                                        : wc::remote_comm_id(mad.data());
  return t->agent_of_slot(static_cast<int>(comm_id >> 24));
}

}  // namespace softverbs::fabric
