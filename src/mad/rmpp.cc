#include "mad/rmpp.h"

#include <cerrno>
#include <cstring>

namespace softverbs::mad {
namespace {

constexpr uint8_t kSubnAdm = 0x03;
constexpr uint8_t kDeviceMgmt = 0x06;
constexpr uint8_t kDeviceAdm = 0x10;
constexpr uint8_t kBis = 0x12;
constexpr size_t kSaHeaderEnd = 56;       // IB_MGMT_SA_HDR
constexpr size_t kVendorHeaderEnd = 40;   // IB_MGMT_VENDOR_HDR
constexpr size_t kDeviceHeaderEnd = 64;   // IB_MGMT_DEVICE_HDR
// Each segment's payload as PayloadLength counts it: all after the RMPP header.
constexpr size_t kSegmentPayload = kMadBytes - kRmppHeaderEnd;

bool vendor_range2(uint8_t klass) { return klass >= 0x30 && klass <= 0x4f; }

}  // namespace

bool rmpp_class(uint8_t k) {
  return k == kSubnAdm || k == kDeviceMgmt || k == kDeviceAdm || k == kBis || vendor_range2(k);
}

size_t class_header_bytes(uint8_t k) {
  if (k == kSubnAdm) return kSaHeaderEnd;
  if (vendor_range2(k)) return kVendorHeaderEnd;
  if (k == kDeviceMgmt || k == kDeviceAdm || k == kBis) return kDeviceHeaderEnd;
  return wire::mad_header::kHeaderBytes;
}

RmppSend prepare_send(uint8_t* mad, size_t len, uint8_t rmpp_version) {
  RmppSend s;
  if (len < wire::mad_header::kHeaderBytes) return {EINVAL, false, 0};
  const uint8_t klass = MgmtClass::get(mad);
  const bool rmpp_agent = rmpp_version != 0 && rmpp_class(klass);
  s.active = rmpp_agent && (RmppFlags::get(mad) & kRmppFlagActive) != 0;
  if (!s.active) {
    if (len > kMadBytes) return {EINVAL, false, 0};
    // user_mad.c copies an RMPP agent's MAD from after the RMPP header.
    if (rmpp_agent) std::memset(mad + wire::mad_header::kHeaderBytes, 0, kRmppHeaderEnd - wire::mad_header::kHeaderBytes);
    s.length = kMadBytes;
    return s;
  }
  const size_t header = class_header_bytes(klass);
  if (len < header) return {EINVAL, false, 0};
  const size_t data = len - header;
  const size_t seg_data = kMadBytes - header;
  const size_t segments = data == 0 ? 1 : (data + seg_data - 1) / seg_data;
  const size_t pad = segments * seg_data - data;
  // IBA 13.6.2.3 / mad_rmpp.c's first segment: PayloadLength counts every
  // segment's bytes after the RMPP header, less the last one's padding.
  RmppVersion::set(mad, rmpp_version);
  RmppType::set(mad, kRmppTypeData);
  RmppRespTime::set(mad, 0);
  RmppFlags::set(mad, kRmppFlagActive | kRmppFlagFirst | (segments == 1 ? kRmppFlagLast : 0));
  RmppStatus::set(mad, 0);
  RmppSegmentNumber::set(mad, 1);
  RmppPayloadLength::set(mad, segments * kSegmentPayload - pad);
  s.length = len;
  return s;
}

size_t received_length(const RmppSend& send, bool receiver_rmpp) {
  if (send.active && receiver_rmpp) return send.length;
  return send.length <= kMadBytes ? kMadBytes : 0;
}

}  // namespace softverbs::mad
