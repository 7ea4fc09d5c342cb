// IBVERBS_PRIVATE_34: the provider ABI that rdma-core keeps private to its
// own libraries (everything in that node except ibv_query_gid_type, which
// lives with the device entry points, and ibv_read_ibdev_sysfs_file, in
// sysfs.cc).
//
// Why it exists at all: perftest links Debian's libmlx5 and libefa, and
// pyverbs/rdmacm programs pull in librdmacm; all of them import this node
// and are bound with BIND_NOW, so every name must resolve or the program
// dies before main. At load time the providers' constructors call
// verbs_register_driver_34; softverbs never loads hardware providers, so
// the registration is accepted and forgotten, silently. Everything else
// here is reached only through a provider's context for an mlx5/EFA
// device, which softverbs never creates; each fails the way rdma-core's
// own function fails when the kernel refuses:
//   - int functions return the positive errno value EOPNOTSUPP (errno is
//     set too, as a failed ioctl/write would leave it), except
//     ibv_cmd_poll_cq, whose contract is a completion count or -1;
//   - the post functions also point *bad_wr at the first request;
//   - pointer functions return NULL with errno = EOPNOTSUPP;
//   - void functions do nothing.
// No stub dereferences an argument except bad_wr (and __verbs_log's format,
// when VERBS_LOG_LEVEL asks for output), so NULL anywhere is safe.
//
// rdma-core declares these in its private libibverbs/driver.h and
// cmd_ioctl.h, which Debian does not ship. The prototypes below follow
// rdma-core 44.0's exactly; the types that only driver.h defines are
// declared incomplete, which keeps the ABI (they are only ever passed by
// pointer).
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// Defined only in rdma-core's private headers.
struct ibv_command_buffer;
struct verbs_context_ops;
struct verbs_counters;
struct verbs_cq;
struct verbs_device_ops;
struct verbs_dm;
struct verbs_flow_action;
struct verbs_mr;
struct verbs_qp;
struct verbs_srq;
struct verbs_xrcd;
// rdma-core's kern-abi.h command structs (generated, not shipped by Debian).
struct ibv_alloc_mw;
struct ibv_alloc_pd;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_create_srq;
struct ibv_create_wq;
struct ibv_create_xsrq;
struct ibv_get_context;
struct ibv_modify_cq;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_modify_srq;
struct ibv_modify_wq;
struct ibv_open_qp;
struct ibv_open_xrcd;
struct ibv_query_port;
struct ibv_query_qp;
struct ibv_query_srq;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_resize_cq;

namespace softverbs::abi {
namespace {

int not_supported() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

template <typename T>
T* not_supported_ptr() {
  errno = EOPNOTSUPP;
  return nullptr;
}

// rdma-core's VERBS_LOG_LEVEL: 0 none, 1 error, 2 warn, 3 info, 4 debug.
// Unset means no provider logging at all.
long provider_log_threshold() {
  static const long threshold = [] {
    const char* env = std::getenv("VERBS_LOG_LEVEL");
    return env != nullptr ? std::strtol(env, nullptr, 0) : 0L;
  }();
  return threshold;
}

}  // namespace
}  // namespace softverbs::abi

using softverbs::abi::not_supported;
using softverbs::abi::not_supported_ptr;

#define SV_PUBLIC __attribute__((visibility("default")))

extern "C" {

// ---- Objects -------------------------------------------------------------

// rdma-core reads RDMAV_ALLOW_DISASSOC_DESTROY into it; only its ibv_cmd_destroy_*
// consult it, and ours never reach the kernel.
SV_PUBLIC bool verbs_allow_disassociate_destroy = false;

// ---- Provider registration, logging, contexts -----------------------------

SV_PUBLIC void verbs_register_driver_34(const struct verbs_device_ops* /*ops*/) {}

[[gnu::format(printf, 3, 4)]] SV_PUBLIC void __verbs_log(struct verbs_context* /*ctx*/, uint32_t level, const char* fmt,
                                                         ...) {
  const long threshold = softverbs::abi::provider_log_threshold();
  if (fmt == nullptr || threshold <= 0 || static_cast<long>(level) > threshold) return;
  const int saved = errno;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  errno = saved;
}

SV_PUBLIC void* _verbs_init_and_alloc_context(struct ibv_device* /*device*/, int /*cmd_fd*/, size_t /*alloc_size*/,
                                              struct verbs_context* /*context_offset*/, uint32_t /*driver_id*/) {
  return not_supported_ptr<void>();
}

SV_PUBLIC struct ibv_context* verbs_open_device(struct ibv_device* /*device*/, void* /*private_data*/) {
  return not_supported_ptr<struct ibv_context>();
}

SV_PUBLIC void verbs_uninit_context(struct verbs_context* /*context*/) {}

SV_PUBLIC void verbs_set_ops(struct verbs_context* /*vctx*/, const struct verbs_context_ops* /*ops*/) {}

SV_PUBLIC void verbs_init_cq(struct ibv_cq* /*cq*/, struct ibv_context* /*context*/,
                             struct ibv_comp_channel* /*channel*/, void* /*cq_context*/) {}

// ---- ioctl() command buffers ----------------------------------------------

// Sizes a stack buffer before execute_ioctl linearises linked buffers into
// it. Ours never linearises (it fails first), so the caller's own count is
// always enough.
SV_PUBLIC unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct ibv_command_buffer* /*link*/) {
  return num_attrs;
}

