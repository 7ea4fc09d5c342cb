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
  bool reads_remote;      // READ, atomic or ATOMIC WRITE: answered by a response, held
                          // to max_rd_atomic, and fenced WRs wait for it (IBA 10.8.3.3)
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
  // IBA 1.5: RC only; it takes a responder resource like a READ (rxe does the same).
  t[IBV_WR_ATOMIC_WRITE] = {true, true, false, false, ReqKind::kAtomicWrite, false, true, true, IBV_WC_ATOMIC_WRITE};
  return t;
}();

inline const WrOpcodeInfo* wr_opcode(uint32_t opcode) {
  if (opcode >= kWrOpcodes.size() || !kWrOpcodes[opcode].known) return nullptr;
  return &kWrOpcodes[opcode];
}

// The table's reads_remote as one shift, for the completer's loops and the
// ACK fast path: no branch for the opcodes that are not.
inline constexpr uint32_t kReadsRemoteMask = 1u << IBV_WR_RDMA_READ | 1u << IBV_WR_ATOMIC_CMP_AND_SWP |
                                             1u << IBV_WR_ATOMIC_FETCH_AND_ADD | 1u << IBV_WR_ATOMIC_WRITE;
static_assert(kWrOpcodes.size() == 16);  // every posted opcode is below 16 (checked at post)
constexpr bool reads_remote(uint32_t opcode) { return ((kReadsRemoteMask >> (opcode & 15u)) & 1u) != 0; }
static_assert([] {
  for (uint32_t op = 0; op < kWrOpcodes.size(); ++op)
    if (kWrOpcodes[op].known && kWrOpcodes[op].reads_remote != reads_remote(op)) return false;
  return true;
}());

inline bool wr_allowed(const WrOpcodeInfo& op, uint8_t qp_type) {
  switch (qp_type) {
    case IBV_QPT_RC: return op.rc;
    // IBA A14: XRC requests are RC's, but for IBA 1.5's ATOMIC WRITE (RC only).
    case IBV_QPT_XRC_SEND: return op.rc && op.kind != ReqKind::kAtomicWrite;
    case IBV_QPT_UC: return op.uc;
    case IBV_QPT_UD: return op.ud;
    default: return false;
  }
}

}  // namespace softverbs::transport
