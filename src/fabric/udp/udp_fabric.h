// The RoCEv2 fabric: IB transport packets in UDP datagrams to port 4791 of
// other hosts (IBA annex A17), byte-exact, ICRC included.
//
// One UDP socket per address of the port, bound to it; one receive thread per
// socket, blocked in poll while nothing arrives. Whoever receives runs the
// responder for requests (transport/responder.h, memory reached locally: the
// QP is ours) and the completer for responses (transport/completer.h): the receive thread, or an application
// thread that polls an empty CQ of one of our QPs (receive_now) and finds the
// socket free, which saves the wait for the receive thread to be scheduled.
// Requesters send from whatever thread posts, progresses or times out; sends
// never block.
//
// The sender knows the exact IP header that leaves the host, as the ICRC
// requires: unconnected sockets with path-MTU discovery on, so Linux sends
// IPv4 with DF set and identification 0, and the segments of one UDP GSO
// send identifications 0, 1, 2, ...; TOS, TTL, flow label and the UDP
// checksum are masked by the ICRC. The receiver checks the ICRC against the
// same reconstruction for an identification below 64 (it cannot see the
// one that came; a peer whose identifications run higher — Linux's rxe —
// fails it: see DESIGN.md).
//
// Bandwidth: a message's equal-sized packets leave as one GSO datagram
// (UDP_SEGMENT) and receive sockets take coalesced buffers (UDP_GRO), so a
// 64 KiB burst crosses the kernel as one buffer each way.
//
// One process per address receives (the first to bind it) and forwards the
// packets of other processes' QPs to them (forwarder.h); they send from
// sockets of their own.
#pragma once

#include <atomic>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "fabric/udp/fault_link.h"
#include "fabric/udp/forwarder.h"
#include "fabric/device_host.h"
#include "transport/link.h"
#include "wire/packet.h"
#include "wire/roce_udp.h"

namespace softverbs::fabric::udp {

inline constexpr size_t kMaxIbPacket = wire::kMaxPacketBytes;

class UdpFabric final : public transport::Link {
 public:
  // Binds every address of the port (its GIDs, in GID-index order) to
  // `port` and starts the receive threads; once. EADDRINUSE: another process
  // receives for this address. `local` carries datagrams to this host's own
  // GIDs (the host link).
  Status start(DeviceHost& host, const std::vector<wire::Gid>& gids, uint16_t port, transport::Link& local);

  ibv_wc_status transmit(transport::SendSide& side, transport::SendWqe& wqe, const transport::IoList& local,
                         uint32_t from_psn) override;
  bool can_transmit(const transport::SendSide& side, const transport::SendWqe& wqe) override;
  bool receive_now() override;
  bool receives_on_poll() const override { return true; }
  // Returns once no datagram that was being handled when it was called is
  // still being handled (fabric::quiesce_local_access).
  void quiesce();
  // RoCEv2 multicast is IP multicast (udp_multicast.cc): join and leave are
  // called once per QP of this process that enters or leaves the group
  // `mgid`; the first joins the IP group it maps to (as Linux's rdma_gid2ip:
  // IPv4-mapped or IPv6) on the port's interface, with a socket of its own
  // bound to the group and the device's UDP port; the last one leaves it. A datagram to the group reaches every process of the host
  // that joined, each handing it to its own QPs in the group.
  // REQUIRES: started.
  Status join(const uint8_t mgid[16]);
  void leave(const uint8_t mgid[16]);

 private:
  // Sockets a packet may leave from, picked by destination QP: the UDP
  // source port is the flow entropy of RoCEv2 (annex A17.4.3), one per QP
  // as ECMP and receive-side scaling expect.
  static constexpr size_t kTxSockets = 8;
  struct Endpoint {
    int fd = -1;      // sends (tx_fd[0])
    wire::IpVersion version = wire::IpVersion::kV4;
    wire::Gid gid{};
    uint16_t port = 0;  // fd's port
    int tx_fd[kTxSockets] = {};
    uint16_t tx_port[kTxSockets] = {};
  };
  // Which of an endpoint's sockets the packet `ib` leaves from.
  static size_t tx_socket_of(std::span<const uint8_t> ib);
  struct Peer {
    wire::Gid gid{};
    uint16_t port = 0;
  };

