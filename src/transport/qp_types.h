// How the engine treats each QP type. XRC (IBA Annex A14) is RC with its
// two ends split: an XRC_SEND QP requests and completes like an RC QP but
// has no receive side; an XRC_RECV QP responds like one but has no send
// side, and takes its receive WQEs from the XRC SRQ each request names.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "wire/opcode.h"

namespace softverbs::transport {

// Acknowledged, PSN-checked, with READ and atomics: RC and both XRC halves.
constexpr bool reliable_qp(uint8_t qp_type) {
  return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_XRC_SEND || qp_type == IBV_QPT_XRC_RECV;
}

constexpr bool xrc_qp(uint8_t qp_type) { return qp_type == IBV_QPT_XRC_SEND || qp_type == IBV_QPT_XRC_RECV; }

// The opcode table's transport (wire::QpTypes bit) of a QP type; 0 for none.
constexpr uint8_t wire_transport(uint8_t qp_type) {
  switch (qp_type) {
    case IBV_QPT_RC: return wire::QpTypes::kRc;
    case IBV_QPT_UC: return wire::QpTypes::kUc;
    case IBV_QPT_UD: return wire::QpTypes::kUd;
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV: return wire::QpTypes::kXrc;
    default: return 0;
  }
}

}  // namespace softverbs::transport
