// Asynchronous events.
#include "abi/ibverbs/abi.h"
#include "verbs/context.h"
#include "verbs/device.h"
#include "verbs/cq.h"
#include "verbs/qp.h"
#include "verbs/srq.h"

using softverbs::verbs::AsyncObject;
using softverbs::verbs::AsyncRecord;
using softverbs::verbs::Context;

SV_EXPORT int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event) {
  if (ctx == nullptr || event == nullptr) {
    errno = EINVAL;
    return -1;
  }
  AsyncRecord r;
  softverbs::verbs::Device& dev = Context::from(ctx)->device();
  softverbs::verbs::Qp* qp = nullptr;
  softverbs::verbs::Cq* cq = nullptr;
  softverbs::verbs::Srq* srq = nullptr;
  // QPs, CQs and SRQs are named by token: an event whose object is gone is
  // skipped, and claiming one counts it for that object's destroy.
  for (bool claimed = false; !claimed;) {
    softverbs::Status s = Context::from(ctx)->next_async(&r);
    if (!s.is_ok()) {
      errno = s.code();
      return -1;
    }
    const auto token = reinterpret_cast<uintptr_t>(r.object);
    switch (r.kind) {
      case AsyncObject::kQp: claimed = (qp = dev.claim_qp_event(token)) != nullptr; break;
      case AsyncObject::kCq: claimed = (cq = dev.claim_cq_async_event(token)) != nullptr; break;
      case AsyncObject::kSrq: claimed = (srq = dev.claim_srq_event(token)) != nullptr; break;
      default: claimed = true; break;
    }
  }
  event->event_type = static_cast<ibv_event_type>(r.type);
  switch (r.kind) {
    case AsyncObject::kQp: event->element.qp = qp->ibv(); break;
    case AsyncObject::kCq: event->element.cq = cq->ibv(); break;
    case AsyncObject::kSrq: event->element.srq = srq->ibv(); break;
    case AsyncObject::kPort: event->element.port_num = static_cast<int>(reinterpret_cast<intptr_t>(r.object)); break;
    case AsyncObject::kNone: event->element.port_num = 0; break;
  }
  return 0;
}

SV_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  if (event == nullptr) return;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: {
      ibv_cq* cq = event->element.cq;
      pthread_mutex_lock(&cq->mutex);
      ++cq->async_events_completed;
      pthread_cond_signal(&cq->cond);
      pthread_mutex_unlock(&cq->mutex);
      return;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      softverbs::verbs::Qp::from(event->element.qp)->ack_async_event();
      return;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
      ibv_srq* srq = event->element.srq;
      pthread_mutex_lock(&srq->mutex);
      ++srq->events_completed;
      pthread_cond_signal(&srq->cond);
      pthread_mutex_unlock(&srq->mutex);
      return;
    }
    default: return;  // port and device events count against nothing
  }
}
