#include "cm/gsi_endpoint.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/log.h"

namespace softverbs::cm {

namespace {
constexpr uint32_t kSendTag = 1u << 31;
}

std::unique_ptr<GsiEndpoint> GsiEndpoint::create(ibv_context* ctx, uint8_t port) {
  std::unique_ptr<GsiEndpoint> ep(new GsiEndpoint());
  ep->ctx_ = ctx;
  ep->port_ = port;
  auto fail = [&](const char* what) -> std::unique_ptr<GsiEndpoint> {
    const int e = errno != 0 ? errno : EIO;
    SV_LOG(kWarn, "CM agent on %s: %s failed: %s", ibv_get_device_name(ctx->device), what, std::strerror(e));
    ep.reset();
    errno = e;
    return nullptr;
  };
  if (ibv_query_port(ctx, port, &ep->port_attr_) != 0) return fail("ibv_query_port");
  if (ibv_query_gid(ctx, port, 0, &ep->gid_) != 0) return fail("ibv_query_gid");
  if ((ep->pd_ = ibv_alloc_pd(ctx)) == nullptr) return fail("ibv_alloc_pd");
  if ((ep->channel_ = ibv_create_comp_channel(ctx)) == nullptr) return fail("ibv_create_comp_channel");
  if ((ep->send_cq_ = ibv_create_cq(ctx, kSends, nullptr, nullptr, 0)) == nullptr) return fail("ibv_create_cq");
  if ((ep->recv_cq_ = ibv_create_cq(ctx, kRecvs, nullptr, ep->channel_, 0)) == nullptr) return fail("ibv_create_cq");
  ibv_qp_init_attr init{};
  init.send_cq = ep->send_cq_;
  init.recv_cq = ep->recv_cq_;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = kSends;
  init.cap.max_recv_wr = kRecvs;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  // Source QPN 1: the process's GSI agent. Its datagrams leave as QP1's and
  // QP1's datagrams for this process come to it (src/shm/gsi_table.h).
  ibv_qp_init_attr_ex ex{};
  ex.send_cq = init.send_cq;
  ex.recv_cq = init.recv_cq;
  ex.qp_type = IBV_QPT_UD;
  ex.cap = init.cap;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  ex.pd = ep->pd_;
  ex.create_flags = IBV_QP_CREATE_SOURCE_QPN;
  ex.source_qpn = wire::cm::kGsiQpn;
  if ((ep->qp_ = ibv_create_qp_ex(ctx, &ex)) == nullptr) return fail("ibv_create_qp_ex(source QPN 1)");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = port;
  a.qkey = wire::cm::kGsiQkey;
  if (ibv_modify_qp(ep->qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0) {
    return fail("ibv_modify_qp(INIT)");
  }
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(ep->qp_, &a, IBV_QP_STATE) != 0) return fail("ibv_modify_qp(RTR)");
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  if (ibv_modify_qp(ep->qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) return fail("ibv_modify_qp(RTS)");
  const size_t bytes = size_t{kRecvs} * kRecvBytes + size_t{kSends} * wire::cm::kMadBytes;
  ep->buf_ = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  if (ep->buf_ == nullptr) return fail("aligned_alloc");
  // The function, not verbs.h's macro (its flag test mixes enum types).
  if ((ep->mr_ = (ibv_reg_mr)(ep->pd_, ep->buf_, bytes, IBV_ACCESS_LOCAL_WRITE)) == nullptr) return fail("ibv_reg_mr");
  for (uint32_t i = 0; i < kRecvs; ++i) {
    if (ep->post_recv(i) != 0) return fail("ibv_post_recv");
  }
  if (ibv_req_notify_cq(ep->recv_cq_, 0) != 0) return fail("ibv_req_notify_cq");
  return ep;
}

GsiEndpoint::~GsiEndpoint() {
  for (auto& [key, ah] : ahs_) ibv_destroy_ah(ah);
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  if (send_cq_ != nullptr) ibv_destroy_cq(send_cq_);
  if (recv_cq_ != nullptr) ibv_destroy_cq(recv_cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  std::free(buf_);
}

int GsiEndpoint::post_recv(uint32_t index) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_ + size_t{index} * kRecvBytes), kRecvBytes, mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = index;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp_, &wr, &bad);
}

