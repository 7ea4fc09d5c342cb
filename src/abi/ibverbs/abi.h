// Shared by the C entry points of libibverbs.so.1.
//
// Only this directory spells ibv_* functions. Each entry point keeps the
// contract of its verb: ibv_post_* return an errno value without touching
// errno, create verbs return NULL with errno set, others return 0 or an
// errno value (or -1 with errno, where rdma-core does).
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>

// verbs.h turns these into inline wrappers; the library defines the real ones.
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port
#undef ibv_get_device_list

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace softverbs::abi {

template <class T>
T* fail(int err) {
  errno = err;
  return nullptr;
}

// A verb softverbs does not offer: a debug log line naming it
// (SOFTVERBS_LOG=debug), errno EOPNOTSUPP, and EOPNOTSUPP to return where the
// verb returns an errno value. `verb` is the function's name (__func__; an
// ops-table slot's u_ prefix reads as ibv_).
int unsupported(const char* verb);
template <class T>
T* unsupported_ptr(const char* verb) {
  unsupported(verb);
  return nullptr;
}

// context_ops.cc: the ops tables of a new context, every slot filled.
void fill_context_ops(verbs_context* vctx);
// cq_ex_ops.cc / qp_ex_ops.cc: the function pointers of extended CQs and QPs.
void fill_cq_ex_ops(ibv_cq_ex* cq, uint64_t wc_flags);
void fill_qp_ex_ops(ibv_qp_ex* qp, uint64_t send_ops_flags);

// Context operations, defined beside their verbs.
int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int op_req_notify_cq(ibv_cq* cq, int solicited_only);
int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
int op_query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t attr_len);
// Parent and thread domains (pd_mr.cc).
ibv_pd* op_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr);
ibv_td* op_alloc_td(ibv_context* ctx, ibv_td_init_attr* attr);
int op_dealloc_td(ibv_td* td);
int op_query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                       size_t attr_size);
ibv_dm* op_alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr);
int op_free_dm(ibv_dm* dm);
ibv_mr* op_reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t offset, size_t length, unsigned int access);
int op_advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list, uint32_t num_sge);
int op_query_rt_values(ibv_context* ctx, ibv_values_ex* values);
ibv_cq_ex* op_create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr);
ibv_qp* op_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
ibv_srq* op_create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr);
int op_get_srq_num(ibv_srq* srq, uint32_t* srq_num);
ibv_qp* op_open_qp(ibv_context* ctx, ibv_qp_open_attr* attr);
ibv_xrcd* op_open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr);
int op_close_xrcd(ibv_xrcd* xrcd);
int op_modify_cq(ibv_cq* cq, ibv_modify_cq_attr* attr);
ibv_mw* op_alloc_mw(ibv_pd* pd, ibv_mw_type type);
int op_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);
int op_dealloc_mw(ibv_mw* mw);

}  // namespace softverbs::abi
