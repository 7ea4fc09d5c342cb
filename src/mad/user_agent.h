// Which userspace agent a MAD belongs to, by the rules the kernel's MAD
// layer applies to agents registered through /dev/infiniband/umadN (IBA
// 13.4; drivers/infiniband/core/mad.c, user_mad.c): a request goes to the
// agent registered for its class, class version and method (and OUI, in the
// vendor range 0x30..0x4f); a response (R bit, or TrapRepress) goes back to
// the agent that sent the request, named by the upper 32 bits of its TID.
// Pure functions over bytes and registrations; how MADs travel between
// processes is libibumad's (src/abi/ibumad/user_agents.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace softverbs::mad {

// What umad_register/umad_register_oui/umad_register2 asked for.
struct AgentRegistration {
  uint8_t mgmt_class = 0;
  uint8_t class_version = 0;
  uint8_t rmpp_version = 0;  // 1: the library reassembles RMPP messages for it
  uint32_t oui = 0;          // vendor range 2 only (0x30..0x4f)
  uint64_t method_mask[2] = {0, 0};  // bit m of the 128: method m

  bool has_method(unsigned method) const { return method < 128 && ((method_mask[method / 64] >> (method % 64)) & 1) != 0; }
  bool any_method() const { return (method_mask[0] | method_mask[1]) != 0; }
};

// 0 or the errno the kernel refuses the registration with (EINVAL): class 0,
// a class above 0x80 other than 0x81, class version 8 or more, a vendor
// range 2 class without an OUI, RMPP for a class that has none, an RMPP
// version other than 0 or 1.
int check_registration(const AgentRegistration& r);

// Whether two agents on one port claim a method of the same class, version
// (and OUI): the second registration is refused (mad.c's method_in_use).
bool conflicts(const AgentRegistration& a, const AgentRegistration& b);

// A response travels back by TID; TrapRepress answers a Trap (mad.c's
// ib_response_mad).
bool is_response(const uint8_t* mad);

// Whether a request for this port is for a userspace agent rather than the
// device's own: every class but the SMA's and the PMA's, and of the SMPs
// only SMInfo and Traps (an HCA's SMA leaves them to the SM on the port).
bool for_user_agent(const uint8_t* mad);

// Whether the request `mad` (kMadBytes or more) reaches agent `r`.
bool wants(const AgentRegistration& r, const uint8_t* mad);

// The kernel names the sending agent in the upper 32 bits of a request's
// TID (user_mad.c overwrites them) and routes the response by them.
inline uint64_t tid_for_agent(uint64_t tid, uint32_t agent) { return uint64_t{agent} << 32 | (tid & 0xffffffffu); }
inline uint32_t tid_agent(uint64_t tid) { return static_cast<uint32_t>(tid >> 32); }

}  // namespace softverbs::mad
