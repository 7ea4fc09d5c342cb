// The subnet management agent of the device's port (IBA 14.2): answers
// SubnGet/SubnSet of class 0x01 (LID-routed) and 0x81 (directed route)
// against a PortView. Independent of how the MAD travelled: the caller hands
// in the 256 bytes that reached the port and sends back what it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mad/port_view.h"

namespace softverbs::mad {

enum class Disposition {
  kRespond,   // `out` holds the response, to go back to the sender
  kDrop,      // nothing goes back (malformed, a response, no agent for it)
  kLeavePort, // a directed-route SMP to be forwarded out of the port
};

// IBA attribute IDs the SMA knows (14.2.5).
enum class SmpAttr : uint16_t {
  kNodeDescription = 0x0010,
  kNodeInfo = 0x0011,
  kGuidInfo = 0x0014,
  kPortInfo = 0x0015,
  kPKeyTable = 0x0016,
  kSlToVlMappingTable = 0x0017,
  kVlArbitrationTable = 0x0018,
  kSmInfo = 0x0020,
};

// What a SubnSet changed, for the caller to store (the codecs stay pure).
struct SmpEffect {
  bool qos_changed = false;
  shm::QosTables qos;  // the port's tables after the Set, when qos_changed
  // An external SM's PortInfo Set (PortView::external_sm): the port's
  // addresses and state after it.
  bool port_changed = false;
  uint16_t lid = 0;
  uint16_t sm_lid = 0;
  uint8_t port_state = 0;
  // The Set carried PortInfo:ClientReregister (IBA 14.2.5.6): the port's
  // clients are to register again (IBV_EVENT_CLIENT_REREGISTER).
  bool client_reregister = false;
  // A Set(P_KeyTable) changed the port's table (IBV_EVENT_PKEY_CHANGE).
  bool pkeys_changed = false;
  shm::PKeyTable pkeys{};
  // The subnet's other CAs whose port took a PortInfo Set carrying
  // ClientReregister (their topology node indices), for their devices'
  // contexts to hear it as the device's port's do.
  std::vector<unsigned> reregistered_ca_nodes;
};

// REQUIRES: `out` holds kMadBytes. `in` may be any length; fewer than
// kMadBytes is malformed (dropped, as the port would drop it). A Set that
// succeeds is answered as if it had been stored; `effect` (if not null)
// says what to store.
Disposition answer_smp(const PortView& port, const uint8_t* in, size_t len, uint8_t* out,
                       SmpEffect* effect = nullptr);

}  // namespace softverbs::mad
