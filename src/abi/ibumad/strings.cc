// Names for classes, methods, attributes and statuses (umad_str.h), the
// dump helpers and the debug level.
#include <infiniband/umad_cm.h>
#include <infiniband/umad_sa.h>
#include <infiniband/umad_sm.h>
#include <infiniband/umad_str.h>
#include <infiniband/umad_types.h>

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

// The names rdma-core's libibumad gives (Debian 12's, checked entry by entry
// by tests/umad/umad_strings.sh), keyed by the constants of its
// headers. Classes without a name of their own are named by range.
constexpr Name kClasses[] = {
    {UMAD_CLASS_SUBN_LID_ROUTED, "Subn"}, {UMAD_CLASS_SUBN_DIRECTED_ROUTE, "Subn"},
    {UMAD_CLASS_SUBN_ADM, "SubnAdm"},     {UMAD_CLASS_PERF_MGMT, "Perf"},
    {UMAD_CLASS_BM, "BM"},                {UMAD_CLASS_DEVICE_MGMT, "DevMgt"},
    {UMAD_CLASS_CM, "ComMgt"},            {UMAD_CLASS_SNMP, "SNMP"},
    {UMAD_CLASS_DEVICE_ADM, "DevAdm"},    {UMAD_CLASS_BOOT_MGMT, "BootMgt"},
    {UMAD_CLASS_BIS, "BIS"},              {UMAD_CLASS_CONG_MGMT, "CongestionManagment"}};

constexpr Name kMethods[] = {{UMAD_METHOD_GET, "Get"},           {UMAD_METHOD_SET, "Set"},
                             {UMAD_METHOD_GET_RESP, "GetResp"},  {UMAD_METHOD_SEND, "Send"},
                             {UMAD_METHOD_TRAP, "Trap"},         {UMAD_METHOD_REPORT, "Report"},
                             {UMAD_METHOD_REPORT_RESP, "ReportResp"}, {UMAD_METHOD_TRAP_REPRESS, "TrapRepress"}};

constexpr Name kSaMethods[] = {{UMAD_SA_METHOD_GET_TABLE, "GetTable"},
                               {UMAD_SA_METHOD_GET_TABLE_RESP, "GetTableResp"},
                               {UMAD_SA_METHOD_DELETE, "Delete"},
                               {UMAD_SA_METHOD_DELETE_RESP, "DeleteResp"},
                               {UMAD_SA_METHOD_GET_MULTI, "GetMulti"},
                               {UMAD_SA_METHOD_GET_MULTI_RESP, "GetMultiResp"},
                               {UMAD_SA_METHOD_GET_TRACE_TABLE, "GetTraceTable"}};

// Every class: the attributes of MADs in general.
constexpr Name kCommonAttrs[] = {{UMAD_ATTR_CLASS_PORT_INFO, "Class Port Info"},
                                 {UMAD_ATTR_NOTICE, "Notice"},
                                 {UMAD_ATTR_INFORM_INFO, "Inform Info"}};

constexpr Name kSmAttrs[] = {{UMAD_SM_ATTR_NODE_DESC, "NodeDescription"},
                             {UMAD_SM_ATTR_NODE_INFO, "NodeInfo"},
                             {UMAD_SM_ATTR_SWITCH_INFO, "SwitchInfo"},
                             {UMAD_SM_ATTR_GUID_INFO, "GUIDInfo"},
                             {UMAD_SM_ATTR_PORT_INFO, "PortInfo"},
                             {UMAD_SM_ATTR_PKEY_TABLE, "P_KeyTable"},
                             {UMAD_SM_ATTR_SLVL_TABLE, "SLtoVLMappingTable"},
                             {UMAD_SM_ATTR_VL_ARB_TABLE, "VLArbitrationTable"},
                             {UMAD_SM_ATTR_LINEAR_FT, "LinearForwardingTable"},
                             {UMAD_SM_ATTR_RANDOM_FT, "RandomForwardingTable"},
                             {UMAD_SM_ATTR_MCAST_FT, "MulticastForwardingTable"},
                             {UMAD_SM_ATTR_SM_INFO, "SMInfo"},
                             {UMAD_SM_ATTR_VENDOR_DIAG, "VendorDiag"},
                             {UMAD_SM_ATTR_LED_INFO, "LedInfo"},
                             {UMAD_SM_ATTR_LINK_SPD_WIDTH_TABLE, "LinkSpeedWidthPairsTable"},
                             {UMAD_SM_ATTR_VENDOR_MADS_TABLE, "VendorSpecificMadsTable"},
                             {UMAD_SM_ATTR_HIERARCHY_INFO, "HierarchyInfo"},
                             {UMAD_SM_ATTR_CABLE_INFO, "CableInfo"},
                             {UMAD_SM_ATTR_PORT_INFO_EXT, "PortInfoExtended"}};

