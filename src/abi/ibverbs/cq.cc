// Completion queues, completion channels and completion events.
#include <unistd.h>

#include "abi/ibverbs/abi.h"
#include "verbs/context.h"
#include "verbs/cq.h"

using softverbs::abi::fail;
using softverbs::verbs::CompChannel;
using softverbs::verbs::Context;
using softverbs::verbs::Cq;

namespace softverbs::abi {

int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) { return Cq::from(cq)->poll(n, wc); }

int op_req_notify_cq(ibv_cq* cq, int solicited_only) { return Cq::from(cq)->arm(solicited_only != 0); }

int op_modify_cq(ibv_cq*, ibv_modify_cq_attr* attr) {
  // Moderation changes when events fire, never which completions exist;
  // events here are immediate, so any moderation request is unsupported.
  if (attr == nullptr || attr->attr_mask == 0) return EINVAL;
  return unsupported("ibv_modify_cq");
}

ibv_cq_ex* op_create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr) {
  if (ctx == nullptr || attr == nullptr) return fail<ibv_cq_ex>(EINVAL);
  Result<Cq*> cq = Cq::create(Context::from(ctx), *attr);
  if (!cq.is_ok()) return fail<ibv_cq_ex>(cq.code());
  fill_cq_ex_ops(cq.value()->ibv_ex(), attr->wc_flags);
  return cq.value()->ibv_ex();
}

}  // namespace softverbs::abi

SV_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  if (ctx == nullptr) return fail<ibv_comp_channel>(EINVAL);
  softverbs::Result<CompChannel*> ch = CompChannel::create(Context::from(ctx));
  if (!ch.is_ok()) return fail<ibv_comp_channel>(ch.code());
  return &ch.value()->ibv;
}

SV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel == nullptr) return EINVAL;
  // rdma-core returns EBUSY (not -1) while a CQ still uses the channel.
  return CompChannel::from(channel)->destroy().code();
}

SV_EXPORT ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                                int comp_vector) {
  if (ctx == nullptr || cqe < 1 || comp_vector < 0) return fail<ibv_cq>(EINVAL);
  ibv_cq_init_attr_ex attr{};
  attr.cqe = static_cast<uint32_t>(cqe);
  attr.cq_context = cq_context;
  attr.channel = channel;
  attr.comp_vector = static_cast<uint32_t>(comp_vector);
  attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  ibv_cq_ex* cq = softverbs::abi::op_create_cq_ex(ctx, &attr);
  return cq == nullptr ? nullptr : ibv_cq_ex_to_cq(cq);
}

SV_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (cq == nullptr) return EINVAL;
  return Cq::from(cq)->resize(cqe).code();
}

SV_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  if (cq == nullptr) return EINVAL;
  return Cq::from(cq)->destroy().code();
}

SV_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) {
    errno = EINVAL;
    return -1;
  }
  Cq* got = nullptr;
  while (got == nullptr) {
    uint64_t token = 0;
    // As rdma-core's: a signal that interrupts the wait returns -1 with
    // errno EINTR (qperf ends its tests with SIGALRM and counts on it).
    const ssize_t n = ::read(channel->fd, &token, sizeof token);
    if (n != static_cast<ssize_t>(sizeof token)) {
      if (n >= 0) errno = EIO;
      return -1;
    }
    got = Context::from(channel->context)->device().claim_cq_event(token);  // nullptr: that CQ is gone
  }
  *cq = got->ibv();
  *cq_context = got->ibv()->cq_context;
  return 0;
}

SV_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (cq == nullptr) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}
