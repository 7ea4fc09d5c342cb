#include "mad/notice.h"

namespace softverbs::mad {
namespace {

constexpr uint8_t kSmaClassVersion = 1;

bool is_smp(const uint8_t* mad) {
  const uint8_t klass = MgmtClass::get(mad);
  return klass == static_cast<uint8_t>(MgmtClassId::kSubnLidRouted) ||
         klass == static_cast<uint8_t>(MgmtClassId::kSubnDirectedRoute);
}

// A generic notice's SubnTrap from `issuer_lid`; its details are the caller's.
Trap generic_trap(uint16_t issuer_lid, uint16_t sm_lid, uint8_t sm_sl, uint64_t m_key, uint32_t tid, NoticeType type,
                  ProducerType producer, uint16_t number) {
  Trap t;
  t.dlid = sm_lid;
  t.slid = issuer_lid;
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
  notice::Type::set(d, static_cast<uint8_t>(type));
  notice::ProducerType::set(d, static_cast<uint32_t>(producer));
  notice::TrapNumber::set(d, number);
  notice::IssuerLid::set(d, issuer_lid);
  return t;
}

}  // namespace

Trap link_state_change_trap(uint16_t switch_lid, uint16_t sm_lid, uint8_t sm_sl, uint64_t m_key, uint32_t tid) {
  Trap t = generic_trap(switch_lid, sm_lid, sm_sl, m_key, tid, NoticeType::kUrgent, ProducerType::kSwitch,
                        kTrapLinkStateChange);
  notice::Trap128SwitchLid::set(t.mad + kSmpDataOffset, switch_lid);
  return t;
}

Trap bad_pkey_trap(uint16_t port_lid, uint16_t sm_lid, uint8_t sm_sl, const BadPKey& bad, uint32_t tid) {
  // IBA 14.2.5.1: a Security notice; the device's port holds no M_Key.
  Trap t = generic_trap(port_lid, sm_lid, sm_sl, 0, tid, NoticeType::kSecurity, ProducerType::kCa, kTrapBadPKey);
  uint8_t* d = t.mad + kSmpDataOffset;
  notice::Trap257Lid1::set(d, bad.lid1);
  notice::Trap257Lid2::set(d, bad.lid2);
  notice::Trap257Key::set(d, bad.pkey);
  notice::Trap257Sl::set(d, bad.sl & 15);
  notice::Trap257Qp1::set(d, bad.qp1 & 0xffffff);
  notice::Trap257Qp2::set(d, bad.qp2 & 0xffffff);
  return t;
}

bool is_smp_trap(const uint8_t* mad) {
  return is_smp(mad) && ResponseBit::get(mad) == 0 && Method::get(mad) == static_cast<uint8_t>(MethodId::kTrap);
}

bool is_smp_trap_repress(const uint8_t* mad) {
  return is_smp(mad) && Method::get(mad) == static_cast<uint8_t>(MethodId::kTrapRepress);
}

}  // namespace softverbs::mad
