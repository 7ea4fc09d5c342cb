#include "wire/bth.h"

#include <cstring>

namespace softverbs::wire {

void Bth::encode(uint8_t* out) const {
  std::memset(out, 0, kBytes);  // reserved bits (resv6, resv7) go out as 0
  OpcodeField::set(out, static_cast<uint8_t>(opcode));
  SolicitedField::set(out, solicited);
  MigReqField::set(out, mig_req);
  PadCountField::set(out, pad_count);
  TverField::set(out, tver);
  PkeyField::set(out, pkey);
  FecnField::set(out, fecn);
  BecnField::set(out, becn);
  DestQpField::set(out, dest_qp);
  AckReqField::set(out, ack_req);
  PsnField::set(out, psn.value());
}

Bth Bth::decode(const uint8_t* in) {
  Bth b;
  b.opcode = static_cast<Opcode>(OpcodeField::get(in));
  b.solicited = SolicitedField::get(in) != 0;
  b.mig_req = MigReqField::get(in) != 0;
  b.pad_count = PadCountField::get(in);
  b.tver = TverField::get(in);
  b.pkey = PkeyField::get(in);
  b.fecn = FecnField::get(in) != 0;
  b.becn = BecnField::get(in) != 0;
  b.dest_qp = DestQpField::get(in);
  b.ack_req = AckReqField::get(in) != 0;
  b.psn = Psn(PsnField::get(in));
  return b;
}

}  // namespace softverbs::wire
