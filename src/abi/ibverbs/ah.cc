// Address handles.
#include <cstring>
#include <new>

#include "abi/ibverbs/abi.h"
#include "verbs/ah.h"

using softverbs::abi::fail;
using softverbs::verbs::Ah;
using softverbs::verbs::Pd;

SV_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (pd == nullptr || attr == nullptr) return fail<ibv_ah>(EINVAL);
  if (attr->port_num != 1 || (attr->is_global && attr->grh.sgid_index != 0) || (!attr->is_global && attr->dlid == 0))
    return fail<ibv_ah>(EINVAL);
  auto* ah = new (std::nothrow) Ah();
  if (ah == nullptr) return fail<ibv_ah>(ENOMEM);
  ah->pd = Pd::from(pd);
  ah->attr = *attr;
  ah->ibv.context = pd->context;
  ah->ibv.pd = pd;
  ah->pd->users.fetch_add(1);
  return &ah->ibv;
}

SV_EXPORT int ibv_destroy_ah(ibv_ah* ibv) {
  if (ibv == nullptr) return EINVAL;
  Ah* ah = Ah::from(ibv);
  ah->pd->users.fetch_sub(1);
  delete ah;
  return 0;
}

// IBA 17.2.4.3 / ibv_init_ah_from_wc(3): an address vector that answers the
// sender of a received UD message, from its completion and GRH.
SV_EXPORT int ibv_init_ah_from_wc(ibv_context* ctx, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                  ibv_ah_attr* ah_attr) {
  if (ctx == nullptr || wc == nullptr || ah_attr == nullptr) return EINVAL;
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (wc->wc_flags & IBV_WC_GRH) {
    if (grh == nullptr) return EINVAL;
    ah_attr->is_global = 1;
    ah_attr->grh.dgid = grh->sgid;
    const uint32_t flow = be32toh(grh->version_tclass_flow);
    ah_attr->grh.flow_label = flow & 0xfffff;
    ah_attr->grh.traffic_class = static_cast<uint8_t>((flow >> 20) & 0xff);
    ah_attr->grh.hop_limit = 0xff;
    ah_attr->grh.sgid_index = 0;
  }
  return 0;
}

SV_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (pd == nullptr) return fail<ibv_ah>(EINVAL);
  ibv_ah_attr attr;
  int rc = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr);
  if (rc != 0) return fail<ibv_ah>(rc);
  return ibv_create_ah(pd, &attr);
}
