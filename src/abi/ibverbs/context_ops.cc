// The ops tables of a context: rdma-core's static inline verbs call through
// them. A default table whose every slot fails the documented way comes
// first; the verbs softverbs implements overlay it.
#include <cstring>

#include "abi/ibverbs/abi.h"

namespace softverbs::abi {
namespace {

// ---- every slot, unsupported ---------------------------------------------

void* u_compat() {
  errno = ENOSYS;
  return nullptr;
}
ibv_mr* u_alloc_null_mr(ibv_pd*) { return unsupported_ptr<ibv_mr>(__func__); }
int u_read_counters(ibv_counters*, uint64_t*, uint32_t, uint32_t) { return unsupported(__func__); }
int u_attach_counters_point_flow(ibv_counters*, ibv_counter_attach_attr*, ibv_flow*) { return unsupported(__func__); }
ibv_counters* u_create_counters(ibv_context*, ibv_counters_init_attr*) { return unsupported_ptr<ibv_counters>(__func__); }
int u_destroy_counters(ibv_counters*) { return unsupported(__func__); }
int u_modify_flow_action_esp(ibv_flow_action*, ibv_flow_action_esp_attr*) { return unsupported(__func__); }
int u_destroy_flow_action(ibv_flow_action*) { return unsupported(__func__); }
ibv_flow_action* u_create_flow_action_esp(ibv_context*, ibv_flow_action_esp_attr*) {
  return unsupported_ptr<ibv_flow_action>(__func__);
}
int u_modify_qp_rate_limit(ibv_qp*, ibv_qp_rate_limit_attr*) { return unsupported(__func__); }
int u_post_srq_ops(ibv_srq*, ibv_ops_wr* op, ibv_ops_wr** bad) {
  if (bad != nullptr) *bad = op;
  return unsupported(__func__);
}
int u_destroy_rwq_ind_table(ibv_rwq_ind_table*) { return unsupported(__func__); }
ibv_rwq_ind_table* u_create_rwq_ind_table(ibv_context*, ibv_rwq_ind_table_init_attr*) {
  return unsupported_ptr<ibv_rwq_ind_table>(__func__);
}
int u_destroy_wq(ibv_wq*) { return unsupported(__func__); }
int u_modify_wq(ibv_wq*, ibv_wq_attr*) { return unsupported(__func__); }
ibv_wq* u_create_wq(ibv_context*, ibv_wq_init_attr*) { return unsupported_ptr<ibv_wq>(__func__); }
int u_destroy_flow(ibv_flow*) { return unsupported(__func__); }
ibv_flow* u_create_flow(ibv_qp*, ibv_flow_attr*) { return unsupported_ptr<ibv_flow>(__func__); }
void u_placeholder() {}

int compat_query_device(ibv_context* ctx, ibv_device_attr* attr) { return ibv_query_device(ctx, attr); }
int compat_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* attr) {
  return ibv_query_port(ctx, port, attr);
}

template <class Fn>
void set_compat(Fn& slot) {
  slot = reinterpret_cast<Fn>(&u_compat);
}

}  // namespace

void fill_context_ops(verbs_context* v) {
  ibv_context_ops& o = v->context.ops;
  std::memset(&o, 0, sizeof o);
  o._compat_query_device = compat_query_device;
  o._compat_query_port = compat_query_port;
  set_compat(o._compat_alloc_pd);
  set_compat(o._compat_dealloc_pd);
  set_compat(o._compat_reg_mr);
  set_compat(o._compat_rereg_mr);
  set_compat(o._compat_dereg_mr);
  o.alloc_mw = op_alloc_mw;
  o.bind_mw = op_bind_mw;
  o.dealloc_mw = op_dealloc_mw;
  set_compat(o._compat_create_cq);
  o.poll_cq = op_poll_cq;
  o.req_notify_cq = op_req_notify_cq;
  set_compat(o._compat_cq_event);
  set_compat(o._compat_resize_cq);
  set_compat(o._compat_destroy_cq);
  set_compat(o._compat_create_srq);
  set_compat(o._compat_modify_srq);
  set_compat(o._compat_query_srq);
  set_compat(o._compat_destroy_srq);
  o.post_srq_recv = op_post_srq_recv;
  set_compat(o._compat_create_qp);
  set_compat(o._compat_query_qp);
  set_compat(o._compat_modify_qp);
  set_compat(o._compat_destroy_qp);
  o.post_send = op_post_send;
  o.post_recv = op_post_recv;
  set_compat(o._compat_create_ah);
  set_compat(o._compat_destroy_ah);
  set_compat(o._compat_attach_mcast);
  set_compat(o._compat_detach_mcast);
  set_compat(o._compat_async_event);

  v->query_port = op_query_port;
  v->advise_mr = op_advise_mr;
  v->alloc_null_mr = u_alloc_null_mr;
  v->read_counters = u_read_counters;
  v->attach_counters_point_flow = u_attach_counters_point_flow;
  v->create_counters = u_create_counters;
  v->destroy_counters = u_destroy_counters;
  v->reg_dm_mr = op_reg_dm_mr;
  v->alloc_dm = op_alloc_dm;
  v->free_dm = op_free_dm;
  v->modify_flow_action_esp = u_modify_flow_action_esp;
  v->destroy_flow_action = u_destroy_flow_action;
  v->create_flow_action_esp = u_create_flow_action_esp;
  v->modify_qp_rate_limit = u_modify_qp_rate_limit;
  v->alloc_parent_domain = op_alloc_parent_domain;
  v->dealloc_td = op_dealloc_td;
  v->alloc_td = op_alloc_td;
  v->modify_cq = op_modify_cq;
  v->post_srq_ops = u_post_srq_ops;
  v->destroy_rwq_ind_table = u_destroy_rwq_ind_table;
  v->create_rwq_ind_table = u_create_rwq_ind_table;
  v->destroy_wq = u_destroy_wq;
  v->modify_wq = u_modify_wq;
  v->create_wq = u_create_wq;
  v->query_rt_values = op_query_rt_values;
  v->create_cq_ex = op_create_cq_ex;
  v->priv = nullptr;
  v->query_device_ex = op_query_device_ex;
  v->ibv_destroy_flow = u_destroy_flow;
  v->ABI_placeholder2 = u_placeholder;
  v->ibv_create_flow = u_create_flow;
  v->ABI_placeholder1 = u_placeholder;
  v->open_qp = op_open_qp;
  v->create_qp_ex = op_create_qp_ex;
  v->get_srq_num = op_get_srq_num;
  v->create_srq_ex = op_create_srq_ex;
  v->open_xrcd = op_open_xrcd;
  v->close_xrcd = op_close_xrcd;
}

}  // namespace softverbs::abi
