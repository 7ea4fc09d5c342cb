#include "wire/cm_mad.h"

#include <cstring>

namespace softverbs::wire::cm {

void MadHeader::encode(uint8_t* out) const {
  std::memset(out, 0, kMadHeaderBytes);
  BaseVersionField::set(out, base_version);
  MgmtClassField::set(out, mgmt_class);
  ClassVersionField::set(out, class_version);
  ResponseField::set(out, method >> 7);
  MethodField::set(out, method);
  StatusField::set(out, status);
  ClassSpecificField::set(out, class_specific);
  TidField::set(out, tid);
  AttrIdField::set(out, attr_id);
  AttrModField::set(out, attr_mod);
}

MadHeader MadHeader::decode(const uint8_t* in) {
  MadHeader h;
  h.base_version = BaseVersionField::get(in);
  h.mgmt_class = MgmtClassField::get(in);
  h.class_version = ClassVersionField::get(in);
  h.method = static_cast<uint8_t>(ResponseField::get(in) << 7 | MethodField::get(in));
  h.status = StatusField::get(in);
  h.class_specific = ClassSpecificField::get(in);
  h.tid = TidField::get(in);
  h.attr_id = AttrIdField::get(in);
  h.attr_mod = AttrModField::get(in);
  return h;
}

namespace {

// Header first, body zeroed: every reserved byte of the message goes out 0.
template <class M>
void begin(const MadHeader& hdr, uint8_t* out) {
  MadHeader h = hdr;
  h.attr_id = static_cast<uint16_t>(M::kAttr);
  h.encode(out);
  std::memset(out + kMadHeaderBytes, 0, kMadBytes - kMadHeaderBytes);
}

template <size_t Off, size_t N>
void put_bytes(uint8_t* out, const std::array<uint8_t, N>& bytes) {
  static_assert(kMadHeaderBytes + Off + N <= kMadBytes);
  std::memcpy(out + kMadHeaderBytes + Off, bytes.data(), N);
}
template <size_t Off, size_t N>
void get_bytes(const uint8_t* in, std::array<uint8_t, N>& bytes) {
  static_assert(kMadHeaderBytes + Off + N <= kMadBytes);
  std::memcpy(bytes.data(), in + kMadHeaderBytes + Off, N);
}

// A REQ's path block: the primary at message offset 52, the alternate at 96.
template <size_t B>
struct PathFields {
  using LocalLid = CmBeField<B, 2>;
  using RemoteLid = CmBeField<B + 2, 2>;
  static constexpr size_t kLocalGid = B + 4;
  static constexpr size_t kRemoteGid = B + 20;
  using FlowLabel = CmField<B + 36, 0, 20>;
  using PacketRate = CmField<B + 39, 2, 6>;
  using TrafficClass = CmBeField<B + 40, 1>;
  using HopLimit = CmBeField<B + 41, 1>;
  using Sl = CmField<B + 42, 0, 4>;
  using SubnetLocal = CmField<B + 42, 4, 1>;
  using LocalAckTimeout = CmField<B + 43, 0, 5>;

