// One request packet as the responder sees it, whatever fabric carried it,
// and the responder's answer.
//
// The UDP fabric fills a Request from a parsed packet (one per packet, with
// first/last from the opcode table); the host fabric from a whole send WQE,
// as one "only" packet of any length.
#pragma once

#include <cstdint>

#include "transport/iov.h"
#include "wire/aeth.h"

namespace softverbs::transport {

// kAtomicWrite (IBA 1.5 ATOMIC WRITE): a WRITE ONLY's RETH and eight bytes,
// placed as one 64-bit store; like a READ or an atomic it takes a responder
// resource, and a READ response answers it. kFlush (IBA 1.5 FLUSH) likewise,
// with a FETH and no data: only ever received (no verb posts one).
enum class ReqKind : uint8_t { kSend, kWrite, kRead, kCmpSwap, kFetchAdd, kAtomicWrite, kFlush };

struct Request {
  ReqKind kind = ReqKind::kSend;
  bool first = true;        // first or only packet of the message
  bool last = true;         // last or only packet of the message
  bool has_imm = false;
  bool solicited = false;   // BTH.SE
  uint32_t psn = 0;
  uint32_t dest_qpn = 0;
  uint32_t src_qpn = 0;     // the requesting QP (RC/UC: the connected peer)
  uint16_t slid = 0;
  uint16_t pkey = 0xffff;   // BTH P_Key: the requesting QP's (shm/port_pkeys.h)
  uint64_t va = 0;          // RETH / AtomicETH
  uint32_t rkey = 0;
  uint32_t dma_length = 0;  // RETH: length of the whole WRITE or READ (ATOMIC WRITE: 8)
  uint64_t compare_add = 0; // AtomicETH
  uint64_t swap = 0;
  uint32_t imm = 0;         // network byte order
  bool has_inv = false;     // SEND WITH INVALIDATE (its last packet): IETH
  uint32_t inv_rkey = 0;
  uint32_t qkey = 0;        // DETH (UD)
  uint32_t xrc_srqn = 0;    // XRCETH (XRC): the XRC SRQ at the responder
  uint8_t flush_placement = 0;    // FETH (FLUSH): wire::Feth::kGlobalVisibility | kPersistence
  uint8_t flush_selectivity = 0;  // FETH: wire::Feth::kRange or kWholeRegion
  // UD: the 40 bytes the receive buffer starts with (IBA 11.4.1.2: the GRH,
  // or for RoCEv2 over IPv4 the IPv4 header in its last 20); with_grh: valid.
  const uint8_t* grh = nullptr;
  bool with_grh = false;
  // UD: what the receive completion reports in wc.sl. InfiniBand: the SL the
  // packet travelled on; RoCEv2: the network header type (wire::RoceL3Type).
  uint8_t sl = 0;
  IoList payload;           // this packet's payload bytes
  uint32_t packets = 1;     // PSNs the message consumes (READ: its responses)
};

// NAK codes are the wire's (AETH syndromes, IBA 9.3.5).
using wire::NakCode;

struct Response {
  enum class Kind : uint8_t {
    kAck,        // executed (READ: data granted, atomic: original in `original`)
    kDuplicate,  // already executed: acknowledged again, not executed again
    kRnrNak,     // receiver not ready: retry after `rnr_timer`
    kNak,        // NAK with `nak`
    kDrop,       // silently discarded: the requester's timer will fire
  };
  Kind kind = Kind::kDrop;
  NakCode nak = NakCode::kInvalidRequest;
  uint8_t rnr_timer = 0;
  uint32_t msn = 0;
  uint64_t original = 0;
  // READ: where the data is, in the target's memory; a WRITE ONLY: where
  // its data landed (the host fabric's landing hint).
  const void* data_mr = nullptr;  // const shm::SharedMr*
  uint64_t data_va = 0;
};

}  // namespace softverbs::transport
