// Conversions between the kernel's uverbs/ucma ABI structs and the verbs
// structs: ibv_copy_{qp,ah}_attr_from_kern, ibv_copy_path_rec_{from,to}_kern.
//
// Debian's librdmacm calls these on what the rdma_ucm kernel module returns
// (rdma_init_qp_attr, route resolution), so they are real conversions, field
// by field. Byte order is never changed: the big-endian fields (LIDs, P_Key,
// flow label of a path record) are big-endian on both sides, and the rest are
// host order on both sides.
//
// As in rdma-core, ibv_copy_qp_attr_from_kern leaves dst->qp_state (the
// caller chose it for the request) and dst->rate_limit alone.
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <cstring>

// Entry points leave the library; the build hides everything else.
#define SV_PUBLIC __attribute__((visibility("default")))

namespace softverbs::abi {
namespace {

static_assert(sizeof(ibv_gid::raw) == sizeof(ib_uverbs_global_route::dgid));
static_assert(sizeof(ibv_gid::raw) == sizeof(ib_user_path_rec::dgid));
static_assert(sizeof(ibv_gid::raw) == sizeof(ib_user_path_rec::sgid));

void ah_attr_from_kern(ibv_ah_attr& dst, const ib_uverbs_ah_attr& src) {
  std::memcpy(dst.grh.dgid.raw, src.grh.dgid, sizeof dst.grh.dgid.raw);
  dst.grh.flow_label = src.grh.flow_label;
  dst.grh.sgid_index = src.grh.sgid_index;
  dst.grh.hop_limit = src.grh.hop_limit;
  dst.grh.traffic_class = src.grh.traffic_class;
  dst.dlid = src.dlid;
  dst.sl = src.sl;
  dst.src_path_bits = src.src_path_bits;
  dst.static_rate = src.static_rate;
  dst.is_global = src.is_global;
  dst.port_num = src.port_num;
}

void qp_attr_from_kern(ibv_qp_attr& dst, const ib_uverbs_qp_attr& src) {
  dst.cur_qp_state = static_cast<ibv_qp_state>(src.cur_qp_state);
  dst.path_mtu = static_cast<ibv_mtu>(src.path_mtu);
  dst.path_mig_state = static_cast<ibv_mig_state>(src.path_mig_state);
  dst.qkey = src.qkey;
  dst.rq_psn = src.rq_psn;
  dst.sq_psn = src.sq_psn;
  dst.dest_qp_num = src.dest_qp_num;
  dst.qp_access_flags = src.qp_access_flags;

  dst.cap.max_send_wr = src.max_send_wr;
  dst.cap.max_recv_wr = src.max_recv_wr;
  dst.cap.max_send_sge = src.max_send_sge;
  dst.cap.max_recv_sge = src.max_recv_sge;
  dst.cap.max_inline_data = src.max_inline_data;

  ah_attr_from_kern(dst.ah_attr, src.ah_attr);
  ah_attr_from_kern(dst.alt_ah_attr, src.alt_ah_attr);

  dst.pkey_index = src.pkey_index;
  dst.alt_pkey_index = src.alt_pkey_index;
  dst.en_sqd_async_notify = src.en_sqd_async_notify;
  dst.sq_draining = src.sq_draining;
  dst.max_rd_atomic = src.max_rd_atomic;
  dst.max_dest_rd_atomic = src.max_dest_rd_atomic;
  dst.min_rnr_timer = src.min_rnr_timer;
  dst.port_num = src.port_num;
  dst.timeout = src.timeout;
  dst.retry_cnt = src.retry_cnt;
  dst.rnr_retry = src.rnr_retry;
  dst.alt_port_num = src.alt_port_num;
  dst.alt_timeout = src.alt_timeout;
}

// The scalar fields of a path record have the same names on both sides;
// only their widths differ (the kernel widens raw_traffic, reversible and
// mtu to 32 bits). One template serves both directions.
template <typename Dst, typename Src>
void path_rec_scalars(Dst& dst, const Src& src) {
  dst.dlid = src.dlid;
  dst.slid = src.slid;
  dst.raw_traffic = static_cast<decltype(dst.raw_traffic)>(src.raw_traffic);
  dst.flow_label = src.flow_label;
  dst.hop_limit = src.hop_limit;
  dst.traffic_class = src.traffic_class;
  dst.reversible = static_cast<decltype(dst.reversible)>(src.reversible);
  dst.numb_path = src.numb_path;
  dst.pkey = src.pkey;
  dst.sl = src.sl;
  dst.mtu_selector = src.mtu_selector;
  dst.mtu = static_cast<decltype(dst.mtu)>(src.mtu);
  dst.rate_selector = src.rate_selector;
  dst.rate = src.rate;
  dst.packet_life_time = src.packet_life_time;
  dst.preference = src.preference;
  dst.packet_life_time_selector = src.packet_life_time_selector;
}

}  // namespace
}  // namespace softverbs::abi

extern "C" {

SV_PUBLIC void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src) {
  if (dst == nullptr || src == nullptr) return;
  softverbs::abi::ah_attr_from_kern(*dst, *src);
}

SV_PUBLIC void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src) {
  if (dst == nullptr || src == nullptr) return;
  softverbs::abi::qp_attr_from_kern(*dst, *src);
}

SV_PUBLIC void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src) {
  if (dst == nullptr || src == nullptr) return;
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid.raw);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid.raw);
  softverbs::abi::path_rec_scalars(*dst, *src);
}

SV_PUBLIC void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst, struct ibv_sa_path_rec* src) {
  if (dst == nullptr || src == nullptr) return;
  std::memcpy(dst->dgid, src->dgid.raw, sizeof dst->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof dst->sgid);
  softverbs::abi::path_rec_scalars(*dst, *src);
}

}  // extern "C"
