// ibv_*_str: the names libibverbs prints for its enums.
//
// The words are rdma-core 44.0's (programs and scripts match on them, so
// they are behaviour); the tables are ours. Every table is indexed by the
// enum value and checked at compile time to cover the enum exactly, so a
// value the table does not know answers "unknown", never an out-of-range read.
#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <string_view>

// Entry points leave the library; the build hides everything else.
#define SV_PUBLIC __attribute__((visibility("default")))

namespace softverbs::abi {
namespace {

constexpr const char* kUnknown = "unknown";

// A dense name table for enum values first..first+N-1.
template <size_t N>
struct NameTable {
  int first;
  std::array<const char*, N> names;

  constexpr const char* lookup(int value) const {
    if (value < first || value - first >= static_cast<int>(N)) return kUnknown;
    return names[static_cast<size_t>(value - first)];
  }
  constexpr bool complete() const {
    for (const char* n : names)
      if (n == nullptr || std::string_view(n).empty()) return false;
    return true;
  }
};

// clang-format off
constexpr NameTable<IBV_NODE_UNSPECIFIED - IBV_NODE_CA + 1> kNodeTypes{
    IBV_NODE_CA,
    {
        "InfiniBand channel adapter",  // IBV_NODE_CA
        "InfiniBand switch",           // IBV_NODE_SWITCH
        "InfiniBand router",           // IBV_NODE_ROUTER
        "iWARP NIC",                   // IBV_NODE_RNIC
        "usNIC",                       // IBV_NODE_USNIC
        "usNIC UDP",                   // IBV_NODE_USNIC_UDP
        "unspecified",                 // IBV_NODE_UNSPECIFIED
    }};
// clang-format on
static_assert(kNodeTypes.complete());
static_assert(IBV_NODE_USNIC_UDP - IBV_NODE_CA == 5);

// clang-format off
constexpr NameTable<IBV_PORT_ACTIVE_DEFER + 1> kPortStates{
    IBV_PORT_NOP,
    {
        "no state change (NOP)",  // IBV_PORT_NOP
        "down",                   // IBV_PORT_DOWN
        "init",                   // IBV_PORT_INIT
        "armed",                  // IBV_PORT_ARMED
        "active",                 // IBV_PORT_ACTIVE
        "active defer",           // IBV_PORT_ACTIVE_DEFER
    }};
// clang-format on
static_assert(kPortStates.complete());
static_assert(IBV_PORT_ACTIVE == 4);

// Debian 12's verbs.h ends enum ibv_event_type at IBV_EVENT_WQ_FATAL.
// clang-format off
constexpr NameTable<IBV_EVENT_WQ_FATAL + 1> kEventTypes{
    IBV_EVENT_CQ_ERR,
    {
        "CQ error",                                 // IBV_EVENT_CQ_ERR
        "local work queue catastrophic error",      // IBV_EVENT_QP_FATAL
        "invalid request local work queue error",   // IBV_EVENT_QP_REQ_ERR
        "local access violation work queue error",  // IBV_EVENT_QP_ACCESS_ERR
        "communication established",                // IBV_EVENT_COMM_EST
        "send queue drained",                       // IBV_EVENT_SQ_DRAINED
        "path migrated",                            // IBV_EVENT_PATH_MIG
        "path migration request error",             // IBV_EVENT_PATH_MIG_ERR
        "local catastrophic error",                 // IBV_EVENT_DEVICE_FATAL
        "port active",                              // IBV_EVENT_PORT_ACTIVE
        "port error",                               // IBV_EVENT_PORT_ERR
        "LID change",                               // IBV_EVENT_LID_CHANGE
        "P_Key change",                             // IBV_EVENT_PKEY_CHANGE
        "SM change",                                // IBV_EVENT_SM_CHANGE
        "SRQ catastrophic error",                   // IBV_EVENT_SRQ_ERR
        "SRQ limit reached",                        // IBV_EVENT_SRQ_LIMIT_REACHED
        "last WQE reached",                         // IBV_EVENT_QP_LAST_WQE_REACHED
        "client reregistration",                    // IBV_EVENT_CLIENT_REREGISTER
        "GID table change",                         // IBV_EVENT_GID_CHANGE
        "WQ fatal",                                 // IBV_EVENT_WQ_FATAL
    }};
// clang-format on
static_assert(kEventTypes.complete());
static_assert(IBV_EVENT_CQ_ERR == 0 && IBV_EVENT_SRQ_ERR == 14);

// clang-format off
constexpr NameTable<IBV_WC_TM_RNDV_INCOMPLETE + 1> kWcStatuses{
    IBV_WC_SUCCESS,
    {
        "success",                            // IBV_WC_SUCCESS
        "local length error",                 // IBV_WC_LOC_LEN_ERR
        "local QP operation error",           // IBV_WC_LOC_QP_OP_ERR
        "local EE context operation error",   // IBV_WC_LOC_EEC_OP_ERR
        "local protection error",             // IBV_WC_LOC_PROT_ERR
        "Work Request Flushed Error",         // IBV_WC_WR_FLUSH_ERR
        "memory management operation error",  // IBV_WC_MW_BIND_ERR
        "bad response error",                 // IBV_WC_BAD_RESP_ERR
        "local access error",                 // IBV_WC_LOC_ACCESS_ERR
        "remote invalid request error",       // IBV_WC_REM_INV_REQ_ERR
        "remote access error",                // IBV_WC_REM_ACCESS_ERR
        "remote operation error",             // IBV_WC_REM_OP_ERR
        "transport retry counter exceeded",   // IBV_WC_RETRY_EXC_ERR
        "RNR retry counter exceeded",         // IBV_WC_RNR_RETRY_EXC_ERR
        "local RDD violation error",          // IBV_WC_LOC_RDD_VIOL_ERR
        "remote invalid RD request",          // IBV_WC_REM_INV_RD_REQ_ERR
        "aborted error",                      // IBV_WC_REM_ABORT_ERR
        "invalid EE context number",          // IBV_WC_INV_EECN_ERR
        "invalid EE context state",           // IBV_WC_INV_EEC_STATE_ERR
        "fatal error",                        // IBV_WC_FATAL_ERR
        "response timeout error",             // IBV_WC_RESP_TIMEOUT_ERR
        "general error",                      // IBV_WC_GENERAL_ERR
        "TM error",                           // IBV_WC_TM_ERR
        "TM software rendezvous",             // IBV_WC_TM_RNDV_INCOMPLETE
    }};
// clang-format on
static_assert(kWcStatuses.complete());
static_assert(IBV_WC_RETRY_EXC_ERR == 12 && IBV_WC_GENERAL_ERR == 21);

}  // namespace
}  // namespace softverbs::abi

using softverbs::abi::kEventTypes;
using softverbs::abi::kNodeTypes;
using softverbs::abi::kPortStates;
using softverbs::abi::kWcStatuses;

extern "C" {

SV_PUBLIC const char* ibv_node_type_str(enum ibv_node_type node_type) {
  return kNodeTypes.lookup(static_cast<int>(node_type));
}

SV_PUBLIC const char* ibv_port_state_str(enum ibv_port_state port_state) {
  return kPortStates.lookup(static_cast<int>(port_state));
}

SV_PUBLIC const char* ibv_event_type_str(enum ibv_event_type event) {
  return kEventTypes.lookup(static_cast<int>(event));
}

SV_PUBLIC const char* ibv_wc_status_str(enum ibv_wc_status status) {
  return kWcStatuses.lookup(static_cast<int>(status));
}

}  // extern "C"