constexpr Name kSaAttrs[] = {{UMAD_SA_ATTR_NODE_REC, "NodeRecord"},
                             {UMAD_SA_ATTR_PORT_INFO_REC, "PortInfoRecord"},
                             {UMAD_SA_ATTR_SLVL_REC, "SLtoVLMappingTableRecord"},
                             {UMAD_SA_ATTR_SWITCH_INFO_REC, "SwitchInfoRecord"},
                             {UMAD_SA_ATTR_LINEAR_FT_REC, "LinearForwardingTableRecord"},
                             {UMAD_SA_ATTR_RANDOM_FT_REC, "RandomForwardingTableRecord"},
                             {UMAD_SA_ATTR_MCAST_FT_REC, "MulticastForwardingTableRecord"},
                             {UMAD_SA_ATTR_SM_INFO_REC, "SMInfoRecord"},
                             {UMAD_SA_ATTR_INFORM_INFO_REC, "InformInfoRecord"},
                             {UMAD_SA_ATTR_LINK_REC, "LinkRecord"},
                             {UMAD_SA_ATTR_GUID_INFO_REC, "GuidInfoRecord"},
                             {UMAD_SA_ATTR_SERVICE_REC, "ServiceRecord"},
                             {UMAD_SA_ATTR_PKEY_TABLE_REC, "P_KeyTableRecord"},
                             {UMAD_SA_ATTR_PATH_REC, "PathRecord"},
                             {UMAD_SA_ATTR_VL_ARB_REC, "VLArbitrationTableRecord"},
                             {UMAD_SA_ATTR_MCMEMBER_REC, "MCMemberRecord"},
                             {UMAD_SA_ATTR_TRACE_REC, "TraceRecord"},
                             {UMAD_SA_ATTR_MULTI_PATH_REC, "MultiPathRecord"},
                             {UMAD_SA_ATTR_SERVICE_ASSOC_REC, "ServiceAssociationRecord"},
                             {UMAD_SA_ATTR_LINK_SPD_WIDTH_TABLE_REC, "LinkSpeedWidthPairsTableRecord"},
                             {UMAD_SA_ATTR_HIERARCHY_INFO_REC, "HierarchyInfoRecord"},
                             {UMAD_SA_ATTR_CABLE_INFO_REC, "CableInfoRecord"},
                             {UMAD_SA_ATTR_PORT_INFO_EXT_REC, "PortInfoExtendedRecord"}};

constexpr Name kCmAttrs[] = {{UMAD_CM_ATTR_REQ, "ConnectRequest"},       {UMAD_CM_ATTR_MRA, "MsgRcptAck"},
                             {UMAD_CM_ATTR_REJ, "ConnectReject"},        {UMAD_CM_ATTR_REP, "ConnectReply"},
                             {UMAD_CM_ATTR_RTU, "ReadyToUse"},           {UMAD_CM_ATTR_DREQ, "DisconnectRequest"},
                             {UMAD_CM_ATTR_DREP, "DisconnectReply"},     {UMAD_CM_ATTR_SIDR_REQ, "ServiceIDResReq"},
                             {UMAD_CM_ATTR_SIDR_REP, "ServiceIDResReqResp"}, {UMAD_CM_ATTR_LAP, "LoadAlternatePath"},
                             {UMAD_CM_ATTR_APR, "AlternatePathResponse"}, {UMAD_CM_ATTR_SAP, "SuggestAlternatePath"},
                             {UMAD_CM_ATTR_SPR, "SuggestPathResponse"}};

