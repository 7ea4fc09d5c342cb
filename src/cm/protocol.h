// The CM's state machine, between the API calls (api.cc) and the agent
// thread (agent.cc). Every function REQUIRES Agent::mu held.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>

#include "cm/agent.h"
#include "cm/gsi_endpoint.h"
#include "cm/id.h"

namespace softverbs::cm {

// A MAD the device's endpoint received.
void on_mad(Device* dev, const uint8_t* mad, const MadSource& from);
// The id's deadline passed: resend, or give up with its event.
void on_timeout(CmId* id);
// Connections to processes of our own port whose process is gone end as if
// the peer had sent a DREQ (the kernel would, on its process's exit).
// True while some connection is watched.
bool check_peers();

// Queues an event for `id` on its channel (`listen`: the listener of a
// CONNECT_REQUEST). `data` is copied.
void queue_event(CmId* id, rdma_cm_event_type type, int status, const void* data = nullptr, size_t len = 0,
                 CmId* listen = nullptr);

// Queues a UD event (MULTICAST_JOIN) whose param.ud is `ud` as given: its
// private_data is the caller's pointer, not copied.
void queue_ud_event(CmId* id, rdma_cm_event_type type, const rdma_ud_param& ud);

// Sends the MAD to the id's peer and keeps it for resending.
int send_to_peer(CmId* id, const uint8_t (&mad)[wire::cm::kMadBytes], bool expect_answer);

// Moves the id's QP through RTR to RTS with what the connection agreed.
int qp_to_rts(CmId* id);
// Moves the id's QP to the error state (disconnect, reject).
void qp_to_error(CmId* id);

// The peer's DISCONNECTED that waits for the application's polls
// (held_disconnect.h) is queued now, if there is one.
void release_held_disconnect(CmId* id);
// Queues every held DISCONNECTED whose wait is over; true while some remain.
bool release_held_disconnects(uint64_t now);

// A DREQ for the id's connection, not awaited (rdma_destroy_id, exit).
void say_goodbye(CmId* id);

uint64_t now_ns();

}  // namespace softverbs::cm
