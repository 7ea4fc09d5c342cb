// Traps an SMA sends to its subnet manager (IBA 14.2.5.1 Notices and
// Traps, 13.4.8.2 Notice attribute): a SubnTrap(Notice) SMP, LID-routed to
// the port's MasterSMLID on its MasterSMSL. Pure functions over bytes, in
// the style of mad/sma.h; who carries the SMP to the SM's agent is the
// caller's (libibumad: src/abi/ibumad/ports.cc).
//
// Repeats: an SMA repeats a trap until the SM answers TrapRepress. Here a
// trap is sent once, by the process whose Set raised it, and a TrapRepress
// that reaches a node is taken without an answer and stops nothing (there is
// no daemon to repeat from; opensm takes a single trap as it takes the first
// of a series).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mad/mad_layout.h"

namespace softverbs::mad {

inline constexpr uint16_t kNoticeAttr = 0x0002;

// IBA 13.4.8.2, relative to the SMP's data (MAD byte 64). The SMP carries
// the first 64 bytes of the 80-byte attribute: IssuerGID does not fit and
// is for GMP traps only.
namespace notice {
using IsGeneric = Field<0, 0, 1>;
using Type = Field<0, 1, 7>;
using ProducerType = BeField<1, 3>;  // generic; VendorID otherwise
using TrapNumber = BeField<4, 2>;    // generic; DeviceID otherwise
using IssuerLid = BeField<6, 2>;
using NoticeToggle = Field<8, 0, 1>;
using NoticeCount = Field<8, 1, 15>;
inline constexpr size_t kDataDetails = 10;
// Trap 128: the LID of the switch whose port changed state.
using Trap128SwitchLid = BeField<kDataDetails, 2>;
// Traps 257/258 (IBA 13.4.8.2): the offending packet's source (1) and
// destination (2) LIDs and QPs, the key it carried and its SL; the GIDs
// that follow (16 bytes each) stay 0 without a GRH.
using Trap257Lid1 = BeField<kDataDetails + 2, 2>;
using Trap257Lid2 = BeField<kDataDetails + 4, 2>;
using Trap257Key = BeField<kDataDetails + 6, 4>;
using Trap257Sl = Field<kDataDetails + 10, 0, 4>;
using Trap257Qp1 = BeField<kDataDetails + 11, 3>;
using Trap257Qp2 = BeField<kDataDetails + 15, 3>;
}  // namespace notice

enum class NoticeType : uint8_t { kFatal = 0, kUrgent = 1, kSecurity = 2, kSubnetManagement = 3, kInfo = 4 };
enum class ProducerType : uint32_t { kCa = 1, kSwitch = 2, kRouter = 3, kSubnetManagement = 4 };
inline constexpr uint16_t kTrapLinkStateChange = 128;
inline constexpr uint16_t kTrapBadPKey = 257;

// A trap ready to leave its node: the SMP and where it is addressed.
struct Trap {
  uint16_t dlid = 0;    // the SM's LID (PortInfo:MasterSMLID)
  uint16_t slid = 0;    // the issuer's LID, the source the SM answers
  uint8_t sl = 0;       // PortInfo:MasterSMSL
  uint8_t mad[kMadBytes] = {};
};

// What one MAD's handling raised, for the caller to send after it. Two:
// a link between two switches changes state at both ends.
struct RaisedTraps {
  static constexpr unsigned kMax = 2;
  unsigned count = 0;
  Trap traps[kMax];
  Trap* add() { return count < kMax ? &traps[count++] : nullptr; }
};

// Trap 128 (Link State Change, Urgent, producer Switch) from the switch
// whose port 0 has `switch_lid`, addressed to the SM at `sm_lid`/`sm_sl`.
// `m_key` is the switch's (IBA 14.2.4: a trap carries the port's M_Key).
// The TID's upper half is 0: it names no agent, so a TrapRepress for it
// goes to no process (mad/user_agent.h).
Trap link_state_change_trap(uint16_t switch_lid, uint16_t sm_lid, uint8_t sm_sl, uint64_t m_key, uint32_t tid);

// What a port saw of a packet it dropped for its P_Key.
struct BadPKey {
  uint16_t lid1 = 0;  // the packet's source
  uint16_t lid2 = 0;  // its destination: the port
  uint16_t pkey = 0;  // what it carried
  uint8_t sl = 0;
  uint32_t qp1 = 0;
  uint32_t qp2 = 0;
};

// Trap 257 (Bad P_Key, Security, producer CA) from the CA port at
// `port_lid`, to the SM at `sm_lid`/`sm_sl`; the TID's upper half is 0, as
// for trap 128.
Trap bad_pkey_trap(uint16_t port_lid, uint16_t sm_lid, uint8_t sm_sl, const BadPKey& bad, uint32_t tid);

// Whether `mad` is a SubnTrap or SubnTrapRepress SMP (either routing).
bool is_smp_trap(const uint8_t* mad);
bool is_smp_trap_repress(const uint8_t* mad);

}  // namespace softverbs::mad
