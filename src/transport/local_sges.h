// A send WQE's local buffers, resolved into this process's addresses.
#pragma once

#include <infiniband/verbs.h>
#include <sys/uio.h>

#include "shm/limits.h"
#include "transport/iov.h"
#include "transport/mem_ops.h"
#include "transport/send_side.h"
#include "util/fault_in.h"

namespace softverbs::transport {

// IBA 10.6.3.1: L_Key, PD and access are checked at use. `iov` has room for
// shm::kMaxSge entries. Returns the local completion status.
[[gnu::always_inline]] inline ibv_wc_status resolve_local_sges(const SendSide& s, SendWqe& w, bool writes_local, iovec* iov, IoList* out) {
  if (w.inline_len > 0 || (w.send_flags & IBV_SEND_INLINE)) {
    iov[0] = {w.inline_data(), w.inline_len};
    *out = {iov, 1, w.inline_len};
    return IBV_WC_SUCCESS;
  }
  uint64_t total = 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    const shm::Sge& sge = w.sge[i];
    if (sge.length == 0) continue;
    MrRef ref;
    if (check_key(*s.qp.seg, sge.lkey, false, s.qp.self, s.qp.pd_id, 0, sge.addr, sge.length,
                  writes_local ? IBV_ACCESS_LOCAL_WRITE : 0, &ref) != KeyCheck::kOk) {
      s.qp.notifier->port_counters().local_access_errors.fetch_add(1, std::memory_order_relaxed);
      return IBV_WC_LOC_PROT_ERR;
    }
    // ODP: the page fault happens here, before anything is sent or placed.
    if (on_demand(*ref.mr) && !util::fault_in(ref.va, sge.length, writes_local)) [[unlikely]] {
      s.qp.notifier->port_counters().local_access_errors.fetch_add(1, std::memory_order_relaxed);
      return IBV_WC_LOC_PROT_ERR;
    }
    iov[n++] = {reinterpret_cast<void*>(ref.va), sge.length};
    total += sge.length;
  }
  *out = {iov, n, total};
  // A message longer than the port's max_msg_sz is a local length error.
  return total > shm::kMaxMsgSize ? IBV_WC_LOC_LEN_ERR : IBV_WC_SUCCESS;
}

}  // namespace softverbs::transport
