// DISCONNECTED held back until the application has polled what its QP had
// already completed when the peer's DREQ came.
//
// Why: a consumer that tears a connection down on DISCONNECTED destroys its
// QP, and ibv_destroy_qp takes the QP's unpolled completions out of its CQs
// as an HCA does (verbs::Cq::purge_qp). Debian's libfabric 1.17 (ofi_rxm)
// reads its CM events before it polls its CQ in the same progress call, so
// when the peer sends its last message and disconnects while the receiver
// is off the CPU, the receiver saw DISCONNECTED first and lost that message
// (the `fi_pingpong -e rdm` server then waited forever). When an event is
// delivered is the CM's to choose; delivering it once the completions that
// came before it are polled keeps the order the peer caused.
//
// What is held: only DISCONNECTED caused by the peer (its DREQ, or its
// process gone), only for an id whose QP the library knows (id->qp), only
// while a CQ of that QP holds entries produced before the DREQ that the
// application has not taken, and at most kHoldLimitNs. rdma_disconnect,
// rdma_destroy_qp and the time-wait's end release it at once.
//
// The CQs' producer and consumer counts come from verbs/cq_counts.h, the one
// header of verbs/ the CM may include.
#pragma once

#include <cstdint>

#include "cm/id.h"

namespace softverbs::cm {

inline constexpr uint64_t kHoldLimitNs = 500'000'000;
// How often the agent thread looks again while something is held.
inline constexpr int kHoldCheckMs = 1;

// At the peer's DREQ, before the QP is moved to Error (whose flushed
// receives need no polling): notes what the QP's CQs hold. True when
// something is unpolled, so that DISCONNECTED is to be held.
bool hold_disconnect(CmId* id, uint64_t now);
// Whether the held DISCONNECTED may go now: the noted entries were taken,
// the QP is gone, or the limit passed.
bool hold_over(const CmId* id, uint64_t now);

}  // namespace softverbs::cm
