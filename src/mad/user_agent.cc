#include "mad/user_agent.h"

#include <cerrno>

#include "mad/mad_layout.h"
#include "mad/rmpp.h"
#include "mad/sma.h"

namespace softverbs::mad {
namespace {

constexpr uint8_t kTrapRepress = 0x07;
constexpr unsigned kMaxClassVersion = 8;  // mad.c's MAX_MGMT_VERSION
constexpr uint8_t kMaxClass = 0x80;       // mad.c's MAX_MGMT_CLASS
using VendorOui = BeField<37, 3>;         // IBA 13.4.9: after the RMPP header and a reserved byte

bool vendor_range2(uint8_t klass) { return klass >= 0x30 && klass <= 0x4f; }

}  // namespace

int check_registration(const AgentRegistration& r) {
  if (r.rmpp_version > 1) return EINVAL;
  if (r.class_version >= kMaxClassVersion) return EINVAL;
  if (r.mgmt_class == 0) return EINVAL;  // reserved: the kernel aliases 0x81 to it
  if (r.mgmt_class >= kMaxClass && r.mgmt_class != static_cast<uint8_t>(MgmtClassId::kSubnDirectedRoute))
    return EINVAL;
  if (vendor_range2(r.mgmt_class) && r.oui == 0) return EINVAL;
  if (r.rmpp_version != 0 && !rmpp_class(r.mgmt_class)) return EINVAL;
  return 0;
}

bool conflicts(const AgentRegistration& a, const AgentRegistration& b) {
  if (a.mgmt_class != b.mgmt_class || a.class_version != b.class_version) return false;
  if (vendor_range2(a.mgmt_class) && a.oui != b.oui) return false;
  return ((a.method_mask[0] & b.method_mask[0]) | (a.method_mask[1] & b.method_mask[1])) != 0;
}

bool is_response(const uint8_t* mad) {
  return ResponseBit::get(mad) != 0 || Method::get(mad) == kTrapRepress;
}

bool for_user_agent(const uint8_t* mad) {
  switch (static_cast<MgmtClassId>(MgmtClass::get(mad))) {
    case MgmtClassId::kSubnLidRouted:
    case MgmtClassId::kSubnDirectedRoute:
      // The HCA's SMA takes Get and Set (and TrapRepress, a response);
      // what it leaves to the agents is what the SM registered for: SMInfo
      // and the Traps the subnet's SMAs send it (the kernel hands every SMP
      // the driver's process_mad did not consume to the registered agent).
      return AttributeId::get(mad) == static_cast<uint16_t>(SmpAttr::kSmInfo) ||
             Method::get(mad) == static_cast<uint8_t>(MethodId::kTrap);
    case MgmtClassId::kPerfMgmt:
      return false;
  }
  return true;
}

bool wants(const AgentRegistration& r, const uint8_t* mad) {
  if (is_response(mad)) return false;
  if (MgmtClass::get(mad) != r.mgmt_class || ClassVersion::get(mad) != r.class_version) return false;
  if (vendor_range2(r.mgmt_class) && VendorOui::get(mad) != r.oui) return false;
  return r.has_method(Method::get(mad));
}

}  // namespace softverbs::mad
