// XRC domains (ibv_open_xrcd / ibv_close_xrcd reach these through the
// context's ops table).
#include "abi/ibverbs/abi.h"
#include "verbs/context.h"
#include "verbs/xrcd.h"

using softverbs::verbs::Context;
using softverbs::verbs::Xrcd;

namespace softverbs::abi {

ibv_xrcd* op_open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr) {
  if (ctx == nullptr || attr == nullptr) return fail<ibv_xrcd>(EINVAL);
  Result<Xrcd*> x = Xrcd::open(Context::from(ctx), *attr);
  if (!x.is_ok()) return fail<ibv_xrcd>(x.code());
  return x.value()->ibv();
}

int op_close_xrcd(ibv_xrcd* xrcd) {
  if (xrcd == nullptr) return EINVAL;
  return Xrcd::from(xrcd)->close().code();
}

}  // namespace softverbs::abi
