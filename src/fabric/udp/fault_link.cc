#include "fabric/udp/fault_link.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace softverbs::fabric::udp {

// The tag of a datagram: which endpoint sends it, and to which peer.
class FaultLink::Out final : public fault::Sink {
 public:
  explicit Out(FaultLink& link) : link_(link) {}
  static uint64_t tag(size_t endpoint, size_t peer) { return (uint64_t{endpoint} << 32) | peer; }
  void send(std::span<const uint8_t> datagram, uint64_t tag) override {
    const size_t peer = static_cast<uint32_t>(tag);
    if (peer >= link_.peer_count_) return;  // cannot happen: tags come from peer_index
    const size_t endpoint = static_cast<size_t>(tag >> 32);
    Batch& b = link_.batch_;
    if (link_.batching_ && b.endpoint == endpoint && b.peer == peer && datagram.size() <= wire::kMaxPacketBytes) {
      if (b.count == kBatch) link_.flush_batch();
      if (datagram.data() == b.current.data() && datagram.size() == b.current.size() && !b.current_taken) {
        // The caller's own bytes, untouched: no copy. A duplicate of them is
        // copied, since the sender rewrites each segment's ICRC in place.
        b.current_taken = true;
        b.datagrams[b.count++] = b.current;
        return;
      }
      const std::span<uint8_t> slot(b.bytes.get() + b.count * wire::kMaxPacketBytes, datagram.size());
      std::memcpy(slot.data(), datagram.data(), datagram.size());
      b.datagrams[b.count++] = slot;
      return;
    }
    link_.raw_(endpoint, link_.peers_[peer].gid, datagram, link_.peers_[peer].tc);
  }

 private:
  FaultLink& link_;
};

FaultLink::FaultLink(const fault::FaultConfig& config, RawSend raw, RawSendMany raw_many, shm::PortCounters& counters)
    : raw_(std::move(raw)), raw_many_(std::move(raw_many)), counters_(counters), injector_(config) {
  batch_.bytes = std::make_unique<uint8_t[]>(kBatch * wire::kMaxPacketBytes);
}

void FaultLink::flush_batch() {
  if (batch_.count == 0) return;
  raw_many_(batch_.endpoint, peers_[batch_.peer].gid, {batch_.datagrams.data(), batch_.count}, peers_[batch_.peer].tc);
  batch_.count = 0;
}

void FaultLink::send_many(size_t endpoint, const wire::Gid& to, std::span<const std::span<uint8_t>> datagrams,
                          uint8_t tc) {
  std::unique_lock lock(mu_);
  const size_t peer = peer_index(to, tc);
  if (peer == kMaxPeers) {
    lock.unlock();
    raw_many_(endpoint, to, datagrams, tc);  // more peers than a test has: a clean network
    return;
  }
  Out out(*this);
  const auto before = injector_.next_deadline();
  batching_ = true;
  batch_.endpoint = endpoint;
  batch_.peer = peer;
  batch_.count = 0;
  const auto now = fault::Clock::now();
  for (std::span<uint8_t> d : datagrams) {
    batch_.current = d;
    batch_.current_taken = false;
    injector_.submit(d, now, out, Out::tag(endpoint, peer));
  }
  batch_.current = {};
  flush_batch();
  batching_ = false;
  mirror_counters();
  const auto after = injector_.next_deadline();
  lock.unlock();
  if (after && (!before || *after < *before)) wake_.notify_one();
}

void FaultLink::start() {
  std::thread([this] { release_loop(); }).detach();  // lives as long as the fabric: the process
}

size_t FaultLink::peer_index(const wire::Gid& to, uint8_t tc) {
  for (size_t i = 0; i < peer_count_; ++i)
    if (peers_[i].gid == to && peers_[i].tc == tc) return i;
  if (peer_count_ == kMaxPeers) return kMaxPeers;
  peers_[peer_count_] = {to, tc};
  return peer_count_++;
}

void FaultLink::send(size_t endpoint, const wire::Gid& to, std::span<const uint8_t> datagram, uint8_t tc) {
  std::unique_lock lock(mu_);
  const size_t peer = peer_index(to, tc);
  if (peer == kMaxPeers) {
    lock.unlock();
    raw_(endpoint, to, datagram, tc);  // more peers than a test has: this one sees a clean network
    return;
  }
  Out out(*this);
  const auto before = injector_.next_deadline();
  injector_.submit(datagram, fault::Clock::now(), out, Out::tag(endpoint, peer));
  mirror_counters();
  const auto after = injector_.next_deadline();
  lock.unlock();
  if (after && (!before || *after < *before)) wake_.notify_one();
}

void FaultLink::release_loop() {
  prctl(PR_SET_NAME, "softverbs-fault");
  Out out(*this);
  std::unique_lock lock(mu_);
  for (;;) {
    const auto due = injector_.next_deadline();
    if (!due)
      wake_.wait(lock);
    else
      wake_.wait_until(lock, *due);
    injector_.release_due(fault::Clock::now(), out);
    mirror_counters();
  }
}

void FaultLink::mirror_counters() {
  const fault::FaultCounters& f = injector_.counters();
  counters_.faults_dropped.store(f.dropped.load(std::memory_order_relaxed), std::memory_order_relaxed);
  counters_.faults_duplicated.store(f.duplicated.load(std::memory_order_relaxed), std::memory_order_relaxed);
  counters_.faults_reordered.store(f.reordered.load(std::memory_order_relaxed), std::memory_order_relaxed);
  counters_.faults_corrupted.store(f.corrupted.load(std::memory_order_relaxed), std::memory_order_relaxed);
  counters_.faults_delayed.store(f.delayed.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace softverbs::fabric::udp
