// The common MAD header (IBA 13.4.2/13.4.3) that every management datagram
// starts with, whatever its class: descriptors over the first 24 bytes of a
// 256-byte MAD. The CM's messages (wire/cm_mad.h) and the device's
// management agents (mad/mad_layout.h) both read and write it through these.
#pragma once

#include <cstddef>

#include "wire/field.h"

namespace softverbs::wire::mad_header {

inline constexpr size_t kMadBytes = 256;
inline constexpr size_t kHeaderBytes = 24;

using BaseVersion = BeField<0, 1>;
using MgmtClass = BeField<1, 1>;
using ClassVersion = BeField<2, 1>;
using ResponseBit = Field<3, 0, 1>;
using Method = Field<3, 1, 7>;
using Status = BeField<4, 2>;
using ClassSpecific = BeField<6, 2>;
using TransactionId = BeField<8, 8>;
using AttributeId = BeField<16, 2>;
using AttributeModifier = BeField<20, 4>;

}  // namespace softverbs::wire::mad_header
