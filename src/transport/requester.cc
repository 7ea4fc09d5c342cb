#include "transport/requester.h"
#include "transport/mtu.h"

#include "fabric/fabric.h"
#include "transport/completer.h"
#include "transport/packet_completer.h"
#include "transport/wr_opcode_table.h"
#include "util/time.h"
#include "wire/psn.h"

namespace softverbs::transport {
namespace {



// PSNs a message consumes: one per MTU-sized packet, at least one (IBA 9.7.1).
uint32_t packets_of(const SendWqe& w, uint8_t path_mtu) {
  const WrOpcodeInfo* op = wr_opcode(w.opcode);
  if (op == nullptr || op->kind == ReqKind::kCmpSwap || op->kind == ReqKind::kFetchAdd) return 1;
  const uint64_t mtu = mtu_bytes(path_mtu);
  const uint64_t n = (w.length + mtu - 1) / mtu;
  return n == 0 ? 1 : static_cast<uint32_t>(n);
}

}  // namespace

void progress(SendSide& s) {
  while (s.sq.next != s.sq.posted) {
    const uint8_t state = s.shared->state.load(std::memory_order_acquire);
    if (state == IBV_QPS_ERR) {
      flush_send_queue(s);
      return;
    }
    // IBA 10.3.1: only RTS sends; SQD finishes nothing new; SQE waits for recovery.
    if (state != IBV_QPS_RTS || s.wait_until != 0 || s.fabric == nullptr) return;
    SendWqe& w = s.sq.at(s.sq.next);
    // IBA 10.8.3.3: a fenced WR waits until earlier READs and atomics are done.
    if ((w.send_flags & IBV_SEND_FENCE) && s.sq.done != s.sq.next) {
      bool earlier_reads = false;
      for (uint64_t i = s.sq.done; i < s.sq.next; ++i) {
        const WrOpcodeInfo* op = wr_opcode(s.sq.at(i).opcode);
        earlier_reads |= op != nullptr && op->reads_remote;
      }
      if (earlier_reads) return;
    }
    if (!s.fabric->can_transmit(s, w)) return;
    if (w.packets == 0) {
      w.packets = packets_of(w, s.path_mtu);
      w.psn = s.sq_psn;
      s.sq_psn = wire::psn_add(wire::Psn(s.sq_psn), w.packets).value();
    }
    const uint64_t index = s.sq.next++;
    std::optional<fabric::TransmitResult> r = s.fabric->transmit(s, w);
    if (r && !on_result(s, index, *r)) return;
  }
}

void on_timer(SendSide& s) {
  const uint64_t now = now_ns();
  s.timer_at = 0;
  if (s.ack_deadline != 0 && now >= s.ack_deadline) on_packet_timeout(s);
  if (s.wait_until != 0 && now >= s.wait_until) {
    s.wait_until = 0;
    if (s.ack_timeout && !on_ack_timeout(s)) return;
    progress(s);
  }
  // Deadlines still ahead get their call.
  const uint64_t next = s.ack_deadline != 0 && (s.wait_until == 0 || s.ack_deadline < s.wait_until) ? s.ack_deadline
                                                                                                   : s.wait_until;
  if (next != 0 && (s.timer_at == 0 || next < s.timer_at)) {
    s.timer_at = next;
    s.timers->arm(s, next);
  }
}

}  // namespace softverbs::transport
