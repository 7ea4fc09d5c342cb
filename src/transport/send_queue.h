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
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t imm_data;     // network byte order
  uint64_t compare_add;
  uint64_t swap;
  uint32_t remote_qpn;   // UD
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

class SendQueue {
 public:
  bool init(uint32_t max_wr, uint32_t max_sge, uint32_t max_inline) {
    capacity_ = 1;
    while (capacity_ < max_wr) capacity_ <<= 1;
    const uint32_t body = std::max<uint32_t>(max_sge * sizeof(shm::Sge), max_inline);
    stride_ = static_cast<uint32_t>((sizeof(SendWqe) + body + 63) / 64 * 64);
    storage_.reset(new (std::nothrow) uint8_t[static_cast<size_t>(capacity_) * stride_]);
    max_wr_ = max_wr;
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
  std::unique_ptr<uint8_t[]> storage_;
  uint32_t capacity_ = 0;
  uint32_t stride_ = 0;
  uint32_t max_wr_ = 0;
};

}  // namespace softverbs::transport
