// FaultLink: a misbehaving network between the UDP fabric and its sockets,
// when SOFTVERBS_FAULTS asks for one (fabric/fault/fault_injector.h does the
// deciding; this gives it a lock, a clock, destinations and a thread).
//
// Datagrams arrive from any thread that sends (posting, receive, timer
// threads); one mutex serialises them into the injector, which is the test
// mode's price, never paid when faults are off (the fabric then has no
// FaultLink at all). A datagram the injector holds back (delay, reorder)
// remembers its destination in its tag, an index into a small table of peers,
// so a corrupted bit can reach the payload but never the address. Held
// datagrams leave from a thread that sleeps until the next is due.
//
// What the injector did is mirrored into the process's port counters
// (faults_*), which `softverbs status` shows.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>

#include "fabric/fault/fault_injector.h"
#include "shm/objects.h"
#include "wire/roce_udp.h"

namespace softverbs::fabric::udp {

class FaultLink {
 public:
  // Sends one datagram for real: from endpoint `endpoint` to `to`, with
  // `tc` in the IP header's DSCP/ECN byte.
  using RawSend =
      std::function<void(size_t endpoint, const wire::Gid& to, std::span<const uint8_t> datagram, uint8_t tc)>;

  FaultLink(const fault::FaultConfig& config, RawSend raw, shm::PortCounters& counters);
  FaultLink(const FaultLink&) = delete;
  FaultLink& operator=(const FaultLink&) = delete;

  // Starts the thread that sends held datagrams when they are due; once.
  void start();

  void send(size_t endpoint, const wire::Gid& to, std::span<const uint8_t> datagram, uint8_t tc);

 private:
  class Out;
  static constexpr size_t kMaxPeers = 64;

  void release_loop();
  // A destination and the traffic class its datagrams carry.
  struct Peer {
    wire::Gid gid{};
    uint8_t tc = 0;
  };
  // The index of (to, tc) in peers_, adding it; kMaxPeers when the table is full.
  size_t peer_index(const wire::Gid& to, uint8_t tc);
  void mirror_counters();

  RawSend raw_;
  shm::PortCounters& counters_;
  std::mutex mu_;
  std::condition_variable wake_;
  fault::FaultInjector injector_;
  std::array<Peer, kMaxPeers> peers_{};
  size_t peer_count_ = 0;
};

}  // namespace softverbs::fabric::udp
