// Address handles.
#include <algorithm>
#include <cstring>
#include <new>

#include "abi/ibverbs/abi.h"
#include "verbs/ah.h"
#include "verbs/port_config.h"

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
    ah_attr->grh.hop_limit = 0xff;
    const uint32_t flow = be32toh(grh->version_tclass_flow);
    const auto* ipv4 = reinterpret_cast<const uint8_t*>(grh) + 20;
    if (flow >> 28 == 6) {  // an IB GRH, or RoCEv2 over IPv6: the same 40 bytes
      ah_attr->grh.dgid = grh->sgid;
      ah_attr->grh.flow_label = flow & 0xfffff;
      ah_attr->grh.traffic_class = static_cast<uint8_t>((flow >> 20) & 0xff);
      ah_attr->grh.sgid_index = static_cast<uint8_t>(std::max(0, softverbs::verbs::local_gid_index(grh->dgid.raw)));
    } else if (ipv4[0] >> 4 == 4) {
      // RoCEv2 over IPv4: the IPv4 header in the last 20 bytes (annex
      // A17.4.5.1); its addresses are the IPv4-mapped GIDs.
      uint8_t source[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
      uint8_t dest[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
      std::memcpy(source + 12, ipv4 + 12, 4);
      std::memcpy(dest + 12, ipv4 + 16, 4);
      std::memcpy(ah_attr->grh.dgid.raw, source, 16);
      ah_attr->grh.traffic_class = ipv4[1];
      ah_attr->grh.sgid_index = static_cast<uint8_t>(std::max(0, softverbs::verbs::local_gid_index(dest)));
    } else {
      return EINVAL;  // neither a GRH nor an IP header
    }
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