void GsiEndpoint::reclaim_sends() {
  ibv_wc wc[16];
  int n;
  while ((n = ibv_poll_cq(send_cq_, 16, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        SV_LOG(kDebug, "CM agent: MAD send failed: %s", ibv_wc_status_str(wc[i].status));
      }
    }
    sends_in_flight_ -= static_cast<uint32_t>(n);
  }
}

ibv_ah* GsiEndpoint::ah_for(const MadDest& to) {
  uint64_t hi = 0, lo = 0;
  std::memcpy(&hi, to.gid.raw, 8);
  std::memcpy(&lo, to.gid.raw + 8, 8);
  const auto key = std::make_pair(to.global ? uint16_t{0} : to.lid, std::make_pair(hi, lo));
  if (auto it = ahs_.find(key); it != ahs_.end()) return it->second;
  ibv_ah_attr a{};
  a.port_num = port_;
  a.dlid = to.lid;
  if (to.global) {
    a.is_global = 1;
    a.grh.dgid = to.gid;
    a.grh.sgid_index = 0;
    a.grh.hop_limit = 64;
  }
  ibv_ah* ah = ibv_create_ah(pd_, &a);
  if (ah != nullptr) ahs_.emplace(key, ah);
  return ah;
}

int GsiEndpoint::send(const MadDest& to, const uint8_t (&mad)[wire::cm::kMadBytes]) {
  reclaim_sends();
  if (sends_in_flight_ >= kSends) return EAGAIN;
  ibv_ah* ah = ah_for(to);
  if (ah == nullptr) return errno != 0 ? errno : EINVAL;
  uint8_t* slot = buf_ + size_t{kRecvs} * kRecvBytes + size_t{next_send_} * wire::cm::kMadBytes;
  next_send_ = (next_send_ + 1) % kSends;
  std::memcpy(slot, mad, wire::cm::kMadBytes);
  ibv_sge sge{reinterpret_cast<uintptr_t>(slot), static_cast<uint32_t>(wire::cm::kMadBytes), mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kSendTag;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = to.qpn;
  wr.wr.ud.remote_qkey = wire::cm::kGsiQkey;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_, &wr, &bad);
  if (rc == 0) ++sends_in_flight_;
  return rc;
}

void GsiEndpoint::drain(const std::function<void(const uint8_t*, const MadSource&)>& handler) {
  ibv_cq* cq = nullptr;
  void* cq_ctx = nullptr;
  if (ibv_get_cq_event(channel_, &cq, &cq_ctx) == 0) ibv_ack_cq_events(cq, 1);
  ibv_req_notify_cq(recv_cq_, 0);
  ibv_wc wc[16];
  int n;
  while ((n = ibv_poll_cq(recv_cq_, 16, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      const auto index = static_cast<uint32_t>(wc[i].wr_id);
      const uint8_t* data = buf_ + size_t{index} * kRecvBytes;
      if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= 40 + wire::cm::kMadBytes) {
        MadSource from;
        from.qpn = wc[i].src_qp;
        from.lid = wc[i].slid;
        from.has_grh = (wc[i].wc_flags & IBV_WC_GRH) != 0;
        if (from.has_grh) {
          // IB: the GRH's SGID. RoCEv2: the IP header instead (wire/ud_grh.h):
          // IPv6 fills the 40 bytes, IPv4 the last 20 (source address at 32).
          if (roce() && (data[0] >> 4) != 6) {
            std::memset(from.gid.raw, 0, 10);
            from.gid.raw[10] = from.gid.raw[11] = 0xff;
            std::memcpy(from.gid.raw + 12, data + 32, 4);
          } else {
            std::memcpy(from.gid.raw, data + 8, 16);
          }
        }
        handler(data + 40, from);
      }
      if (post_recv(index) != 0) SV_LOG(kWarn, "CM agent: ibv_post_recv failed");
    }
  }
  reclaim_sends();
}

}  // namespace softverbs::cm
