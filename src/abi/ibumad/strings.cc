// Names for classes, methods, attributes and statuses (umad_str.h), the
// dump helpers and the debug level.
#include <infiniband/umad_str.h>

#include <cinttypes>
#include <cstdio>

#include "abi/ibumad/umad_abi.h"

namespace softverbs::umad {
namespace {

int g_debug = 0;

struct Name {
  unsigned id;
  const char* text;
};

template <size_t N>
const char* lookup(const Name (&table)[N], unsigned id, const char* unknown) {
  for (const Name& n : table)
    if (n.id == id) return n.text;
  return unknown;
}

constexpr Name kClasses[] = {
    {0x01, "Subn"}, {0x81, "SubnDirectedRoute"}, {0x03, "SubnAdmin"}, {0x04, "Perf"},
    {0x05, "BM"},   {0x06, "DevMgt"},           {0x07, "ComMgt"},    {0x08, "SNMP"},
    {0x09, "VendorRange1"}, {0x21, "CongestionManagment"}, {0x10, "Application"}};

constexpr Name kMethods[] = {{0x01, "Get"},        {0x02, "Set"},          {0x81, "GetResp"},
                             {0x03, "Send"},       {0x05, "Trap"},         {0x06, "Report"},
                             {0x86, "ReportResp"}, {0x07, "TrapRepress"},  {0x12, "GetTable"},
                             {0x92, "GetTableResp"}, {0x13, "GetTraceTable"}, {0x14, "GetMulti"},
                             {0x94, "GetMultiResp"}, {0x15, "Delete"},     {0x95, "DeleteResp"}};

constexpr Name kSmAttrs[] = {{0x0002, "Notice"},         {0x0010, "NodeDescription"},
                             {0x0011, "NodeInfo"},       {0x0012, "SwitchInfo"},
                             {0x0014, "GUIDInfo"},       {0x0015, "PortInfo"},
                             {0x0016, "P_KeyTable"},     {0x0017, "SLtoVLMappingTable"},
                             {0x0018, "VLArbitrationTable"}, {0x0019, "LinearForwardingTable"},
                             {0x001A, "RandomForwardingTable"}, {0x001B, "MulticastForwardingTable"},
                             {0x0020, "SMInfo"},         {0x0030, "VendorDiag"},
                             {0x0031, "LedInfo"},        {0x0001, "ClassPortInfo"}};

constexpr Name kPerfAttrs[] = {{0x0001, "ClassPortInfo"},   {0x0010, "PortSamplesControl"},
                               {0x0011, "PortSamplesResult"}, {0x0012, "PortCounters"},
                               {0x001D, "PortCountersExtended"}, {0x0016, "PortXmitDataSL"},
                               {0x0017, "PortRcvDataSL"}};

constexpr Name kSaAttrs[] = {{0x0001, "ClassPortInfo"}, {0x0002, "Notice"},       {0x0003, "InformInfo"},
                             {0x0011, "NodeRecord"},    {0x0012, "PortInfoRecord"}, {0x0035, "PathRecord"},
                             {0x0038, "MCMemberRecord"}, {0x0020, "LinkRecord"},   {0x0018, "SMInfoRecord"},
                             {0x00B0, "MultiPathRecord"}, {0x0031, "ServiceRecord"}};

}  // namespace

int debug_level() { return g_debug; }
void set_debug_level(int level) { g_debug = level; }

}  // namespace softverbs::umad

using namespace softverbs::umad;

SV_UMAD_EXPORT const char* umad_class_str(uint8_t mgmt_class) {
  return lookup(kClasses, mgmt_class, "<unknown>");
}

SV_UMAD_EXPORT const char* umad_method_str(uint8_t /*mgmt_class*/, uint8_t method) {
  return lookup(kMethods, method, "<unknown>");
}

SV_UMAD_EXPORT const char* umad_attribute_str(uint8_t mgmt_class, __be16 attr_id) {
  const unsigned id = be16toh(attr_id);
  switch (mgmt_class) {
    case 0x01:
    case 0x81: return lookup(kSmAttrs, id, "<unknown>");
    case 0x03: return lookup(kSaAttrs, id, "<unknown>");
    case 0x04: return lookup(kPerfAttrs, id, "<unknown>");
    default: return id == 0x0001 ? "ClassPortInfo" : "<unknown>";
  }
}

SV_UMAD_EXPORT const char* umad_common_mad_status_str(__be16 status) {
  const unsigned s = be16toh(status);
  if (s == 0) return "Success";
  if (s & 0x0001) return "Busy";
  if (s & 0x0002) return "Redirection required";
  switch (s & 0x001c) {
    case 0x0004: return "Bad version";
    case 0x0008: return "Method not supported";
    case 0x000c: return "Method/Attribute combo not supported";
    case 0x001c: return "Invalid attribute/modifier value";
  }
  return "Success";
}

SV_UMAD_EXPORT const char* umad_sa_mad_status_str(__be16 status) {
  switch ((be16toh(status) >> 8) & 0x7f) {
    case 0: return "Success";
    case 1: return "No Resources";
    case 2: return "Request Denied";
    case 3: return "No Records";
    case 4: return "Too Many Records";
    case 5: return "Invalid GID";
    case 6: return "Insufficient Components";
    case 7: return "Request Denied - Key Invalid";
  }
  return "Undefined Error";
}

SV_UMAD_EXPORT int umad_debug(int level) {
  if (level >= 0) softverbs::umad::set_debug_level(level);
  return softverbs::umad::debug_level();
}

SV_UMAD_EXPORT void umad_addr_dump(ib_mad_addr_t* addr) {
  if (addr == nullptr) return;
  std::fprintf(stderr,
               "umad_addr: qpn %" PRIu32 " qkey 0x%" PRIx32 " lid %u sl %u\n"
               "grh_present %u gid_index %u hop_limit %u traffic_class %u flow_label 0x%" PRIx32 "\n"
               "pkey_index %u\n",
               be32toh(addr->qpn), be32toh(addr->qkey), be16toh(addr->lid), addr->sl, addr->grh_present,
               addr->gid_index, addr->hop_limit, addr->traffic_class, be32toh(addr->flow_label), addr->pkey_index);
  std::fprintf(stderr, "Gid:");
  for (unsigned i = 0; i < 16; ++i) std::fprintf(stderr, "%s%02x", i % 2 == 0 && i != 0 ? ":" : "", addr->gid[i]);
  std::fprintf(stderr, "\n");
}

SV_UMAD_EXPORT void umad_dump(void* umad) {
  if (umad == nullptr) return;
  auto* m = static_cast<ib_user_mad*>(umad);
  std::fprintf(stderr, "agent id %" PRIu32 " status %" PRIu32 " timeout %" PRIu32 "\n", m->agent_id, m->status,
               m->timeout_ms);
  umad_addr_dump(&m->addr);
}
