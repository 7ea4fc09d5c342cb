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
  // Importable by whoever holds this context's cmd_fd (a full table only
  // makes this PD unimportable).
  pd->ctx->file().add_pd(pd->id);
  return &pd->ibv;
}

SV_EXPORT int ibv_dealloc_pd(ibv_pd* ibv) {
  if (ibv == nullptr) return EINVAL;
  Pd* pd = Pd::from(ibv);
  if (pd->users.load() != 0) return EBUSY;  // IBA 10.2.2: resources still use it
  if (pd->protection != nullptr) {  // a parent domain lets go of what it holds
    pd->protection->users.fetch_sub(1);
    if (pd->td != nullptr) pd->td->users.fetch_sub(1);
  } else {
    // ibv_import_pd(3): dealloc ends the PD for every context sharing it.
    pd->ctx->file().remove_pd(pd->id);
  }
  delete pd;
  return 0;
}

// ibv_import_pd(3): a PD allocated through any context sharing ctx's file.
SV_EXPORT ibv_pd* ibv_import_pd(ibv_context* ctx, uint32_t pd_handle) {
  if (ctx == nullptr) return fail<ibv_pd>(EINVAL);
  Context* c = Context::from(ctx);
  if (!c->file().has_pd(pd_handle)) return fail<ibv_pd>(EINVAL);
  auto* pd = new (std::nothrow) Pd();
  if (pd == nullptr) return fail<ibv_pd>(ENOMEM);
  pd->ctx = c;
  pd->id = pd_handle;
  pd->ibv.context = ctx;
  pd->ibv.handle = pd_handle;
  return &pd->ibv;
}

SV_EXPORT void ibv_unimport_pd(ibv_pd* ibv) {
  if (ibv == nullptr) return;
  delete Pd::from(ibv);
}

// ibv_import_mr(3): a registration of `pd`'s protection domain, by handle.
SV_EXPORT ibv_mr* ibv_import_mr(ibv_pd* ibv_pd, uint32_t mr_handle) {
  if (ibv_pd == nullptr) return fail<ibv_mr>(EINVAL);
  Pd* pd = Pd::from(ibv_pd);
  softverbs::Result<Mr*> mr = softverbs::verbs::import_mr(pd, mr_handle);
  if (!mr.is_ok()) return fail<ibv_mr>(mr.code());
  return &mr.value()->ibv;
}

SV_EXPORT void ibv_unimport_mr(ibv_mr* mr) {
  if (mr == nullptr || !Mr::from(mr)->imported) return;
  delete Mr::from(mr);
}

namespace softverbs::abi {

// ibv_alloc_parent_domain(3).
ibv_pd* op_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) {
  constexpr uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (ctx == nullptr || attr == nullptr || attr->pd == nullptr || (attr->comp_mask & ~kKnown) != 0)
    return fail<ibv_pd>(EINVAL);
  Pd* protection = Pd::from(attr->pd);
  // A parent domain of a parent domain is not a protection domain.
  if (protection->protection != nullptr || attr->pd->context != ctx) return fail<ibv_pd>(EINVAL);
  const bool allocators = (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) != 0;
  if (allocators && (attr->alloc == nullptr || attr->free == nullptr)) return fail<ibv_pd>(EINVAL);
  auto* pd = new (std::nothrow) Pd();
  if (pd == nullptr) return fail<ibv_pd>(ENOMEM);
  pd->ctx = protection->ctx;
  pd->id = protection->id;
  pd->ibv.context = ctx;
  pd->ibv.handle = protection->ibv.handle;
  pd->protection = protection;
  pd->td = attr->td != nullptr ? softverbs::verbs::Td::from(attr->td) : nullptr;
  if (allocators) {
    pd->alloc = attr->alloc;
    pd->free = attr->free;
  }
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) pd->pd_context = attr->pd_context;
  protection->users.fetch_add(1);
  if (pd->td != nullptr) pd->td->users.fetch_add(1);
  return &pd->ibv;
}

// ibv_alloc_td(3).
ibv_td* op_alloc_td(ibv_context* ctx, ibv_td_init_attr* attr) {
  if (ctx == nullptr || attr == nullptr || attr->comp_mask != 0) return fail<ibv_td>(EINVAL);
  auto* td = new (std::nothrow) softverbs::verbs::Td();
  if (td == nullptr) return fail<ibv_td>(ENOMEM);
  td->ibv.context = ctx;
  return &td->ibv;
}

int op_dealloc_td(ibv_td* ibv) {
  if (ibv == nullptr) return EINVAL;
  auto* td = softverbs::verbs::Td::from(ibv);
  if (td->users.load() != 0) return EBUSY;  // a parent domain still names it
  delete td;
  return 0;
}

}  // namespace softverbs::abi

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
  if (Mr::from(mr)->imported) {  // README: only the registering process ends a registration
    delete Mr::from(mr);
    return 0;
  }
  return softverbs::verbs::deregister_mr(Mr::from(mr)).code();
}
