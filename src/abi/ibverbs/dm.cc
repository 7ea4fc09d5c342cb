// Device memory: ibv_alloc_dm, ibv_free_dm, the copies verbs.h inlines
// through ibv_dm, and ibv_reg_dm_mr.
#include "abi/ibverbs/abi.h"
#include "verbs/context.h"
#include "verbs/dm.h"
#include "verbs/mr.h"
#include "verbs/pd.h"

using softverbs::verbs::Context;
using softverbs::verbs::Dm;
using softverbs::verbs::Mr;
using softverbs::verbs::Pd;

namespace softverbs::abi {
namespace {

int memcpy_to_dm(ibv_dm* dm, uint64_t offset, const void* src, size_t length) {
  if (dm == nullptr || (src == nullptr && length != 0)) return EINVAL;
  return Dm::from(dm)->copy_to(offset, src, length).code();
}

int memcpy_from_dm(void* dst, ibv_dm* dm, uint64_t offset, size_t length) {
  if (dm == nullptr || (dst == nullptr && length != 0)) return EINVAL;
  return Dm::from(dm)->copy_from(dst, offset, length).code();
}

}  // namespace

ibv_dm* op_alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr) {
  if (ctx == nullptr || attr == nullptr) return fail<ibv_dm>(EINVAL);
  Result<Dm*> dm = Dm::alloc(Context::from(ctx), *attr);
  if (!dm.is_ok()) return fail<ibv_dm>(dm.code());
  dm.value()->ibv.memcpy_to_dm = memcpy_to_dm;
  dm.value()->ibv.memcpy_from_dm = memcpy_from_dm;
  return &dm.value()->ibv;
}

int op_free_dm(ibv_dm* dm) {
  if (dm == nullptr) return EINVAL;
  return Dm::from(dm)->free().code();
}

ibv_mr* op_reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t offset, size_t length, unsigned int access) {
  if (pd == nullptr || dm == nullptr) return fail<ibv_mr>(EINVAL);
  Result<Mr*> mr = verbs::register_dm_mr(Pd::from(pd), Dm::from(dm), offset, length, access);
  if (!mr.is_ok()) return fail<ibv_mr>(mr.code());
  return &mr.value()->ibv;
}

}  // namespace softverbs::abi
