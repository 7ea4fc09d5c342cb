// Protection domains and memory regions.
#include <new>

#include "abi/ibverbs/abi.h"
#include "verbs/context.h"
#include "verbs/mr.h"
#include "verbs/pd.h"

using softverbs::abi::fail;
using softverbs::verbs::Context;
using softverbs::verbs::Mr;
using softverbs::verbs::Pd;

namespace softverbs::abi {

int op_advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list, uint32_t num_sge) {
  if (pd == nullptr) return EINVAL;
  return softverbs::verbs::advise_mr(Pd::from(pd), advice, flags, sg_list, num_sge).code();
}

}  // namespace softverbs::abi

SV_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  if (ctx == nullptr) return fail<ibv_pd>(EINVAL);
  auto* pd = new (std::nothrow) Pd();
  if (pd == nullptr) return fail<ibv_pd>(ENOMEM);
  pd->ctx = Context::from(ctx);
  pd->id = pd->ctx->device().new_pd_id();
  pd->ibv.context = ctx;
  pd->ibv.handle = pd->id;
  return &pd->ibv;
}

SV_EXPORT int ibv_dealloc_pd(ibv_pd* ibv) {
  if (ibv == nullptr) return EINVAL;
  Pd* pd = Pd::from(ibv);
  if (pd->users.load() != 0) return EBUSY;  // IBA 10.2.2: resources still use it
  delete pd;
  return 0;
}

SV_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (pd == nullptr) return fail<ibv_mr>(EINVAL);
  softverbs::Result<Mr*> mr = softverbs::verbs::register_mr(Pd::from(pd), addr, length, iova, access);
  if (!mr.is_ok()) return fail<ibv_mr>(mr.code());
  return &mr.value()->ibv;
}

SV_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr), static_cast<unsigned>(access));
}

SV_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

SV_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (mr == nullptr) return IBV_REREG_MR_ERR_INPUT;
  softverbs::Status s = softverbs::verbs::reregister_mr(Mr::from(mr), flags, pd != nullptr ? Pd::from(pd) : nullptr,
                                                        addr, length, static_cast<unsigned>(access));
  if (!s.is_ok()) {
    errno = s.code();
    return IBV_REREG_MR_ERR_INPUT;
  }
  return 0;
}

SV_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  if (mr == nullptr) return EINVAL;
  return softverbs::verbs::deregister_mr(Mr::from(mr)).code();
}
