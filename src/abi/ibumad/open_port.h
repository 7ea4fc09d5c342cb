// The process's open ports and their agents: what umad_open_port made, what
// the timer thread and the inbox (user_agents.h) deliver into, and the table
// that turns the tag in a request's TID back into its agent.
//
// Thread-safety: the port map and the agent table are guarded by one mutex
// inside open_port.cc; an OpenPort's agents and its `closed` flag by its
// own `mu`. Lock order: a port's `mu` may be taken alone or inside the
// map's lock, never the other way round.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "abi/ibumad/umad_abi.h"
#include "mad/mad_layout.h"
#include "mad/user_agent.h"

namespace softverbs::umad {

inline constexpr size_t kUmadHeader = sizeof(ib_user_mad);
inline constexpr size_t kRecordBytes = kUmadHeader + mad::kMadBytes;
inline constexpr uint32_t kQp1QKey = 0x80010000;

struct Agent {
  bool used = false;
  mad::AgentRegistration reg;
  uint32_t slot = 0;  // in the process's agent table (its TID tag)
};

struct OpenPort {
  int read_fd = -1;   // the program's end (constant)
  int write_fd = -1;  // ours (constant)
  uint64_t serial = 0;  // tells a port from a later one with the same fd (constant)
  std::mutex mu;
  bool closed = false;  // guarded by mu
  Agent agents[UMAD_CA_MAX_AGENTS];  // guarded by mu
  ~OpenPort();
};

std::shared_ptr<OpenPort> port_of(int fd);
// A new port for the socket pair (program's end, ours), under the map's lock.
std::shared_ptr<OpenPort> add_port(int read_fd, int write_fd);
// Takes the port out of the map (nullptr if `fd` is not one).
std::shared_ptr<OpenPort> remove_port(int fd);

// One whole record into the port; a full queue drops it (the sender then
// sees its own timeout, as on an overrun receive queue).
void deliver(OpenPort& port, const uint8_t* record, size_t bytes);

// An agent's TID tag (mad/user_agent.h) is its process's pid, then its
// slot in the process's table: pids stay below 2^22 (PID_MAX_LIMIT).
inline constexpr unsigned kSlotBits = 10;
inline constexpr uint32_t kSlots = 1u << kSlotBits;
// A free slot for the agent, or kSlots when all are taken.
uint32_t claim_slot(const std::shared_ptr<OpenPort>& port, uint32_t agent);
void release_slot(uint32_t slot);
// The port and agent a tag of this process names.
bool agent_of_tag(uint32_t tag, std::shared_ptr<OpenPort>* port, uint32_t* agent);
uint32_t tag_of_slot(uint32_t slot);
inline pid_t pid_of_tag(uint32_t tag) { return static_cast<pid_t>(tag >> kSlotBits); }

}  // namespace softverbs::umad
