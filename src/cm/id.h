// An rdma_cm_id and the connection state the CM keeps for it.
//
// Contract: every field but `pub`'s application-owned members (context,
// and what rdma_create_qp stores) is read and written under the CM's lock
// (Agent::mu). `pub` comes first, so the application's rdma_cm_id* is the
// CmId*.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "cm/gsi_endpoint.h"
#include "wire/cm_mad.h"

namespace softverbs::cm {

class EventChannel;
struct Device;

enum class IdState {
  kIdle,
  kAddrBound,
  kAddrResolved,
  kRouteResolved,
  kListen,
  kReqSent,       // active: REQ out, waiting for REP (or REJ)
  kRepReceived,   // active, no QP: CONNECT_RESPONSE given, waiting for rdma_establish
  kReqReceived,   // passive: CONNECT_REQUEST given, waiting for accept/reject
  kRepSent,       // passive: REP out, waiting for RTU
  kEstablished,
  kDreqSent,
  kTimewait,      // disconnected; TIMEWAIT_EXIT when the timer fires
  kClosed,        // rejected, unreachable or through timewait
};

// One rdma_join_multicast of an id (api_mcast.cc).
struct McastJoin {
  sockaddr_storage addr{};
  ibv_gid mgid{};
  uint16_t mlid = 0;
  bool send_only = false;
  ibv_qp* attached = nullptr;  // the QP attached to the group, if any
};

struct CmId {
  rdma_cm_id pub{};  // first: the application's handle

  EventChannel* channel = nullptr;
  bool sync = false;          // created without a channel: calls wait for their event
  IdState state = IdState::kIdle;
  Device* dev = nullptr;      // the device of its address, once known
  std::vector<std::pair<Device*, int>> bindings;  // (device, binding in its port table)
  uint16_t port = 0;          // bound port, host order
  uint16_t sid_ps = 0;        // the port space of its service IDs: pub.ps, or what an AF_IB address selected
  bool reuse_addr = false;
  int backlog = 0;
  int outstanding_events = 0;  // queued or handed out, not yet acked
  bool reported = false;       // its CONNECT_REQUEST was handed out
  bool sidr_passive = false;   // made by a SIDR_REQ: answered with a SIDR_REP (kept in last_mad)
  CmId* listener = nullptr;    // passive ids until their request is handed out
  ibv_sa_path_rec path{};

  // Connection.
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint64_t remote_ca_guid = 0;
  uint32_t remote_qpn = 0;
  uint32_t local_psn = 0;
  uint32_t remote_psn = 0;
  uint8_t responder_resources = 0;  // reads the peer may have outstanding at us
  uint8_t initiator_depth = 0;      // reads we may have outstanding at the peer
  uint8_t retry_count = 7;
  uint8_t rnr_retry_count = 7;
  uint8_t path_mtu = IBV_MTU_1024;
  uint8_t ack_timeout = 18;
  uint32_t conn_qp_num = 0;         // rdma_conn_param.qp_num when there is no QP
  MadDest peer;                     // the remote CM agent
  // A peer on our own port (same GSI table): its agent's QPN when the
  // connection began; another value in its slot later means it died.
  uint32_t peer_agent = 0;
  uint64_t tid = 0;                 // the REQ's, reused by REP and RTU
  // Enhanced connection establishment: what rdma_set_local_ece gave (an id
  // without a QP; softverbs' QPs have no vendor options, so for an id with a
  // QP it stays zero, as rdma-core's ibv_query_ece finds nothing), and what
  // the peer's REQ or REP carried (vendor ID, AttributeModifier options).
  ibv_ece local_ece{};
  ibv_ece remote_ece{};
  bool own_cqs = false;             // rdma_create_qp made the CQs (and their channels)
  // rdma_create_ep on a passive endpoint: the QP each request gets.
  bool ep_has_qp = false;
  ibv_qp_init_attr ep_qp_attr{};
  ibv_pd* ep_pd = nullptr;

  // The last MAD sent that expects an answer, resent on timeout.
  uint8_t last_mad[wire::cm::kMadBytes]{};
  uint64_t deadline_ns = 0;  // 0: no timer
  // The peer's DISCONNECTED, held until this time at most (held_disconnect.h);
  // 0: none held. The QP's send and receive CQs' producer counts at its DREQ.
  uint64_t disconnect_held_until_ns = 0;
  uint64_t held_cq_marks[2] = {};
  uint64_t timeout_ns = 0;
  int retries_left = 0;
  std::vector<McastJoin> mcasts;
  rdma_cm_event* sync_event = nullptr;  // sync mode: the last event, acked at the next call
};

inline CmId* from_pub(rdma_cm_id* id) { return reinterpret_cast<CmId*>(id); }

}  // namespace softverbs::cm
