// The compat (non-default) symbol versions: the 33 name@IBVERBS_1.0 verbs
// and ibv_register_driver@IBVERBS_1.1.
//
// IBVERBS_1.0 is the libibverbs ABI before 2006, when struct ibv_device,
// ibv_context, ibv_pd, ibv_cq, ibv_qp, ... had other layouts; rdma-core keeps
// it alive by wrapping every object in a 1.0 shell. No Debian 12 program
// binds to it, and softverbs does not carry the old layouts: each 1.0 verb
// exists so the version node resolves, and fails the way its man page says
// a failure looks:
//   - object-returning verbs return NULL with errno = EOPNOTSUPP;
//   - verbs documented as "0 or the value of errno" return EOPNOTSUPP;
//   - verbs documented as "0 or -1" (close_device, get_async_event,
//     get_cq_event, query_gid, query_pkey) return -1 with errno set;
//   - ibv_get_device_guid returns GUID 0 with errno set;
//   - void verbs (ack events, free the device list) do nothing.
// ibv_register_driver@IBVERBS_1.1 is a no-op in rdma-core as well: old
// provider plug-ins call it only to register, which nothing here consults.
//
// Each implementation has a unique name, bound to its versioned name by
// .symver. libibverbs.map lists none of the implementation names, so
// `local: *` keeps them out of the dynamic symbol table; only the
// versioned aliases leave the library. (A toplevel .symver needs the
// object to go through the assembler as is: no LTO for this file.)
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>

#define SV_PUBLIC __attribute__((visibility("default")))

// Binds sv_compat_<name>_1_0 to name@IBVERBS_1.0.
#define SV_COMPAT_1_0(name) __asm__(".symver sv_compat_" #name "_1_0, " #name "@IBVERBS_1.0")

namespace softverbs::abi {
namespace {

// Old 1.0 shells: only ever passed by pointer, never looked into.
using OldDevice = void;
using OldContext = void;
using OldPd = void;
using OldMr = void;
using OldCq = void;
using OldSrq = void;
using OldQp = void;
using OldAh = void;
using OldQpInitAttr = void;

void* fail_null() {
  errno = EOPNOTSUPP;
  return nullptr;
}

int fail_errno_value() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

int fail_minus_one() {
  errno = EOPNOTSUPP;
  return -1;
}

}  // namespace
}  // namespace softverbs::abi

using namespace softverbs::abi;  // NOLINT: the Old* spellings and fail_* helpers

SV_COMPAT_1_0(ibv_get_device_list);
SV_COMPAT_1_0(ibv_free_device_list);
SV_COMPAT_1_0(ibv_get_device_name);
SV_COMPAT_1_0(ibv_get_device_guid);
SV_COMPAT_1_0(ibv_open_device);
SV_COMPAT_1_0(ibv_close_device);
SV_COMPAT_1_0(ibv_get_async_event);
SV_COMPAT_1_0(ibv_ack_async_event);
SV_COMPAT_1_0(ibv_query_device);
SV_COMPAT_1_0(ibv_query_port);
SV_COMPAT_1_0(ibv_query_gid);
SV_COMPAT_1_0(ibv_query_pkey);
SV_COMPAT_1_0(ibv_alloc_pd);
SV_COMPAT_1_0(ibv_dealloc_pd);
SV_COMPAT_1_0(ibv_reg_mr);
SV_COMPAT_1_0(ibv_dereg_mr);
SV_COMPAT_1_0(ibv_create_cq);
SV_COMPAT_1_0(ibv_resize_cq);
SV_COMPAT_1_0(ibv_destroy_cq);
SV_COMPAT_1_0(ibv_get_cq_event);
SV_COMPAT_1_0(ibv_ack_cq_events);
SV_COMPAT_1_0(ibv_create_srq);
SV_COMPAT_1_0(ibv_modify_srq);
SV_COMPAT_1_0(ibv_query_srq);
SV_COMPAT_1_0(ibv_destroy_srq);
SV_COMPAT_1_0(ibv_create_qp);
SV_COMPAT_1_0(ibv_query_qp);
SV_COMPAT_1_0(ibv_modify_qp);
SV_COMPAT_1_0(ibv_destroy_qp);
SV_COMPAT_1_0(ibv_create_ah);
SV_COMPAT_1_0(ibv_destroy_ah);
SV_COMPAT_1_0(ibv_attach_mcast);
SV_COMPAT_1_0(ibv_detach_mcast);
__asm__(".symver sv_compat_ibv_register_driver_1_1, ibv_register_driver@IBVERBS_1.1");

