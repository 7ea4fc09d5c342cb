// The verbs work-request opcodes: one table says, per ibv_wr_opcode, which
// transports may post it, what the request is, and what completes it.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>

#include "transport/request.h"

namespace softverbs::transport {

struct WrOpcodeInfo {
  bool known;
  bool rc, uc, ud;        // transports that support it (IBA 9.4, Table 37)
  ReqKind kind;
  bool has_imm;
  bool remote;            // carries a remote address and key
  bool reads_remote;      // READ or atomic: fenced WRs wait for it (IBA 10.8.3.3)
  ibv_wc_opcode wc_opcode;
  bool local = false;     // carried out by the requester, nothing sent (bind, local invalidate)
  bool has_inv = false;   // SEND WITH INVALIDATE: the WR's invalidate_rkey travels in an IETH
};

inline constexpr std::array<WrOpcodeInfo, 16> kWrOpcodes = [] {
  std::array<WrOpcodeInfo, 16> t{};
  t[IBV_WR_RDMA_WRITE] = {true, true, true, false, ReqKind::kWrite, false, true, false, IBV_WC_RDMA_WRITE};
  t[IBV_WR_RDMA_WRITE_WITH_IMM] = {true, true, true, false, ReqKind::kWrite, true, true, false, IBV_WC_RDMA_WRITE};
  t[IBV_WR_SEND] = {true, true, true, true, ReqKind::kSend, false, false, false, IBV_WC_SEND};
  t[IBV_WR_SEND_WITH_IMM] = {true, true, true, true, ReqKind::kSend, true, false, false, IBV_WC_SEND};
  t[IBV_WR_RDMA_READ] = {true, true, false, false, ReqKind::kRead, false, true, true, IBV_WC_RDMA_READ};
  t[IBV_WR_ATOMIC_CMP_AND_SWP] = {true, true, false, false, ReqKind::kCmpSwap, false, true, true, IBV_WC_COMP_SWAP};
  t[IBV_WR_ATOMIC_FETCH_AND_ADD] = {true, true, false, false, ReqKind::kFetchAdd, false, true, true,
                                    IBV_WC_FETCH_ADD};
  // ibv_bind_mw(3): binds on UC and RC; IBA 9.2: only RC has SEND WITH INVALIDATE opcodes.
  t[IBV_WR_BIND_MW] = {true, true, true, false, ReqKind::kSend, false, false, false, IBV_WC_BIND_MW, true};
  t[IBV_WR_LOCAL_INV] = {true, true, true, false, ReqKind::kSend, false, false, false, IBV_WC_LOCAL_INV, true};
  t[IBV_WR_SEND_WITH_INV] = {true, true, false, false, ReqKind::kSend, false, false, false, IBV_WC_SEND, false, true};
  return t;
}();

inline const WrOpcodeInfo* wr_opcode(uint32_t opcode) {
  if (opcode >= kWrOpcodes.size() || !kWrOpcodes[opcode].known) return nullptr;
  return &kWrOpcodes[opcode];
}

// The table's reads_remote as one compare, for the completer's loops: READ
// and the atomics are adjacent in the ABI, and the table agrees.
constexpr bool reads_remote(uint32_t opcode) { return opcode - IBV_WR_RDMA_READ <= 2u; }
static_assert([] {
  for (uint32_t op = 0; op < kWrOpcodes.size(); ++op)
    if (kWrOpcodes[op].known && kWrOpcodes[op].reads_remote != reads_remote(op)) return false;
  return true;
}());

inline bool wr_allowed(const WrOpcodeInfo& op, uint8_t qp_type) {
  switch (qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_XRC_SEND: return op.rc;  // IBA A14: XRC requests are RC's
    case IBV_QPT_UC: return op.uc;
    case IBV_QPT_UD: return op.ud;
    default: return false;
  }
}

}  // namespace softverbs::transport
