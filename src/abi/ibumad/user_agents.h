// MADs between the processes that share the device's port (issue 19): a
// request for a class no agent in the device answers goes to the process
// that registered an agent for it, and the answer comes back to the
// requesting process, as the kernel's ib_umad routes them between the
// agents of one port (mad/user_agent.h has the rules).
//
// Registry: a directory beside the segment, `<segment>.agents/`, holds one
// file per process (named by its pid) listing that process's agents with a
// method mask: port fd, port serial, agent id, class, version, RMPP
// version, OUI, mask. The owner holds a shared flock on its file for life,
// so a file whose flock can be taken exclusively belongs to a dead process
// and is removed by whoever finds it; writers and readers serialise on the
// directory's `.lock` (exclusive to change a file, shared to scan).
//
// Inbox: each process that publishes an agent or sends a request to one
// binds an AF_UNIX datagram socket in the abstract namespace, named by the
// segment's path and its pid, served by one thread that hands each arriving
// record to ports.cc (deliver_request / deliver_response), which writes it
// into the open port's socket: the receiving program's umad fd becomes
// readable without it calling in. A response is addressed by the pid in the
// upper bits of its TID; a process that is gone has no socket, so the send
// fails and the requester sees its timeout.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "mad/rmpp.h"
#include "mad/user_agent.h"

namespace softverbs::umad {

// An agent of an open port, as other processes find it.
struct AgentAddress {
  pid_t pid = 0;
  int port_fd = -1;
  uint64_t port_serial = 0;
  uint32_t agent = 0;
};

// Makes the agent findable, or returns EINVAL when an agent on the port (in
// any process) already claims one of its methods. Agents without methods
// (clients that only send) are never published. Starts the inbox.
int publish_agent(const AgentAddress& at, const mad::AgentRegistration& reg);
// Removes one agent (agent >= 0) or all of a port's (agent < 0).
void withdraw_agents(int port_fd, uint64_t port_serial, int agent);

// The live agent that takes request `mad`, if any (its registration in *reg).
bool find_agent(const uint8_t* mad, AgentAddress* at, mad::AgentRegistration* reg);

// Starts this process's inbox (before a request whose answer must find it).
bool ensure_inbox();

// `record` is an ib_user_mad header followed by `send.length` bytes of MAD
// (at least kMadBytes). False when the receiving process is gone or its
// inbox stays full.
bool post_request(const AgentAddress& to, const uint8_t* record, const mad::RmppSend& send);
bool post_response(pid_t to, uint32_t hi_tid, const uint8_t* record, const mad::RmppSend& send);

// What arrives, implemented by ports.cc (called on the inbox's thread).
// `record` has room for the header and send.length bytes; the callee fills
// in the header's agent and length.
void deliver_request(int port_fd, uint64_t port_serial, uint32_t agent, uint8_t* record, const mad::RmppSend& send);
void deliver_response(uint32_t hi_tid, uint8_t* record, const mad::RmppSend& send);

// The inbox's thread carries at most this much MAD (the socket pairs and
// datagram sockets of AF_UNIX refuse much more).
inline constexpr size_t kMaxMessageBytes = 128 * 1024;

}  // namespace softverbs::umad
