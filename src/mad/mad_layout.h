// Where the fields of a management datagram sit (IBA 13.4 and 14.2.1): the
// common MAD header, the subnet management packet (LID-routed and directed
// route) and the general services (GSI) layout. Descriptors only, in the
// style of src/wire: the agents read and write bytes through them and never
// through host-endian structs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/field.h"
#include "wire/mad_header.h"

namespace softverbs::mad {

using wire::BeField;
using wire::Field;

inline constexpr size_t kMadBytes = wire::mad_header::kMadBytes;

// IBA 13.4.2 common MAD header (wire/mad_header.h).
using wire::mad_header::AttributeId;
using wire::mad_header::AttributeModifier;
using wire::mad_header::BaseVersion;
using wire::mad_header::ClassSpecific;
using wire::mad_header::ClassVersion;
using wire::mad_header::Method;
using wire::mad_header::MgmtClass;
using wire::mad_header::ResponseBit;
using wire::mad_header::Status;
using wire::mad_header::TransactionId;

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
