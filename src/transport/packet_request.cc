#include "transport/packet_request.h"

#include <endian.h>
#include <infiniband/verbs.h>

#include <algorithm>

#include "shm/mcast_groups.h"
#include "wire/cm_mad.h"

namespace softverbs::transport {
namespace {

using wire::OpFlag;

ReqKind kind_of(const wire::OpcodeInfo& info) {
  if (info.any(OpFlag::kSend)) return ReqKind::kSend;
  if (info.any(OpFlag::kWrite)) return ReqKind::kWrite;
  if (info.any(OpFlag::kRead)) return ReqKind::kRead;
  if (info.any(OpFlag::kAtomicWrite)) return ReqKind::kAtomicWrite;
  if (info.any(OpFlag::kFlush)) return ReqKind::kFlush;
  return info.any(OpFlag::kCompare) ? ReqKind::kCmpSwap : ReqKind::kFetchAdd;
}

}  // namespace

PacketVerdict request_from_packet(const wire::PacketView& v, const shm::SharedQp& qp, uint32_t mtu, iovec* iov,
                                  Request* out) {
  const wire::OpcodeInfo& info = v.info();
  // FIRST and MIDDLE packets carry exactly one path MTU, none more (IBA 9.7.4.1.5).
  const bool last = info.any(OpFlag::kLast);
  if (v.payload_length() > mtu || (!last && v.payload_length() != mtu)) return PacketVerdict::kMalformed;
  const bool ud = qp.qp_type == IBV_QPT_UD;
  if (ud && !v.has(wire::Header::kDeth)) return PacketVerdict::kMalformed;

  const wire::Bth bth = v.bth();
  *iov = {const_cast<uint8_t*>(v.payload().data()), v.payload_length()};
  Request& req = *out;
  req = Request{};
  req.kind = kind_of(info);
  req.first = info.any(OpFlag::kFirst);
  req.last = last;
  req.has_imm = info.any(OpFlag::kImmediate);
  req.solicited = bth.solicited;
  req.psn = bth.psn.value();
  req.pkey = bth.pkey;
  // IBA 10.5.2.5: a multicast datagram (DestQP 0xFFFFFF) is each attached
  // QP's own; the fabric hands it to them one by one. A datagram to QP1 is
  // the GSI agent's the fabric routed it to (src/fabric/gsi_route.h).
  req.dest_qpn = ud && (bth.dest_qp == shm::kMulticastQpn || bth.dest_qp == wire::cm::kGsiQpn) ? qp.qpn : bth.dest_qp;
  req.src_qpn = qp.dest_qpn;
  req.payload = {iov, 1, v.payload_length()};
  if (v.has(wire::Header::kReth)) {
    const wire::Reth r = v.reth();
    req.va = r.va;
    req.rkey = r.rkey;
    req.dma_length = r.dma_length;
  }
  if (v.has(wire::Header::kAtomicEth)) {
    const wire::AtomicEth a = v.atomic_eth();
    req.va = a.va;
    req.rkey = a.rkey;
    req.compare_add = req.kind == ReqKind::kCmpSwap ? a.compare : a.swap_add;
    req.swap = a.swap_add;
    req.dma_length = 8;
  }
  if (req.has_imm) req.imm = htobe32(v.immdt().value);
  if (info.any(OpFlag::kInvalidate)) {
    req.has_inv = true;
    req.inv_rkey = v.ieth().rkey;
  }
  if (req.kind == ReqKind::kRead) req.packets = std::max<uint32_t>(1, (req.dma_length + mtu - 1) / mtu);
  if (v.has(wire::Header::kXrceth)) req.xrc_srqn = v.xrceth().srqn;
  if (v.has(wire::Header::kFeth)) {
    const wire::Feth f = v.feth();
    req.flush_placement = f.placement;
    req.flush_selectivity = f.selectivity;
  }
  if (ud) {
    req.qkey = v.deth().qkey;
    req.src_qpn = v.deth().src_qp;
  }
  return PacketVerdict::kRequest;
}

}  // namespace softverbs::transport