  // Receiving for one endpoint. The lock is taken before datagrams are read
  // and held until they are handled, so that one socket's packets are
  // handled in the order they came, whichever thread reads them.
  static constexpr unsigned kRxBatch = 16;
  // One read: a datagram, or a UDP_GRO buffer of up to 64 KiB of them.
  static constexpr size_t kRxBufferBytes = 65536;
  struct Receiver {
    std::mutex mu;
    // Bound to the device's port; -1 while another process receives for the address.
    std::atomic<int> fd{-1};
    std::unique_ptr<uint8_t[]> buffers;  // kRxBatch reads; under mu
  };

  void receive_loop(size_t endpoint);
  // REQUIRES: receivers_[endpoint].mu held. Reads and handles what the socket
  // has, up to one batch, without waiting: how many datagrams, or -errno.
  int receive_batch(size_t endpoint);
  void on_datagram(const Endpoint& ep, const Peer& from, std::span<const uint8_t> ib, bool may_forward);
  void take_over_ports();
  // `to`: the address it came to (a GID of ep, or a multicast group).
  void on_request(const Endpoint& ep, const wire::Gid& to, const Peer& from, uint32_t qp_slot,
                  const wire::PacketView& v);
  void on_response(const Peer& from, uint32_t qp_slot, const wire::PacketView& v);

  // Fills in the ICRC of `ib` (BTH .. ICRC slot) and sends it to `to`,
  // through the FaultLink when there is one.
  // `tc`: the IP header's DSCP/ECN byte (the path's GRH traffic class).
  void send(const Endpoint& ep, const wire::Gid& to, std::span<uint8_t> ib, uint8_t tc);
  // Packets of one message (one destination QP): one sendmmsg, runs of
  // equal-sized packets in it as GSO sends; through the FaultLink when there
  // is one.
  void send_many(const Endpoint& ep, const wire::Gid& to, std::span<const std::span<uint8_t>> packets, uint8_t tc);
  // The sendmmsg of send_many. `sealed`: the ICRCs are there already, for
  // identification 0 (the FaultLink's packets).
  void send_runs(const Endpoint& ep, const wire::Gid& to, std::span<const std::span<uint8_t>> packets, bool sealed,
                 uint8_t tc);
  // Fills in the ICRC, for an IPv4 identification `ipv4_id` (a GSO segment's index).
  bool seal(const Endpoint& ep, const wire::Gid& to, std::span<uint8_t> ib, uint16_t ipv4_id = 0);
  void send_raw(const Endpoint& ep, const wire::Gid& to, std::span<const uint8_t> datagram, uint8_t tc);
  bool icrc_ok(const Endpoint& ep, const wire::Gid& to, const Peer& from, std::span<const uint8_t> ib) const;
  const Endpoint* endpoint_for(uint8_t sgid_index) const;

  // Multicast groups this process joined (udp_multicast.cc).
  struct McastSocket {
    wire::Gid mgid{};
    size_t endpoint = 0;  // the one whose interface joined
    int fd = -1;
    uint32_t qps = 0;     // this process's QPs in the group
  };
  void multicast_loop();
  void on_multicast_datagram(const Endpoint& ep, const wire::Gid& mgid, const Peer& from,
                             std::span<const uint8_t> ib);

  std::mutex mcast_mu_;
  std::vector<McastSocket> mcast_;   // guarded by mcast_mu_
  std::vector<int> mcast_closing_;   // left: closed by the multicast thread, which may be reading them
  int mcast_wake_ = -1;              // eventfd: mcast_ changed; guarded by mcast_mu_

  std::mutex start_mu_;
  bool started_ = false;
  DeviceHost* host_ = nullptr;
  transport::Link* local_ = nullptr;
  std::vector<Endpoint> endpoints_;
  std::unique_ptr<Receiver[]> receivers_;  // one per endpoint
  uint16_t dst_port_ = wire::kRoceV2Port;
  // Runs of equal-sized packets leave as GSO datagrams: until the kernel
  // refuses one, or SOFTVERBS_ROCE_GSO=0.
  std::atomic<bool> gso_{true};
  // Whether QPs measure their round trip, which turns their tail-loss
  // probes on (transport/round_trip.h); SOFTVERBS_ROCE_TLP=0 turns them off.
  bool tail_probe_ = true;
  std::unique_ptr<FaultLink> faults_;  // SOFTVERBS_FAULTS only
  Forwarder forwarder_;
};

UdpFabric& udp_fabric();

}  // namespace softverbs::fabric::udp
