// What the PMA's OpCode selectors count (shm/op_select.h, IBA 16.1.4): the
// packets the port received whose BTH opcode a selector names. The data
// path calls these only while a selector is applied (one load and one
// compare of SegmentHeader::op_select decide), so they are kept out of line.
#pragma once

#include <cstdint>

#include "shm/objects.h"
#include "transport/request.h"

namespace softverbs::transport {

// What PortRcvData counts besides an InfiniBand packet's payload: LRH, BTH
// and ICRC (the host fabric's per-SL words, shm::sl_words, count the same).
inline constexpr uint64_t kIbPacketOverhead = 8 + 12 + 4;

// A request message as the wire would carry it: a SEND or WRITE of `bytes`
// in `packets` packets of `mtu` (FIRST, MIDDLE..., LAST, or ONLY), the
// others one packet.
struct MessageShape {
  uint8_t qp_type = 0;  // IBV_QPT_*
  ReqKind kind = ReqKind::kSend;
  bool imm = false;
  bool inv = false;
  uint32_t packets = 1;
  uint64_t bytes = 0;
  uint32_t mtu = 4096;
};

// The packets of `m` whose opcode is `opcode`, and their payload bytes.
struct OpShare {
  uint64_t packets = 0;
  uint64_t bytes = 0;
};
[[nodiscard]] OpShare op_share(const MessageShape& m, uint8_t opcode);

// A message the host fabric delivered while `select` applies a selector:
// its packets that match, under the receiving QP's `sl`, each counted with
// `overhead` header bytes (LRH, BTH, ICRC) as PortRcvData counts them.
[[gnu::noinline]] void count_selected_message(shm::PortCounters& c, uint32_t select, const MessageShape& m,
                                              uint8_t sl, uint64_t overhead);

// One packet received on a packet link, of `words` 4-octet words.
[[gnu::noinline]] void count_selected_packet(shm::PortCounters& c, uint32_t select, uint8_t opcode, uint8_t sl,
                                             uint64_t words);

}  // namespace softverbs::transport
