// The SA's MCMemberRecord (IBA 15.2.5.17) as far as a port's processes need
// it to share one membership per group: which request joins or leaves, the
// group and port it names, and its JoinState bits. Descriptors over bytes,
// as mad_layout.h; no state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mad/mad_layout.h"

namespace softverbs::mad {

inline constexpr uint8_t kSaClass = 0x03;           // IBA 15.2.1: SubnAdm
inline constexpr uint16_t kMcMemberRecord = 0x0038;  // IBA 15.2.5 Table 197
inline constexpr uint8_t kSaDelete = 0x15;          // SubnAdmDelete; its answer is 0x95 (DeleteResp)

// IBA 15.2.1.1: the SA header (RMPP, SM_Key, AttributeOffset, ComponentMask)
// takes the first 56 bytes after the common header; the record follows.
inline constexpr size_t kSaRecordOffset = 56;
inline constexpr size_t kMcmMgidOffset = kSaRecordOffset + 0;
inline constexpr size_t kMcmPortGidOffset = kSaRecordOffset + 16;
// Scope:4 JoinState:4 at record byte 48; bit 0 FullMember, 1 NonMember,
// 2 SendOnlyNonMember (3 SendOnlyFullMember, IBA 1.3).
using McmJoinState = Field<kSaRecordOffset + 48, 4, 4>;

enum class McmChange : uint8_t { kNone, kJoin, kLeave };

// Whether the MAD asks the SA to join (Set) or leave (Delete) a group.
inline McmChange mcmember_change(const uint8_t* mad) {
  if (MgmtClass::get(mad) != kSaClass || AttributeId::get(mad) != kMcMemberRecord || ResponseBit::get(mad) != 0)
    return McmChange::kNone;
  const auto method = static_cast<uint8_t>(Method::get(mad));
  if (method == static_cast<uint8_t>(MethodId::kSet)) return McmChange::kJoin;
  if (method == kSaDelete) return McmChange::kLeave;
  return McmChange::kNone;
}

}  // namespace softverbs::mad
