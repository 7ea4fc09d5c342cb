// Where the fields of a management datagram sit (IBA 13.4 and 14.2.1): the
// common MAD header, the subnet management packet (LID-routed and directed
// route) and the general services (GSI) layout. Descriptors only, in the
// style of src/wire: the agents read and write bytes through them and never
// through host-endian structs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"

namespace softverbs::mad {

using wire::BeField;
using wire::Field;

inline constexpr size_t kMadBytes = 256;

// IBA 13.4.2 common MAD header.
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

// IBA 14.2.1.2 directed-route SMP: the direction bit heads the status word,
// the hop pointer and count are the class-specific field.
using DrDirection = Field<4, 0, 1>;
using DrStatus = Field<4, 1, 15>;
using DrHopPointer = BeField<6, 1>;
using DrHopCount = BeField<7, 1>;
using SmpMKey = BeField<24, 8>;
using DrSlid = BeField<32, 2>;
using DrDlid = BeField<34, 2>;
inline constexpr size_t kSmpDataOffset = 64;
inline constexpr size_t kSmpDataBytes = 64;
inline constexpr size_t kDrInitialPathOffset = 128;
inline constexpr size_t kDrReturnPathOffset = 192;
inline constexpr unsigned kDrMaxHops = 63;

// IBA 13.4.3: a GSI class's data follows 40 reserved bytes.
inline constexpr size_t kGsiDataOffset = 64;
inline constexpr size_t kGsiDataBytes = 192;

inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint16_t kPermissiveLid = 0xffff;

enum class MgmtClassId : uint8_t {
  kSubnLidRouted = 0x01,
  kSubnDirectedRoute = 0x81,
  kPerfMgmt = 0x04,
};

enum class MethodId : uint8_t {
  kGet = 0x01,
  kSet = 0x02,
  kGetResp = 0x81,
  kTrap = 0x05,
  kTrapRepress = 0x07,
};

// IBA 13.4.7 MAD status, the class-independent codes.
enum class MadStatus : uint16_t {
  kOk = 0x0000,
  kBadVersion = 0x0004,          // base or class version not supported
  kMethodUnsupported = 0x0008,
  kAttributeUnsupported = 0x000c,  // attribute or method/attribute combination
  kInvalidField = 0x001c,        // attribute value or modifier invalid
};

}  // namespace softverbs::mad