SV_PUBLIC int execute_ioctl(struct ibv_context* /*context*/, struct ibv_command_buffer* /*cmd*/) {
  return not_supported();
}

// ---- Context and device -----------------------------------------------------

SV_PUBLIC int ibv_cmd_get_context(struct verbs_context* /*context*/, struct ibv_get_context* /*cmd*/,
                                  size_t /*cmd_size*/, struct ib_uverbs_get_context_resp* /*resp*/,
                                  size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_query_context(struct ibv_context* /*ctx*/, struct ibv_command_buffer* /*driver*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_query_device_any(struct ibv_context* /*context*/,
                                       const struct ibv_query_device_ex_input* /*input*/,
                                       struct ibv_device_attr_ex* /*attr*/, size_t /*attr_size*/,
                                       struct ib_uverbs_ex_query_device_resp* /*resp*/, size_t* /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_query_port(struct ibv_context* /*context*/, uint8_t /*port_num*/,
                                 struct ibv_port_attr* /*port_attr*/, struct ibv_query_port* /*cmd*/,
                                 size_t /*cmd_size*/) {
  return not_supported();
}

// ---- PD, XRCD, MR, MW, DM ---------------------------------------------------

SV_PUBLIC int ibv_cmd_alloc_pd(struct ibv_context* /*context*/, struct ibv_pd* /*pd*/, struct ibv_alloc_pd* /*cmd*/,
                               size_t /*cmd_size*/, struct ib_uverbs_alloc_pd_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_dealloc_pd(struct ibv_pd* /*pd*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_open_xrcd(struct ibv_context* /*context*/, struct verbs_xrcd* /*xrcd*/, int /*vxrcd_size*/,
                                struct ibv_xrcd_init_attr* /*attr*/, struct ibv_open_xrcd* /*cmd*/, size_t /*cmd_size*/,
                                struct ib_uverbs_open_xrcd_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_close_xrcd(struct verbs_xrcd* /*xrcd*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_reg_mr(struct ibv_pd* /*pd*/, void* /*addr*/, size_t /*length*/, uint64_t /*hca_va*/,
                             int /*access*/, struct verbs_mr* /*vmr*/, struct ibv_reg_mr* /*cmd*/, size_t /*cmd_size*/,
                             struct ib_uverbs_reg_mr_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_rereg_mr(struct verbs_mr* /*vmr*/, uint32_t /*flags*/, void* /*addr*/, size_t /*length*/,
                               uint64_t /*hca_va*/, int /*access*/, struct ibv_pd* /*pd*/, struct ibv_rereg_mr* /*cmd*/,
                               size_t /*cmd_sz*/, struct ib_uverbs_rereg_mr_resp* /*resp*/, size_t /*resp_sz*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_dereg_mr(struct verbs_mr* /*vmr*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_query_mr(struct ibv_pd* /*pd*/, struct verbs_mr* /*vmr*/, uint32_t /*mr_handle*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_advise_mr(struct ibv_pd* /*pd*/, enum ibv_advise_mr_advice /*advice*/, uint32_t /*flags*/,
                                struct ibv_sge* /*sg_list*/, uint32_t /*num_sge*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_reg_dmabuf_mr(struct ibv_pd* /*pd*/, uint64_t /*offset*/, size_t /*length*/, uint64_t /*iova*/,
                                    int /*fd*/, int /*access*/, struct verbs_mr* /*vmr*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_alloc_mw(struct ibv_pd* /*pd*/, enum ibv_mw_type /*type*/, struct ibv_mw* /*mw*/,
                               struct ibv_alloc_mw* /*cmd*/, size_t /*cmd_size*/,
                               struct ib_uverbs_alloc_mw_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_dealloc_mw(struct ibv_mw* /*mw*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_alloc_dm(struct ibv_context* /*ctx*/, const struct ibv_alloc_dm_attr* /*dm_attr*/,
                               struct verbs_dm* /*dm*/, struct ibv_command_buffer* /*link*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_free_dm(struct verbs_dm* /*dm*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_reg_dm_mr(struct ibv_pd* /*pd*/, struct verbs_dm* /*dm*/, uint64_t /*offset*/, size_t /*length*/,
                                unsigned int /*access*/, struct verbs_mr* /*vmr*/,
                                struct ibv_command_buffer* /*link*/) {
  return not_supported();
}

// ---- CQ -----------------------------------------------------------------------

SV_PUBLIC int ibv_cmd_create_cq(struct ibv_context* /*context*/, int /*cqe*/, struct ibv_comp_channel* /*channel*/,
                                int /*comp_vector*/, struct ibv_cq* /*cq*/, struct ibv_create_cq* /*cmd*/,
                                size_t /*cmd_size*/, struct ib_uverbs_create_cq_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_create_cq_ex(struct ibv_context* /*context*/, const struct ibv_cq_init_attr_ex* /*cq_attr*/,
                                   struct verbs_cq* /*cq*/, struct ibv_create_cq_ex* /*cmd*/, size_t /*cmd_size*/,
                                   struct ib_uverbs_ex_create_cq_resp* /*resp*/, size_t /*resp_size*/,
                                   uint32_t /*cmd_flags*/) {
  return not_supported();
}

// Its contract is poll_cq's: a completion count, or negative on error.
SV_PUBLIC int ibv_cmd_poll_cq(struct ibv_cq* /*cq*/, int /*ne*/, struct ibv_wc* /*wc*/) {
  errno = EOPNOTSUPP;
  return -1;
}

SV_PUBLIC int ibv_cmd_req_notify_cq(struct ibv_cq* /*cq*/, int /*solicited_only*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_resize_cq(struct ibv_cq* /*cq*/, int /*cqe*/, struct ibv_resize_cq* /*cmd*/, size_t /*cmd_size*/,
                                struct ib_uverbs_resize_cq_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_modify_cq(struct ibv_cq* /*cq*/, struct ibv_modify_cq_attr* /*attr*/,
                                struct ibv_modify_cq* /*cmd*/, size_t /*cmd_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_cq(struct ibv_cq* /*cq*/) { return not_supported(); }

// ---- SRQ ----------------------------------------------------------------------

SV_PUBLIC int ibv_cmd_create_srq(struct ibv_pd* /*pd*/, struct ibv_srq* /*srq*/, struct ibv_srq_init_attr* /*attr*/,
                                 struct ibv_create_srq* /*cmd*/, size_t /*cmd_size*/,
                                 struct ib_uverbs_create_srq_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_create_srq_ex(struct ibv_context* /*context*/, struct verbs_srq* /*srq*/,
                                    struct ibv_srq_init_attr_ex* /*attr_ex*/, struct ibv_create_xsrq* /*cmd*/,
                                    size_t /*cmd_size*/, struct ib_uverbs_create_srq_resp* /*resp*/,
                                    size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_modify_srq(struct ibv_srq* /*srq*/, struct ibv_srq_attr* /*srq_attr*/, int /*srq_attr_mask*/,
                                 struct ibv_modify_srq* /*cmd*/, size_t /*cmd_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_query_srq(struct ibv_srq* /*srq*/, struct ibv_srq_attr* /*srq_attr*/,
                                struct ibv_query_srq* /*cmd*/, size_t /*cmd_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_srq(struct ibv_srq* /*srq*/) { return not_supported(); }

// ---- QP -----------------------------------------------------------------------

SV_PUBLIC int ibv_cmd_create_qp(struct ibv_pd* /*pd*/, struct ibv_qp* /*qp*/, struct ibv_qp_init_attr* /*attr*/,
                                struct ibv_create_qp* /*cmd*/, size_t /*cmd_size*/,
                                struct ib_uverbs_create_qp_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_create_qp_ex(struct ibv_context* /*context*/, struct verbs_qp* /*qp*/,
                                   struct ibv_qp_init_attr_ex* /*attr_ex*/, struct ibv_create_qp* /*cmd*/,
                                   size_t /*cmd_size*/, struct ib_uverbs_create_qp_resp* /*resp*/,
                                   size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_create_qp_ex2(struct ibv_context* /*context*/, struct verbs_qp* /*qp*/,
                                    struct ibv_qp_init_attr_ex* /*qp_attr*/, struct ibv_create_qp_ex* /*cmd*/,
                                    size_t /*cmd_size*/, struct ib_uverbs_ex_create_qp_resp* /*resp*/,
                                    size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_open_qp(struct ibv_context* /*context*/, struct verbs_qp* /*qp*/, int /*vqp_sz*/,
                              struct ibv_qp_open_attr* /*attr*/, struct ibv_open_qp* /*cmd*/, size_t /*cmd_size*/,
                              struct ib_uverbs_create_qp_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_query_qp(struct ibv_qp* /*qp*/, struct ibv_qp_attr* /*qp_attr*/, int /*attr_mask*/,
                               struct ibv_qp_init_attr* /*qp_init_attr*/, struct ibv_query_qp* /*cmd*/,
                               size_t /*cmd_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_modify_qp(struct ibv_qp* /*qp*/, struct ibv_qp_attr* /*attr*/, int /*attr_mask*/,
                                struct ibv_modify_qp* /*cmd*/, size_t /*cmd_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_modify_qp_ex(struct ibv_qp* /*qp*/, struct ibv_qp_attr* /*attr*/, int /*attr_mask*/,
                                   struct ibv_modify_qp_ex* /*cmd*/, size_t /*cmd_size*/,
                                   struct ib_uverbs_ex_modify_qp_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_qp(struct ibv_qp* /*qp*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_post_send(struct ibv_qp* /*ibqp*/, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = wr;
  return not_supported();
}

SV_PUBLIC int ibv_cmd_post_recv(struct ibv_qp* /*ibqp*/, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = wr;
  return not_supported();
}

SV_PUBLIC int ibv_cmd_post_srq_recv(struct ibv_srq* /*srq*/, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = wr;
  return not_supported();
}

// ---- AH, multicast ------------------------------------------------------------

SV_PUBLIC int ibv_cmd_create_ah(struct ibv_pd* /*pd*/, struct ibv_ah* /*ah*/, struct ibv_ah_attr* /*attr*/,
                                struct ib_uverbs_create_ah_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_ah(struct ibv_ah* /*ah*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_attach_mcast(struct ibv_qp* /*qp*/, const union ibv_gid* /*gid*/, uint16_t /*lid*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_detach_mcast(struct ibv_qp* /*qp*/, const union ibv_gid* /*gid*/, uint16_t /*lid*/) {
  return not_supported();
}

// ---- Flows, flow actions, WQs, RSS tables, counters -----------------------------

SV_PUBLIC int ibv_cmd_create_flow(struct ibv_qp* /*qp*/, struct ibv_flow* /*flow_id*/,
                                  struct ibv_flow_attr* /*flow_attr*/, void* /*ucmd*/, size_t /*ucmd_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_flow(struct ibv_flow* /*flow_id*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_create_flow_action_esp(struct ibv_context* /*ctx*/, struct ibv_flow_action_esp_attr* /*attr*/,
                                             struct verbs_flow_action* /*flow_action*/,
                                             struct ibv_command_buffer* /*driver*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action* /*flow_action*/,
                                             struct ibv_flow_action_esp_attr* /*attr*/,
                                             struct ibv_command_buffer* /*driver*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_flow_action(struct verbs_flow_action* /*action*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_create_wq(struct ibv_context* /*context*/, struct ibv_wq_init_attr* /*wq_init_attr*/,
                                struct ibv_wq* /*wq*/, struct ibv_create_wq* /*cmd*/, size_t /*cmd_size*/,
                                struct ib_uverbs_ex_create_wq_resp* /*resp*/, size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_modify_wq(struct ibv_wq* /*wq*/, struct ibv_wq_attr* /*attr*/, struct ibv_modify_wq* /*cmd*/,
                                size_t /*cmd_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_wq(struct ibv_wq* /*wq*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_create_rwq_ind_table(struct ibv_context* /*context*/,
                                           struct ibv_rwq_ind_table_init_attr* /*init_attr*/,
                                           struct ibv_rwq_ind_table* /*rwq_ind_table*/,
                                           struct ib_uverbs_ex_create_rwq_ind_table_resp* /*resp*/,
                                           size_t /*resp_size*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table* /*rwq_ind_table*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_create_counters(struct ibv_context* /*context*/, struct ibv_counters_init_attr* /*init_attr*/,
                                      struct verbs_counters* /*vcounters*/, struct ibv_command_buffer* /*link*/) {
  return not_supported();
}

SV_PUBLIC int ibv_cmd_destroy_counters(struct verbs_counters* /*vcounters*/) { return not_supported(); }

SV_PUBLIC int ibv_cmd_read_counters(struct verbs_counters* /*vcounters*/, uint64_t* /*counters_value*/,
                                    uint32_t /*ncounters*/, uint32_t /*flags*/, struct ibv_command_buffer* /*link*/) {
  return not_supported();
}

}  // extern "C"
