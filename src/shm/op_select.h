// The PMA's OpCode selectors (IBA 16.1.4: PortOpRcvCounters,
// PortVLOpPackets, PortVLOpData), packed in one word of the segment header
// (SegmentHeader::op_select) so that the data path asks "is any applied?"
// with one load and one compare: byte n is attribute n's opcode, bit 24 + n
// says it is applied. 0, the boot value, applies none: every opcode counts.
#pragma once

#include <cstdint>

namespace softverbs::shm {

enum class OpSelector : unsigned { kOpRcv = 0, kVlOpPackets = 1, kVlOpData = 2 };
inline constexpr unsigned kOpSelectors = 3;

[[nodiscard]] constexpr bool op_applied(uint32_t word, OpSelector s) {
  return (word >> (24 + static_cast<unsigned>(s)) & 1) != 0;
}
[[nodiscard]] constexpr uint8_t op_code(uint32_t word, OpSelector s) {
  return static_cast<uint8_t>(word >> (8 * static_cast<unsigned>(s)));
}
[[nodiscard]] constexpr uint32_t with_op(uint32_t word, OpSelector s, uint8_t opcode) {
  const unsigned n = static_cast<unsigned>(s);
  return (word & ~(0xffu << (8 * n))) | static_cast<uint32_t>(opcode) << (8 * n) | 1u << (24 + n);
}
// Whether selector `s` of `word` is applied and names `opcode`.
[[nodiscard]] constexpr bool op_matches(uint32_t word, OpSelector s, uint8_t opcode) {
  return op_applied(word, s) && op_code(word, s) == opcode;
}

}  // namespace softverbs::shm