constexpr Name kSaStatuses[] = {{UMAD_SA_STATUS_SUCCESS, "Success"},
                                {UMAD_SA_STATUS_NO_RESOURCES, "No Resources"},
                                {UMAD_SA_STATUS_REQ_INVALID, "Request Invalid"},
                                {UMAD_SA_STATUS_NO_RECORDS, "No Records"},
                                {UMAD_SA_STATUS_TOO_MANY_RECORDS, "Too Many Records"},
                                {UMAD_SA_STATUS_INVALID_GID, "Invalid GID"},
                                {UMAD_SA_STATUS_INSUF_COMPS, "Insufficient Components"},
                                {UMAD_SA_STATUS_REQ_DENIED, "Request Denied"},
                                {UMAD_SA_STATUS_PRI_SUGGESTED, "Priority Suggested"}};

}  // namespace

int debug_level() { return g_debug; }
void set_debug_level(int level) { g_debug = level; }

}  // namespace softverbs::umad

using namespace softverbs::umad;

SV_UMAD_EXPORT const char* umad_class_str(uint8_t mgmt_class) {
  if (const char* name = lookup(kClasses, mgmt_class, nullptr)) return name;
  if ((mgmt_class >= UMAD_CLASS_VENDOR_RANGE1_START && mgmt_class <= UMAD_CLASS_VENDOR_RANGE1_END) ||
      (mgmt_class >= UMAD_CLASS_VENDOR_RANGE2_START && mgmt_class <= UMAD_CLASS_VENDOR_RANGE2_END))
    return "Vendor";
  if (mgmt_class >= UMAD_CLASS_APPLICATION_START && mgmt_class <= UMAD_CLASS_APPLICATION_END) return "Application";
  return "<unknown>";
}

SV_UMAD_EXPORT const char* umad_method_str(uint8_t mgmt_class, uint8_t method) {
  if (mgmt_class == UMAD_CLASS_SUBN_ADM) {
    if (const char* name = lookup(kSaMethods, method, nullptr)) return name;
  }
  return lookup(kMethods, method, "<unknown");  // sic: rdma-core's text, unclosed
}

SV_UMAD_EXPORT const char* umad_attribute_str(uint8_t mgmt_class, __be16 attr_id) {
  const unsigned id = be16toh(attr_id);
  const char* name = nullptr;
  switch (mgmt_class) {
    case UMAD_CLASS_SUBN_LID_ROUTED:
    case UMAD_CLASS_SUBN_DIRECTED_ROUTE: name = lookup(kSmAttrs, id, nullptr); break;
    case UMAD_CLASS_SUBN_ADM: name = lookup(kSaAttrs, id, nullptr); break;
    case UMAD_CLASS_CM: name = lookup(kCmAttrs, id, nullptr); break;
    default: break;
  }
  return name != nullptr ? name : lookup(kCommonAttrs, id, "<unknown>");
}

SV_UMAD_EXPORT const char* umad_common_mad_status_str(__be16 status) {
  const unsigned s = be16toh(status);
  if (s & UMAD_STATUS_BUSY) return "Busy";
  if (s & UMAD_STATUS_REDIRECT) return "Redirection required";
  switch (s & UMAD_STATUS_INVALID_FIELD_MASK) {
    case UMAD_STATUS_BAD_VERSION: return "Bad Version";
    case UMAD_STATUS_METHOD_NOT_SUPPORTED: return "Method not supported";
    case UMAD_STATUS_ATTR_NOT_SUPPORTED: return "Method/Attribute combo not supported";
    case UMAD_STATUS_INVALID_ATTR_VALUE: return "Invalid attribute/modifier field";
    default: return "Success";
  }
}

SV_UMAD_EXPORT const char* umad_sa_mad_status_str(__be16 status) {
  return lookup(kSaStatuses, (be16toh(status) & UMAD_STATUS_CLASS_MASK) >> 8, "Undefined Error");
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
