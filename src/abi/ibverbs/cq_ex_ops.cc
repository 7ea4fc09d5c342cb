// The extended CQ interface (ibv_start_poll, ibv_wc_read_* …): function
// pointers in ibv_cq_ex, reading the entry under the poll cursor.
#include <ctime>

#include "abi/ibverbs/abi.h"
#include "util/time.h"
#include "verbs/cq.h"

using softverbs::adapter_clock_ticks;
using softverbs::kAdapterClockKhz;
using softverbs::verbs::Cq;

namespace softverbs::abi {
namespace {

const shm::Cqe& cur(ibv_cq_ex* cq) { return Cq::from(cq)->current(); }

template <bool kStamped>
int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  return Cq::from(cq)->start_poll<kStamped>();
}
template <bool kStamped>
int next_poll(ibv_cq_ex* cq) {
  return Cq::from(cq)->next_poll<kStamped>();
}
void end_poll(ibv_cq_ex* cq) { Cq::from(cq)->end_poll(); }
ibv_wc_opcode read_opcode(ibv_cq_ex* cq) { return static_cast<ibv_wc_opcode>(cur(cq).opcode); }
uint32_t read_vendor_err(ibv_cq_ex* cq) { return cur(cq).vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* cq) { return cur(cq).byte_len; }
__be32 read_imm_data(ibv_cq_ex* cq) { return cur(cq).imm_data; }
uint32_t read_qp_num(ibv_cq_ex* cq) { return cur(cq).qp_num; }
uint32_t read_src_qp(ibv_cq_ex* cq) { return cur(cq).src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* cq) { return cur(cq).wc_flags; }
uint32_t read_slid(ibv_cq_ex* cq) { return cur(cq).slid; }
uint8_t read_sl(ibv_cq_ex* cq) { return cur(cq).sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* cq) { return cur(cq).dlid_path_bits; }
uint64_t read_completion_ts(ibv_cq_ex* cq) { return Cq::from(cq)->current_stamp(); }
// The adapter clock's offset to CLOCK_REALTIME is taken now, not kept from
// the CQ's creation, so that it follows the wall clock's adjustments.
uint64_t read_completion_wallclock_ns(ibv_cq_ex* cq) {
  const uint64_t stamp = Cq::from(cq)->current_stamp();
  timespec real;
  clock_gettime(CLOCK_REALTIME, &real);
  const uint64_t ticks = adapter_clock_ticks();
  const uint64_t real_ns = static_cast<uint64_t>(real.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(real.tv_nsec);
  return real_ns - (ticks - stamp) * 1'000'000 / kAdapterClockKhz;
}

}  // namespace

void fill_cq_ex_ops(ibv_cq_ex* cq, uint64_t wc_flags) {
  const bool stamped = Cq::from(cq)->stamped();
  cq->start_poll = stamped ? start_poll<true> : start_poll<false>;
  cq->next_poll = stamped ? next_poll<true> : next_poll<false>;
  cq->end_poll = end_poll;
  cq->read_opcode = read_opcode;
  cq->read_vendor_err = read_vendor_err;
  cq->read_wc_flags = read_wc_flags;
  // Readers exist only for fields the CQ was created with (ibv_create_cq_ex(3)).
  cq->read_byte_len = (wc_flags & IBV_WC_EX_WITH_BYTE_LEN) ? read_byte_len : nullptr;
  cq->read_imm_data = (wc_flags & IBV_WC_EX_WITH_IMM) ? read_imm_data : nullptr;
  cq->read_qp_num = (wc_flags & IBV_WC_EX_WITH_QP_NUM) ? read_qp_num : nullptr;
  cq->read_src_qp = (wc_flags & IBV_WC_EX_WITH_SRC_QP) ? read_src_qp : nullptr;
  cq->read_slid = (wc_flags & IBV_WC_EX_WITH_SLID) ? read_slid : nullptr;
  cq->read_sl = (wc_flags & IBV_WC_EX_WITH_SL) ? read_sl : nullptr;
  cq->read_dlid_path_bits = (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS) ? read_dlid_path_bits : nullptr;
  cq->read_completion_ts = (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) ? read_completion_ts : nullptr;
  cq->read_completion_wallclock_ns =
      (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) ? read_completion_wallclock_ns : nullptr;
}

}  // namespace softverbs::abi
