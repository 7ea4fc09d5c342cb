// The loop of ibv_post_recv and ibv_post_srq_recv: a list of receive WRs
// into an owned receive queue (shm/rings.h), the caller holding its post lock.
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>

#include "shm/objects.h"
#include "shm/rings.h"

namespace softverbs::verbs {

// The WQE takes the caller's SGEs as they are: no copy through a local array.
static_assert(sizeof(ibv_sge) == sizeof(shm::Sge) && offsetof(ibv_sge, addr) == offsetof(shm::Sge, addr) &&
              offsetof(ibv_sge, length) == offsetof(shm::Sge, length) &&
              offsetof(ibv_sge, lkey) == offsetof(shm::Sge, lkey));

// Posts from *wr on; returns 0, or EINVAL / ENOMEM with *wr left at the
// first WR not posted (ibv_post_recv(3)'s bad_wr). The room left is looked
// up once per list, not per WR: consumers find each entry by its own seq,
// so only the free-slot check is shared.
[[gnu::always_inline]] inline int post_recv_list(const shm::Segment& seg, shm::RecvQueue& rq, ibv_recv_wr** wr) {
  const uint32_t max_sge = rq.max_sge;
  uint64_t tail = rq.tail.load(std::memory_order_relaxed);
  uint64_t room = 0;
  int rc = 0;
  ibv_recv_wr* w = *wr;
  for (; w != nullptr; w = w->next) {
    if (w->num_sge < 0 || static_cast<uint32_t>(w->num_sge) > max_sge || (w->num_sge > 0 && w->sg_list == nullptr)) {
      rc = EINVAL;
      break;
    }
    if (room == 0 && (room = shm::rq_room(rq, tail)) == 0) {
      rc = ENOMEM;
      break;
    }
    shm::rq_write(seg, rq, tail, w->wr_id, w->sg_list, static_cast<uint32_t>(w->num_sge));
    ++tail;
    --room;
  }
  *wr = w;
  return rc;
}

}  // namespace softverbs::verbs
