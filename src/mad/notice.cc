#include "mad/notice.h"

namespace softverbs::mad {
namespace {

constexpr uint8_t kSmaClassVersion = 1;

bool is_smp(const uint8_t* mad) {
  const uint8_t klass = MgmtClass::get(mad);
  return klass == static_cast<uint8_t>(MgmtClassId::kSubnLidRouted) ||
         klass == static_cast<uint8_t>(MgmtClassId::kSubnDirectedRoute);
}

}  // namespace

Trap link_state_change_trap(uint16_t switch_lid, uint16_t sm_lid, uint8_t sm_sl, uint64_t m_key, uint32_t tid) {
  Trap t;
  t.dlid = sm_lid;
  t.slid = switch_lid;
  t.sl = sm_sl;
  uint8_t* m = t.mad;
  BaseVersion::set(m, kMadBaseVersion);
  MgmtClass::set(m, static_cast<uint8_t>(MgmtClassId::kSubnLidRouted));
  ClassVersion::set(m, kSmaClassVersion);
  Method::set(m, static_cast<uint8_t>(MethodId::kTrap));
  TransactionId::set(m, tid);
  AttributeId::set(m, kNoticeAttr);
  SmpMKey::set(m, m_key);
  uint8_t* d = m + kSmpDataOffset;
  notice::IsGeneric::set(d, 1);
  notice::Type::set(d, static_cast<uint8_t>(NoticeType::kUrgent));
  notice::ProducerType::set(d, static_cast<uint32_t>(ProducerType::kSwitch));
  notice::TrapNumber::set(d, kTrapLinkStateChange);
  notice::IssuerLid::set(d, switch_lid);
  notice::Trap128SwitchLid::set(d, switch_lid);
  return t;
}

bool is_smp_trap(const uint8_t* mad) {
  return is_smp(mad) && ResponseBit::get(mad) == 0 && Method::get(mad) == static_cast<uint8_t>(MethodId::kTrap);
}

bool is_smp_trap_repress(const uint8_t* mad) {
  return is_smp(mad) && Method::get(mad) == static_cast<uint8_t>(MethodId::kTrapRepress);
}

}  // namespace softverbs::mad