extern "C" {

// ---- Devices and contexts ---------------------------------------------------

SV_PUBLIC OldDevice** sv_compat_ibv_get_device_list_1_0(int* /*num_devices*/) {
  return static_cast<OldDevice**>(fail_null());
}

SV_PUBLIC void sv_compat_ibv_free_device_list_1_0(OldDevice** /*list*/) {}

SV_PUBLIC const char* sv_compat_ibv_get_device_name_1_0(OldDevice* /*device*/) {
  return static_cast<const char*>(fail_null());
}

SV_PUBLIC __be64 sv_compat_ibv_get_device_guid_1_0(OldDevice* /*device*/) {
  errno = EOPNOTSUPP;
  return 0;
}

SV_PUBLIC OldContext* sv_compat_ibv_open_device_1_0(OldDevice* /*device*/) { return fail_null(); }

SV_PUBLIC int sv_compat_ibv_close_device_1_0(OldContext* /*context*/) { return fail_minus_one(); }

SV_PUBLIC int sv_compat_ibv_get_async_event_1_0(OldContext* /*context*/, struct ibv_async_event* /*event*/) {
  return fail_minus_one();
}

SV_PUBLIC void sv_compat_ibv_ack_async_event_1_0(struct ibv_async_event* /*event*/) {}

SV_PUBLIC int sv_compat_ibv_query_device_1_0(OldContext* /*context*/, struct ibv_device_attr* /*device_attr*/) {
  return fail_errno_value();
}

SV_PUBLIC int sv_compat_ibv_query_port_1_0(OldContext* /*context*/, uint8_t /*port_num*/,
                                           struct ibv_port_attr* /*port_attr*/) {
  return fail_errno_value();
}

SV_PUBLIC int sv_compat_ibv_query_gid_1_0(OldContext* /*context*/, uint8_t /*port_num*/, int /*index*/,
                                          union ibv_gid* /*gid*/) {
  return fail_minus_one();
}

SV_PUBLIC int sv_compat_ibv_query_pkey_1_0(OldContext* /*context*/, uint8_t /*port_num*/, int /*index*/,
                                           __be16* /*pkey*/) {
  return fail_minus_one();
}

// ---- PD and MR ----------------------------------------------------------------

SV_PUBLIC OldPd* sv_compat_ibv_alloc_pd_1_0(OldContext* /*context*/) { return fail_null(); }

SV_PUBLIC int sv_compat_ibv_dealloc_pd_1_0(OldPd* /*pd*/) { return fail_errno_value(); }

SV_PUBLIC OldMr* sv_compat_ibv_reg_mr_1_0(OldPd* /*pd*/, void* /*addr*/, size_t /*length*/, int /*access*/) {
  return fail_null();
}

SV_PUBLIC int sv_compat_ibv_dereg_mr_1_0(OldMr* /*mr*/) { return fail_errno_value(); }

// ---- CQ -----------------------------------------------------------------------

SV_PUBLIC OldCq* sv_compat_ibv_create_cq_1_0(OldContext* /*context*/, int /*cqe*/, void* /*cq_context*/,
                                             struct ibv_comp_channel* /*channel*/, int /*comp_vector*/) {
  return fail_null();
}

SV_PUBLIC int sv_compat_ibv_resize_cq_1_0(OldCq* /*cq*/, int /*cqe*/) { return fail_errno_value(); }

SV_PUBLIC int sv_compat_ibv_destroy_cq_1_0(OldCq* /*cq*/) { return fail_errno_value(); }

SV_PUBLIC int sv_compat_ibv_get_cq_event_1_0(struct ibv_comp_channel* /*channel*/, OldCq** /*cq*/,
                                             void** /*cq_context*/) {
  return fail_minus_one();
}

SV_PUBLIC void sv_compat_ibv_ack_cq_events_1_0(OldCq* /*cq*/, unsigned int /*nevents*/) {}

// ---- SRQ ----------------------------------------------------------------------

SV_PUBLIC OldSrq* sv_compat_ibv_create_srq_1_0(OldPd* /*pd*/, struct ibv_srq_init_attr* /*srq_init_attr*/) {
  return fail_null();
}

SV_PUBLIC int sv_compat_ibv_modify_srq_1_0(OldSrq* /*srq*/, struct ibv_srq_attr* /*srq_attr*/, int /*srq_attr_mask*/) {
  return fail_errno_value();
}

SV_PUBLIC int sv_compat_ibv_query_srq_1_0(OldSrq* /*srq*/, struct ibv_srq_attr* /*srq_attr*/) {
  return fail_errno_value();
}

SV_PUBLIC int sv_compat_ibv_destroy_srq_1_0(OldSrq* /*srq*/) { return fail_errno_value(); }

// ---- QP -----------------------------------------------------------------------

SV_PUBLIC OldQp* sv_compat_ibv_create_qp_1_0(OldPd* /*pd*/, OldQpInitAttr* /*qp_init_attr*/) { return fail_null(); }

SV_PUBLIC int sv_compat_ibv_query_qp_1_0(OldQp* /*qp*/, struct ibv_qp_attr* /*attr*/, int /*attr_mask*/,
                                         OldQpInitAttr* /*init_attr*/) {
  return fail_errno_value();
}

SV_PUBLIC int sv_compat_ibv_modify_qp_1_0(OldQp* /*qp*/, struct ibv_qp_attr* /*attr*/, int /*attr_mask*/) {
  return fail_errno_value();
}

SV_PUBLIC int sv_compat_ibv_destroy_qp_1_0(OldQp* /*qp*/) { return fail_errno_value(); }

// ---- AH and multicast -----------------------------------------------------------

SV_PUBLIC OldAh* sv_compat_ibv_create_ah_1_0(OldPd* /*pd*/, struct ibv_ah_attr* /*attr*/) { return fail_null(); }

SV_PUBLIC int sv_compat_ibv_destroy_ah_1_0(OldAh* /*ah*/) { return fail_errno_value(); }

SV_PUBLIC int sv_compat_ibv_attach_mcast_1_0(OldQp* /*qp*/, const union ibv_gid* /*gid*/, uint16_t /*lid*/) {
  return fail_errno_value();
}

SV_PUBLIC int sv_compat_ibv_detach_mcast_1_0(OldQp* /*qp*/, const union ibv_gid* /*gid*/, uint16_t /*lid*/) {
  return fail_errno_value();
}

// ---- IBVERBS_1.1 ----------------------------------------------------------------

// rdma-core: void ibv_register_driver(const char *name,
//     struct ibv_device *(*init_func)(const char *uverbs_sys_path, int abi_version));
SV_PUBLIC void sv_compat_ibv_register_driver_1_1(const char* /*name*/, void* /*init_func*/) {}

}  // extern "C"
