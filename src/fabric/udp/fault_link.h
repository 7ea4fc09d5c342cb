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
#include "wire/packet.h"
#include "wire/roce_udp.h"

namespace softverbs::fabric::udp {

class FaultLink {
 public:
  // Sends one datagram for real: from endpoint `endpoint` to `to`, with
  // `tc` in the IP header's DSCP/ECN byte.
  using RawSend =
      std::function<void(size_t endpoint, const wire::Gid& to, std::span<const uint8_t> datagram, uint8_t tc)>;
  // Sends several datagrams of one message for real, in one call (GSO runs);
  // it may rewrite their bytes (the ICRC for a segment's identification).
  using RawSendMany = std::function<void(size_t endpoint, const wire::Gid& to,
                                         std::span<const std::span<uint8_t>> datagrams, uint8_t tc)>;

  FaultLink(const fault::FaultConfig& config, RawSend raw, RawSendMany raw_many, shm::PortCounters& counters);
  FaultLink(const FaultLink&) = delete;
  FaultLink& operator=(const FaultLink&) = delete;

  // Starts the thread that sends held datagrams when they are due; once.
  void start();

  void send(size_t endpoint, const wire::Gid& to, std::span<const uint8_t> datagram, uint8_t tc);
  // Datagrams of one message: each submitted on its own; those that leave
  // at once go out together through RawSendMany, in their order.
  void send_many(size_t endpoint, const wire::Gid& to, std::span<const std::span<uint8_t>> datagrams, uint8_t tc);

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

  // What send_many gathers, copied (the injector's bytes live only during
  // its call); guarded by mu_. Allocated once, at construction.
  static constexpr size_t kBatch = 64;
  struct Batch {
    size_t endpoint = 0;
    size_t peer = 0;
    size_t count = 0;
    std::unique_ptr<uint8_t[]> bytes;  // kBatch slots of wire::kMaxPacketBytes
    std::array<std::span<uint8_t>, kBatch> datagrams{};
    std::span<uint8_t> current;  // the datagram being submitted
    bool current_taken = false;  // it is in `datagrams` already
  };
  void flush_batch();  // REQUIRES: mu_ held

  RawSend raw_;
  RawSendMany raw_many_;
  Batch batch_;
  bool batching_ = false;  // guarded by mu_: send_many is gathering
  shm::PortCounters& counters_;
  std::mutex mu_;
  std::condition_variable wake_;
  fault::FaultInjector injector_;
  std::array<Peer, kMaxPeers> peers_{};
  size_t peer_count_ = 0;
};

}  // namespace softverbs::fabric::udp
