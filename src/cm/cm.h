// The RDMA CM's operations, one per librdmacm call, for src/abi/rdmacm.
//
// Each returns 0 or -1 with errno, as librdmacm's calls do, and takes the
// CM's lock itself. Events are queued on the id's channel as the kernel's
// rdma_cm queues them (see docs/DESIGN.md, "QP1 and the CM").
#pragma once

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

namespace softverbs::cm {

class EventChannel;

int create_id(EventChannel* ch, rdma_cm_id** out, void* context, rdma_port_space ps);
int destroy_id(rdma_cm_id* id);
int bind_addr(rdma_cm_id* id, const sockaddr* addr);
int resolve_addr(rdma_cm_id* id, const sockaddr* src, const sockaddr* dst, int timeout_ms);
int resolve_route(rdma_cm_id* id, int timeout_ms);
int listen(rdma_cm_id* id, int backlog);
int connect(rdma_cm_id* id, const rdma_conn_param* param);
int accept(rdma_cm_id* id, const rdma_conn_param* param);
// `reason`: IBA table 109 (28: consumer reject).
int reject(rdma_cm_id* id, const void* private_data, uint8_t len, uint16_t reason = 28);
int establish(rdma_cm_id* id);
// rdma_set_local_ece / rdma_get_remote_ece (ids without a QP).
int set_local_ece(rdma_cm_id* id, const ibv_ece* ece);
int get_remote_ece(rdma_cm_id* id, ibv_ece* ece);
int disconnect(rdma_cm_id* id);
int notify(rdma_cm_id* id, ibv_event_type event);
int migrate_id(rdma_cm_id* id, EventChannel* ch);
int set_option(rdma_cm_id* id, int level, int optname, const void* optval, size_t optlen);
// `flags`: an rdma_cm_mc_join_flags value. `context` comes back as the
// MULTICAST_JOIN event's param.ud.private_data.
int join_multicast(rdma_cm_id* id, const sockaddr* addr, uint16_t flags, void* context);
int leave_multicast(rdma_cm_id* id, const sockaddr* addr);
int get_request(rdma_cm_id* listen, rdma_cm_id** id);
int create_ep(rdma_cm_id** id, const rdma_addrinfo* res, ibv_pd* pd, const ibv_qp_init_attr* qp_init_attr);

int create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr);
void destroy_qp(rdma_cm_id* id);
int init_qp_attr(rdma_cm_id* id, ibv_qp_attr* attr, int* mask);

int get_event(EventChannel* ch, rdma_cm_event** event);
int ack_event(rdma_cm_event* event);

}  // namespace softverbs::cm
