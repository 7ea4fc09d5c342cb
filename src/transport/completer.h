// The completer: what a response means for the WQE it answers — success,
// retry (RNR, sequence error, timeout), or an error that takes the QP to ERR —
// and the completions that follow (IBA 9.7.5, 10.8.3; flush: 10.3.1).
#pragma once

#include <cstdint>

#include "fabric/fabric.h"
#include "transport/send_side.h"

namespace softverbs::transport {

// REQUIRES: side.lock held. Returns whether the requester may go on sending.
bool on_result(SendSide& side, uint64_t index, const fabric::TransmitResult& result);

// REQUIRES: side.lock held. The local ACK timeout expired with no answer:
// retransmit, or fail with RETRY_EXC_ERR once retry_cnt retries are spent.
// Returns whether the requester may go on sending.
bool on_ack_timeout(SendSide& side);

// REQUIRES: side.lock held; `index` is side.sq.done. WQE `index` succeeded:
// its completion (if signalled) and the retry counters reloaded.
void complete_success(SendSide& side, uint64_t index);

// REQUIRES: side.lock held. Completes WQE `index` in error, takes the QP to
// ERR and flushes everything after it.
void complete_in_error(SendSide& side, uint64_t index, ibv_wc_status status);

// REQUIRES: side.lock held. Every WQE not yet completed completes with
// IBV_WC_WR_FLUSH_ERR (signalled or not).
void flush_send_queue(SendSide& side);

// Owner only. Every receive WQE of the QP's own receive queue completes with
// IBV_WC_WR_FLUSH_ERR.
void flush_recv_queue(shm::Segment& seg, uint32_t qp_slot, Notifier& notifier);

}  // namespace softverbs::transport
