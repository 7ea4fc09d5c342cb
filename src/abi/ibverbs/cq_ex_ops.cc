// The extended CQ interface (ibv_start_poll, ibv_wc_read_* …): function
// pointers in ibv_cq_ex, reading the entry under the poll cursor.
#include "abi/ibverbs/abi.h"
#include "verbs/cq.h"

using softverbs::verbs::Cq;

namespace softverbs::abi {
namespace {

const shm::Cqe& cur(ibv_cq_ex* cq) { return Cq::from(cq)->current(); }

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  return Cq::from(cq)->start_poll();
}
int next_poll(ibv_cq_ex* cq) { return Cq::from(cq)->next_poll(); }
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

}  // namespace

void fill_cq_ex_ops(ibv_cq_ex* cq, uint64_t wc_flags) {
  cq->start_poll = start_poll;
  cq->next_poll = next_poll;
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
}

}  // namespace softverbs::abi
