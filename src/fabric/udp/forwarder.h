// Forwarder: how several processes share one RoCE address. One process binds
// UDP 4791 on the address and receives for everybody; a packet whose
// destination QP belongs to another process of the device goes to that
// process over a Unix SOCK_SEQPACKET connection (abstract name per device and
// process), with the address it came from, and is handled there as if it had
// arrived on its own socket (ICRC included). The others send from their own
// UDP sockets (same address, another port: the ICRC covers the real header).
//
// No daemon: the receiving process is whichever bound first; when it goes,
// another takes the port over on its next idle tick (`on_idle`, every 200 ms
// while some address is not ours). Cost, for the processes that do not own
// the port: one more copy and two syscalls per packet received, and packets
// lost while nobody owns the port (RC retransmits them).
//
// SEQPACKET rather than datagrams: a connected pair is bounded by its buffer
// bytes, not by net.unix.max_dgram_qlen (10 datagrams by default), and keeps
// packet boundaries.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>

#include "shm/limits.h"
#include "shm/objects.h"
#include "wire/roce_udp.h"

namespace softverbs::fabric::udp {

class Forwarder {
 public:
  // One packet forwarded to us: which of our endpoints (GID index) it came
  // to, and from where.
  using Deliver = std::function<void(uint8_t endpoint, const wire::Gid& from, uint16_t from_port,
                                     std::span<const uint8_t> ib)>;

  // Listens as `self` of the device named by `device_path`, and starts the
  // thread that receives forwarded packets and calls `on_idle` once a second
  // when nothing arrives. Once.
  [[nodiscard]] int start(const std::string& device_path, shm::OwnerId self, Deliver deliver,
                          std::function<void()> on_idle);

  // Sends a packet to the process `to`; false if it cannot take it (gone,
  // full): the packet is lost, as on a wire.
  bool forward(shm::OwnerId to, uint8_t endpoint, const wire::Gid& from, uint16_t from_port,
               std::span<const uint8_t> ib);

 private:
  void receive_loop();
  std::string name_of(shm::OwnerId who) const;

  std::string prefix_;
  int listen_fd_ = -1;
  Deliver deliver_;
  std::function<void()> on_idle_;
  std::mutex out_mu_;
  struct Out {
    uint32_t generation = 0;
    int fd = -1;
  };
  Out out_[shm::kMaxProcesses];
};

}  // namespace softverbs::fabric::udp
