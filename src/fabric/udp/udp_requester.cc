// Requester side of the UDP fabric: a WQE's request packets (built by
// transport/request_packets.h) leave in batches, one syscall each.
#include <algorithm>

#include "fabric/fabrics.h"
#include "fabric/udp/udp_fabric.h"
#include "transport/qp_types.h"
#include "transport/request_packets.h"
#include "transport/round_trip.h"
#include "transport/wr_opcode_table.h"
#include "wire/psn.h"

namespace softverbs::fabric::udp {
namespace {

// Bytes one QP keeps unacknowledged. A burst beyond what the peer's socket
// buffer holds is dropped by its kernel, and each drop costs a NAK or a
// timeout and a go-back-N resend of everything behind it. In bytes, not
// packets: the kernel charges a buffer by the memory a packet takes.
constexpr int64_t kWindowBytes = 512 * 1024;
// On a paced link (transport/link_pacing.h) the pacer spaces the datagrams at
// no more than the link's rate, so the window no longer guards the peer's
// socket buffer; it must instead cover the round trip at the VL's share, or
// a flow gets less than its share while the arbiter keeps the rest from the
// other VLs. Two ib_write_bw flows on a paced 1X SDR link between network
// namespaces on 2 busy cores, weights 1:3: 0.42 and 0.73 of their 0.5 and
// 1.5 Gb/s with 512 KiB, their shares with this.
constexpr int64_t kPacedWindowBytes = 4096 * 1024;

}  // namespace

bool UdpFabric::can_transmit(const transport::SendSide& s, const transport::SendWqe& w) {
  const transport::WrOpcodeInfo* op = transport::wr_opcode(w.opcode);
  // A resent WQE has its PSNs already; a new one starts at the next PSN.
  const uint32_t next_psn = w.packets != 0 ? w.psn : s.requester.next_psn;
  const int32_t outstanding = wire::psn_diff(wire::Psn(next_psn), wire::Psn(s.sq.at(s.sq.done).psn));
  const uint64_t mtu = s.conn.mtu;
  const int64_t packets = op->reads_remote ? 1 : static_cast<int64_t>((w.length + mtu - 1) / mtu);
  const int64_t bytes = s.requester.path_to_port ? kPacedWindowBytes : kWindowBytes;  // vl.h: paced (or VL15)
  const int64_t window = std::max<int64_t>(16, bytes / static_cast<int64_t>(mtu));
  return outstanding + packets <= window;
}

ibv_wc_status UdpFabric::transmit(transport::SendSide& s, transport::SendWqe& w, const transport::IoList& local,
                                  uint32_t from_psn) {
  const bool ud = s.qp.qp_type == IBV_QPT_UD;
  const ibv_ah_attr& ah = ud ? *w.ah : s.conn.ah;
  // RoCE addresses are GIDs (IBA A17.4).
  if (ud && !ah.is_global) return IBV_WC_LOC_QP_OP_ERR;
  // A datagram to one of this host's own GIDs takes the host link.
  if (ud && port().gid_index(ah.grh.dgid.raw) >= 0) return local_->transmit(s, w, local, from_psn);
  const Endpoint* ep = endpoint_for(ah.grh.sgid_index);
  if (ep == nullptr) return IBV_WC_LOC_QP_OP_ERR;
  wire::Gid dst;
  std::memcpy(dst.data(), ah.grh.dgid.raw, 16);

  // A message's packets leave kBatch at a time, one syscall each batch:
  // 64 KiB at a 4096-byte MTU, one UDP GSO send (send_many).
  constexpr size_t kBatch = 16;
  uint8_t batch[kBatch][kMaxIbPacket];
  std::span<uint8_t> ready[kBatch];
  size_t queued = 0;
  // PMA PortXmitDataSL: the requests' datagrams from the BTH to the ICRC,
  // as PortXmitData counts them, under the path's SL (the AH's for UD).
  shm::PortCounters& port_counters = s.qp.notifier->port_counters();
  std::atomic<uint64_t>& sl_words = port_counters.xmit_words_sl[ah.sl & 15];
  std::atomic<uint64_t>& sl_packets = port_counters.xmit_packets_sl[ah.sl & 15];
  auto flush = [&] {
    send_many(*ep, dst, {ready, queued}, ah.grh.traffic_class);
    s.qp.shared->counters.sent_packets.fetch_add(queued, std::memory_order_relaxed);
    uint64_t bytes = 0;
    for (size_t i = 0; i < queued; ++i) bytes += ready[i].size();
    sl_words.fetch_add(bytes / 4, std::memory_order_relaxed);
    sl_packets.fetch_add(queued, std::memory_order_relaxed);
    queued = 0;
  };
  transport::RequestPackets packets(s, w, local, from_psn);
  while (!packets.done()) {
    ready[queued] = packets.next(batch[queued]);
    if (ready[queued].empty()) break;  // cannot be built: what came before it still goes
    if (++queued == kBatch) flush();
  }
  if (queued > 0) flush();
  if (transport::reliable_qp(s.qp.qp_type))
    transport::rtt_note_sent(s, wire::psn_add(wire::Psn(w.psn), static_cast<int32_t>(w.packets) - 1).value());
  return IBV_WC_SUCCESS;
}

}  // namespace softverbs::fabric::udp
