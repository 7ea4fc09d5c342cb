// The send queue of one QP: process-local WQE storage.
//
// Datapath: no allocation after creation. Indices only grow; a WQE's slot is
// reused once the completer has moved past it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <infiniband/verbs.h>

#include <memory>
#include <new>

#include "shm/objects.h"

namespace softverbs::transport {

struct SendWqe {
  uint64_t wr_id;
  uint32_t opcode;       // enum ibv_wr_opcode
  uint32_t send_flags;   // enum ibv_send_flags
  uint32_t num_sge;
  uint32_t inline_len;   // with IBV_SEND_INLINE: the data follows instead of SGEs
  uint64_t length;       // payload bytes (READ: bytes to read; atomic: 8)
  uint64_t remote_addr;  // BIND_MW: the window's start, in its MR's addresses
  uint32_t rkey;         // BIND_MW: the window's new R_Key; LOCAL_INV: the R_Key to invalidate
  uint32_t imm_data;     // network byte order; SEND_WITH_INV: the R_Key to invalidate
  // A bind has no atomic operands and no UD address: it keeps its own in their
  // place (bind_fields() names them) rather than widen every WQE.
  uint64_t compare_add;  // BIND_MW: the window's length
  uint64_t swap;         // BIND_MW: the MR's L_Key (0: none) << 32 | mw_access_flags
  uint32_t remote_qpn;   // UD; BIND_MW: the window's slot
  uint32_t remote_qkey;  // UD
  uint32_t remote_srqn;  // XRC: the XRC SRQ at the destination (XRCETH)
  const ibv_ah_attr* ah; // UD: the address handle's (the application keeps it until completion)
  uint32_t psn;          // first PSN, assigned when first sent
  uint32_t packets;      // PSNs it consumes
  uint32_t responses;    // packet fabrics: READ response packets / atomic ACKs received so far
  uint32_t placed;       // nonzero: carried out at post (Link::place_at_post's token)
  shm::Sge sge[];        // num_sge entries, or inline_len bytes
  uint8_t* inline_data() { return reinterpret_cast<uint8_t*>(sge); }
};

// Where a send queue's memory comes from when the application supplies it
// (a parent domain's allocator): allocate returns nullptr on failure, or
// `use_default` to decline.
struct QueueMemory {
  void* (*allocate)(void* owner, size_t size, size_t alignment) = nullptr;
  void (*release)(void* owner, void* p) = nullptr;
  void* owner = nullptr;
  void* use_default = nullptr;
};

class SendQueue {
 public:
  bool init(uint32_t max_wr, uint32_t max_sge, uint32_t max_inline, const QueueMemory* memory = nullptr) {
    capacity_ = 1;
    while (capacity_ < max_wr) capacity_ <<= 1;
    const uint32_t body = std::max<uint32_t>(max_sge * sizeof(shm::Sge), max_inline);
    stride_ = static_cast<uint32_t>((sizeof(SendWqe) + body + 63) / 64 * 64);
    max_wr_ = max_wr;
    const size_t bytes = static_cast<size_t>(capacity_) * stride_;
    if (memory != nullptr && memory->allocate != nullptr) {
      void* p = memory->allocate(memory->owner, bytes, 64);
      if (p == nullptr) return false;
      if (p != memory->use_default) {
        storage_ = Storage(static_cast<uint8_t*>(p), Release{*memory});
        return true;
      }
    }
    storage_ = Storage(new (std::nothrow) uint8_t[bytes], Release{});
    return storage_ != nullptr;
  }
  SendWqe& at(uint64_t index) { return *reinterpret_cast<SendWqe*>(&storage_[(index & (capacity_ - 1)) * stride_]); }
  const SendWqe& at(uint64_t index) const {
    return *reinterpret_cast<const SendWqe*>(&storage_[(index & (capacity_ - 1)) * stride_]);
  }
  bool full() const { return posted - done >= max_wr_; }
  uint32_t max_wr() const { return max_wr_; }

  uint64_t posted = 0;  // next index to post
  uint64_t next = 0;    // next to transmit (requester)
  uint64_t done = 0;    // oldest not completed (completer)

 private:
  // Frees with the allocator it came from (delete[] when none).
  struct Release {
    QueueMemory memory{};
    void operator()(uint8_t* p) const {
      if (memory.release != nullptr)
        memory.release(memory.owner, p);
      else
        delete[] p;
    }
  };
  using Storage = std::unique_ptr<uint8_t[], Release>;
  Storage storage_{nullptr, Release{}};
  uint32_t capacity_ = 0;
  uint32_t stride_ = 0;
  uint32_t max_wr_ = 0;
};

}  // namespace softverbs::transport