  static void encode(const ReqPath& p, uint8_t* out) {
    LocalLid::set(out, p.local_lid);
    RemoteLid::set(out, p.remote_lid);
    put_bytes<kLocalGid>(out, p.local_gid);
    put_bytes<kRemoteGid>(out, p.remote_gid);
    FlowLabel::set(out, p.flow_label);
    PacketRate::set(out, p.packet_rate);
    TrafficClass::set(out, p.traffic_class);
    HopLimit::set(out, p.hop_limit);
    Sl::set(out, p.sl);
    SubnetLocal::set(out, p.subnet_local);
    LocalAckTimeout::set(out, p.local_ack_timeout);
  }
  static ReqPath decode(const uint8_t* in) {
    ReqPath p;
    p.local_lid = LocalLid::get(in);
    p.remote_lid = RemoteLid::get(in);
    get_bytes<kLocalGid>(in, p.local_gid);
    get_bytes<kRemoteGid>(in, p.remote_gid);
    p.flow_label = FlowLabel::get(in);
    p.packet_rate = PacketRate::get(in);
    p.traffic_class = TrafficClass::get(in);
    p.hop_limit = HopLimit::get(in);
    p.sl = Sl::get(in);
    p.subnet_local = SubnetLocal::get(in) != 0;
    p.local_ack_timeout = LocalAckTimeout::get(in);
    return p;
  }
};
using PrimaryPath = PathFields<52>;
using AlternatePath = PathFields<96>;
static_assert(AlternatePath::LocalAckTimeout::kEnd == kMadHeaderBytes + 140);

namespace req {
using LocalCommId = CmBeField<0, 4>;
using VendorId = CmField<5, 0, 24>;
using ServiceId = CmBeField<8, 8>;
using LocalCaGuid = CmBeField<16, 8>;
using LocalQkey = CmBeField<28, 4>;
using LocalQpn = CmField<32, 0, 24>;
using ResponderResources = CmBeField<35, 1>;
using LocalEecn = CmField<36, 0, 24>;
using InitiatorDepth = CmBeField<39, 1>;
using RemoteEecn = CmField<40, 0, 24>;
using RemoteCmResponseTimeout = CmField<43, 0, 5>;
using TransportServiceType = CmField<43, 5, 2>;
using EndToEndFlowControl = CmField<43, 7, 1>;
using StartingPsn = CmField<44, 0, 24>;
using LocalCmResponseTimeout = CmField<47, 0, 5>;
using RetryCount = CmField<47, 5, 3>;
using Pkey = CmBeField<48, 2>;
using PathMtu = CmField<50, 0, 4>;
using RdcExists = CmField<50, 4, 1>;
using RnrRetryCount = CmField<50, 5, 3>;
using MaxCmRetries = CmField<51, 0, 4>;
using Srq = CmField<51, 4, 1>;
using ExtendedTransportType = CmField<51, 5, 3>;
constexpr size_t kPrivate = 140;
}  // namespace req

namespace rep {
using LocalCommId = CmBeField<0, 4>;
using RemoteCommId = CmBeField<4, 4>;
using LocalQkey = CmBeField<8, 4>;
using LocalQpn = CmField<12, 0, 24>;
using VendorIdHigh = CmBeField<15, 1>;
using LocalEecn = CmField<16, 0, 24>;
using VendorIdMid = CmBeField<19, 1>;
using StartingPsn = CmField<20, 0, 24>;
using VendorIdLow = CmBeField<23, 1>;
using ResponderResources = CmBeField<24, 1>;
using InitiatorDepth = CmBeField<25, 1>;
using TargetAckDelay = CmField<26, 0, 5>;
using FailoverAccepted = CmField<26, 5, 2>;
using EndToEndFlowControl = CmField<26, 7, 1>;
using RnrRetryCount = CmField<27, 0, 3>;
using Srq = CmField<27, 3, 1>;
using LocalCaGuid = CmBeField<28, 8>;
constexpr size_t kPrivate = 36;
}  // namespace rep

// MRA, REJ, RTU, DREQ and DREP all open with the two comm IDs.
using LocalCommId = CmBeField<0, 4>;
using RemoteCommId = CmBeField<4, 4>;

}  // namespace

void encode(const MadHeader& hdr, const Req& m, uint8_t* out) {
  using namespace req;
  begin<Req>(hdr, out);
  LocalCommId::set(out, m.local_comm_id);
  VendorId::set(out, m.vendor_id);
  ServiceId::set(out, m.service_id);
  LocalCaGuid::set(out, m.local_ca_guid);
  LocalQkey::set(out, m.local_qkey);
  LocalQpn::set(out, m.local_qpn);
  ResponderResources::set(out, m.responder_resources);
  LocalEecn::set(out, m.local_eecn);
  InitiatorDepth::set(out, m.initiator_depth);
  RemoteEecn::set(out, m.remote_eecn);
  RemoteCmResponseTimeout::set(out, m.remote_cm_response_timeout);
  TransportServiceType::set(out, m.transport_service_type);
  EndToEndFlowControl::set(out, m.end_to_end_flow_control);
  StartingPsn::set(out, m.starting_psn);
  LocalCmResponseTimeout::set(out, m.local_cm_response_timeout);
  RetryCount::set(out, m.retry_count);
  Pkey::set(out, m.pkey);
  PathMtu::set(out, m.path_mtu);
  RdcExists::set(out, m.rdc_exists);
  RnrRetryCount::set(out, m.rnr_retry_count);
  MaxCmRetries::set(out, m.max_cm_retries);
  Srq::set(out, m.srq);
  ExtendedTransportType::set(out, m.extended_transport_type);
  PrimaryPath::encode(m.primary, out);
  AlternatePath::encode(m.alternate, out);
  put_bytes<kPrivate>(out, m.private_data);
}

Req decode_req(const uint8_t* in) {
  using namespace req;
  Req m;
  m.local_comm_id = LocalCommId::get(in);
  m.vendor_id = VendorId::get(in);
  m.service_id = ServiceId::get(in);
  m.local_ca_guid = LocalCaGuid::get(in);
  m.local_qkey = LocalQkey::get(in);
  m.local_qpn = LocalQpn::get(in);
  m.responder_resources = ResponderResources::get(in);
  m.local_eecn = LocalEecn::get(in);
  m.initiator_depth = InitiatorDepth::get(in);
  m.remote_eecn = RemoteEecn::get(in);
  m.remote_cm_response_timeout = RemoteCmResponseTimeout::get(in);
  m.transport_service_type = TransportServiceType::get(in);
  m.end_to_end_flow_control = EndToEndFlowControl::get(in) != 0;
  m.starting_psn = StartingPsn::get(in);
  m.local_cm_response_timeout = LocalCmResponseTimeout::get(in);
  m.retry_count = RetryCount::get(in);
  m.pkey = Pkey::get(in);
  m.path_mtu = PathMtu::get(in);
  m.rdc_exists = RdcExists::get(in) != 0;
  m.rnr_retry_count = RnrRetryCount::get(in);
  m.max_cm_retries = MaxCmRetries::get(in);
  m.srq = Srq::get(in) != 0;
  m.extended_transport_type = ExtendedTransportType::get(in);
  m.primary = PrimaryPath::decode(in);
  m.alternate = AlternatePath::decode(in);
  get_bytes<kPrivate>(in, m.private_data);
  return m;
}

void encode(const MadHeader& hdr, const Mra& m, uint8_t* out) {
  begin<Mra>(hdr, out);
  LocalCommId::set(out, m.local_comm_id);
  RemoteCommId::set(out, m.remote_comm_id);
  CmField<8, 0, 2>::set(out, m.message_mraed);
  CmField<9, 0, 5>::set(out, m.service_timeout);
  put_bytes<10>(out, m.private_data);
}

Mra decode_mra(const uint8_t* in) {
  Mra m;
  m.local_comm_id = LocalCommId::get(in);
  m.remote_comm_id = RemoteCommId::get(in);
  m.message_mraed = CmField<8, 0, 2>::get(in);
  m.service_timeout = CmField<9, 0, 5>::get(in);
  get_bytes<10>(in, m.private_data);
  return m;
}

void encode(const MadHeader& hdr, const Rej& m, uint8_t* out) {
  begin<Rej>(hdr, out);
  LocalCommId::set(out, m.local_comm_id);
  RemoteCommId::set(out, m.remote_comm_id);
  CmField<8, 0, 2>::set(out, m.message_rejected);
  CmField<9, 0, 7>::set(out, m.ari_length);
  CmBeField<10, 2>::set(out, m.reason);
  put_bytes<12>(out, m.ari);
  put_bytes<84>(out, m.private_data);
}

Rej decode_rej(const uint8_t* in) {
  Rej m;
  m.local_comm_id = LocalCommId::get(in);
  m.remote_comm_id = RemoteCommId::get(in);
  m.message_rejected = CmField<8, 0, 2>::get(in);
  m.ari_length = CmField<9, 0, 7>::get(in);
  m.reason = CmBeField<10, 2>::get(in);
  get_bytes<12>(in, m.ari);
  get_bytes<84>(in, m.private_data);
  return m;
}

void encode(const MadHeader& hdr, const Rep& m, uint8_t* out) {
  using namespace rep;
  begin<Rep>(hdr, out);
  LocalCommId::set(out, m.local_comm_id);
  RemoteCommId::set(out, m.remote_comm_id);
  LocalQkey::set(out, m.local_qkey);
  LocalQpn::set(out, m.local_qpn);
  LocalEecn::set(out, m.local_eecn);
  StartingPsn::set(out, m.starting_psn);
  VendorIdHigh::set(out, (m.vendor_id >> 16) & 0xff);
  VendorIdMid::set(out, (m.vendor_id >> 8) & 0xff);
  VendorIdLow::set(out, m.vendor_id & 0xff);
  ResponderResources::set(out, m.responder_resources);
  InitiatorDepth::set(out, m.initiator_depth);
  TargetAckDelay::set(out, m.target_ack_delay);
  FailoverAccepted::set(out, m.failover_accepted);
  EndToEndFlowControl::set(out, m.end_to_end_flow_control);
  RnrRetryCount::set(out, m.rnr_retry_count);
  Srq::set(out, m.srq);
  LocalCaGuid::set(out, m.local_ca_guid);
  put_bytes<kPrivate>(out, m.private_data);
}

Rep decode_rep(const uint8_t* in) {
  using namespace rep;
  Rep m;
  m.local_comm_id = LocalCommId::get(in);
  m.remote_comm_id = RemoteCommId::get(in);
  m.local_qkey = LocalQkey::get(in);
  m.local_qpn = LocalQpn::get(in);
  m.local_eecn = LocalEecn::get(in);
  m.starting_psn = StartingPsn::get(in);
  m.vendor_id = uint32_t(VendorIdHigh::get(in)) << 16 | uint32_t(VendorIdMid::get(in)) << 8 | VendorIdLow::get(in);
  m.responder_resources = ResponderResources::get(in);
  m.initiator_depth = InitiatorDepth::get(in);
  m.target_ack_delay = TargetAckDelay::get(in);
  m.failover_accepted = FailoverAccepted::get(in);
  m.end_to_end_flow_control = EndToEndFlowControl::get(in) != 0;
  m.rnr_retry_count = RnrRetryCount::get(in);
  m.srq = Srq::get(in) != 0;
  m.local_ca_guid = LocalCaGuid::get(in);
  get_bytes<kPrivate>(in, m.private_data);
  return m;
}

void encode(const MadHeader& hdr, const Rtu& m, uint8_t* out) {
  begin<Rtu>(hdr, out);
  LocalCommId::set(out, m.local_comm_id);
  RemoteCommId::set(out, m.remote_comm_id);
  put_bytes<8>(out, m.private_data);
}

Rtu decode_rtu(const uint8_t* in) {
  Rtu m;
  m.local_comm_id = LocalCommId::get(in);
  m.remote_comm_id = RemoteCommId::get(in);
  get_bytes<8>(in, m.private_data);
  return m;
}

void encode(const MadHeader& hdr, const Dreq& m, uint8_t* out) {
  begin<Dreq>(hdr, out);
  LocalCommId::set(out, m.local_comm_id);
  RemoteCommId::set(out, m.remote_comm_id);
  CmField<8, 0, 24>::set(out, m.remote_qpn);
  put_bytes<12>(out, m.private_data);
}

Dreq decode_dreq(const uint8_t* in) {
  Dreq m;
  m.local_comm_id = LocalCommId::get(in);
  m.remote_comm_id = RemoteCommId::get(in);
  m.remote_qpn = CmField<8, 0, 24>::get(in);
  get_bytes<12>(in, m.private_data);
  return m;
}

void encode(const MadHeader& hdr, const Drep& m, uint8_t* out) {
  begin<Drep>(hdr, out);
  LocalCommId::set(out, m.local_comm_id);
  RemoteCommId::set(out, m.remote_comm_id);
  put_bytes<8>(out, m.private_data);
}

Drep decode_drep(const uint8_t* in) {
  Drep m;
  m.local_comm_id = LocalCommId::get(in);
  m.remote_comm_id = RemoteCommId::get(in);
  get_bytes<8>(in, m.private_data);
  return m;
}

void encode(const MadHeader& hdr, const SidrReq& m, uint8_t* out) {
  begin<SidrReq>(hdr, out);
  CmBeField<0, 4>::set(out, m.request_id);
  CmBeField<4, 2>::set(out, m.pkey);
  CmBeField<8, 8>::set(out, m.service_id);
  put_bytes<16>(out, m.private_data);
}

SidrReq decode_sidr_req(const uint8_t* in) {
  SidrReq m;
  m.request_id = CmBeField<0, 4>::get(in);
  m.pkey = CmBeField<4, 2>::get(in);
  m.service_id = CmBeField<8, 8>::get(in);
  get_bytes<16>(in, m.private_data);
  return m;
}

void encode(const MadHeader& hdr, const SidrRep& m, uint8_t* out) {
  begin<SidrRep>(hdr, out);
  CmBeField<0, 4>::set(out, m.request_id);
  CmBeField<4, 1>::set(out, m.status);
  CmBeField<5, 1>::set(out, m.add_info_length);
  // Linux writes (vendor_id >> 8) & 0xff into the 16-bit half: the same
  // bytes for every vendor ID below 2^16 (all of IEEE's OUIs in use here).
  CmBeField<6, 2>::set(out, (m.vendor_id >> 8) & 0xffff);
  CmField<8, 0, 24>::set(out, m.qpn);
  CmBeField<11, 1>::set(out, m.vendor_id & 0xff);
  CmBeField<12, 8>::set(out, m.service_id);
  CmBeField<20, 4>::set(out, m.qkey);
  put_bytes<24>(out, m.add_info);
  put_bytes<96>(out, m.private_data);
}

SidrRep decode_sidr_rep(const uint8_t* in) {
  SidrRep m;
  m.request_id = CmBeField<0, 4>::get(in);
  m.status = CmBeField<4, 1>::get(in);
  m.add_info_length = CmBeField<5, 1>::get(in);
  m.vendor_id = uint32_t(CmBeField<6, 2>::get(in)) << 8 | CmBeField<11, 1>::get(in);
  m.qpn = CmField<8, 0, 24>::get(in);
  m.service_id = CmBeField<12, 8>::get(in);
  m.qkey = CmBeField<20, 4>::get(in);
  get_bytes<24>(in, m.add_info);
  get_bytes<96>(in, m.private_data);
  return m;
}

}  // namespace softverbs::wire::cm
