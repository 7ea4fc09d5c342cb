// The ib_user_mad buffer: its header (status, address) before the MAD.
#include <cerrno>
#include <cstring>

#include "abi/ibumad/umad_abi.h"

namespace {
ib_user_mad* umad_of(void* p) { return static_cast<ib_user_mad*>(p); }
}  // namespace

SV_UMAD_EXPORT size_t umad_size(void) { return sizeof(ib_user_mad); }
SV_UMAD_EXPORT void* umad_get_mad(void* umad) { return umad_of(umad)->data; }
SV_UMAD_EXPORT int umad_status(void* umad) { return static_cast<int>(umad_of(umad)->status); }
SV_UMAD_EXPORT ib_mad_addr_t* umad_get_mad_addr(void* umad) { return &umad_of(umad)->addr; }

SV_UMAD_EXPORT int umad_set_addr(void* umad, int dlid, int dqp, int sl, int qkey) {
  ib_mad_addr_t& a = umad_of(umad)->addr;
  a.qpn = htobe32(static_cast<uint32_t>(dqp));
  a.lid = htobe16(static_cast<uint16_t>(dlid));
  a.qkey = htobe32(static_cast<uint32_t>(qkey));
  a.sl = static_cast<uint8_t>(sl);
  return 0;
}

SV_UMAD_EXPORT int umad_set_addr_net(void* umad, __be16 dlid, __be32 dqp, int sl, __be32 qkey) {
  ib_mad_addr_t& a = umad_of(umad)->addr;
  a.qpn = dqp;
  a.lid = dlid;
  a.qkey = qkey;
  a.sl = static_cast<uint8_t>(sl);
  return 0;
}

SV_UMAD_EXPORT int umad_set_grh(void* umad, void* mad_addr) {
  ib_mad_addr_t& a = umad_of(umad)->addr;
  const auto* src = static_cast<const ib_mad_addr_t*>(mad_addr);
  if (src == nullptr) {
    a.grh_present = 0;
    return 0;
  }
  // The caller's flow label is in host order; the buffer's in network order.
  a.grh_present = 1;
  std::memcpy(a.gid, src->gid, sizeof a.gid);
  a.flow_label = htobe32(src->flow_label);
  a.hop_limit = src->hop_limit;
  a.traffic_class = src->traffic_class;
  return 0;
}

SV_UMAD_EXPORT int umad_set_pkey(void* umad, int pkey_index) {
  umad_of(umad)->addr.pkey_index = static_cast<uint16_t>(pkey_index);
  return 0;
}

SV_UMAD_EXPORT int umad_get_pkey(void* umad) { return umad_of(umad)->addr.pkey_index; }
