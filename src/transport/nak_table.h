// What each responder-detected error does, per QP type: the one table that
// maps (error, transport) to (response, completion status at the responder,
// async event, QP effect). IBA 9.9.3 (responder error behaviour, classes A-D).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "transport/qp_types.h"
#include "transport/request.h"

namespace softverbs::transport {

enum class RespError : uint8_t {
  kPsnAhead,        // a packet after a gap (C9-87: NAK sequence error, once)
  kOpcodeSequence,  // a middle/last with no message open, or a first inside one
  kUnsupported,     // the QP does not allow the operation (access flags, type)
  kRecvTooSmall,    // SEND longer than the receive WQE (C9-…: invalid request)
  kLengthMismatch,  // payload length disagrees with RETH or the path MTU
  kRkey,            // bad R_Key, access not granted, or range outside the MR
  kMisaligned,      // atomic not 8-byte aligned (C9-… : invalid request)
  kRecvLkey,        // the receive WQE's SGE fails its L_Key check
  kTargetMemory,    // the owner's memory could not be reached
  kInvalidate,      // SEND WITH INVALIDATE names no valid type 2 window of the QP's (IBA 10.6.7.2.3)
  kXrcSrq,          // XRC: the XRCETH names no XRC SRQ of the QP's domain (IBA A14)
  kPageFault,       // an ODP region's pages are not mapped (for the access)
};

struct NakEffect {
  Response::Kind kind;
  NakCode nak;
  int recv_status;  // status of the receive WQE in progress, or -1
  int async_event;  // ibv_event_type raised on the responder QP, or -1
  bool qp_error;    // the responder QP goes to ERR
};

constexpr NakEffect nak_effect(RespError e, uint8_t qp_type) {
  using K = Response::Kind;
  if (!reliable_qp(qp_type)) {
    // UC and UD never answer: the message is dropped (IBA 9.9.4); a receive
    // WQE already taken completes in error, the QP stays usable.
    const int st = e == RespError::kRecvTooSmall ? IBV_WC_LOC_LEN_ERR
                   : e == RespError::kRecvLkey   ? IBV_WC_LOC_PROT_ERR
                                                 : -1;
    return {K::kDrop, NakCode::kInvalidRequest, st, -1, false};
  }
  switch (e) {
    case RespError::kPsnAhead: return {K::kNak, NakCode::kPsnSequenceError, -1, -1, false};
    case RespError::kOpcodeSequence:
    case RespError::kUnsupported:
    case RespError::kLengthMismatch:
    case RespError::kMisaligned:
    case RespError::kInvalidate:
    case RespError::kXrcSrq:
      return {K::kNak, NakCode::kInvalidRequest, IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR, true};
    case RespError::kRecvTooSmall: return {K::kNak, NakCode::kInvalidRequest, IBV_WC_LOC_LEN_ERR, -1, true};
    // An ODP page fault that fails is an access the region cannot grant.
    case RespError::kRkey:
    case RespError::kPageFault:
      return {K::kNak, NakCode::kRemoteAccessError, IBV_WC_REM_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR, true};
    case RespError::kRecvLkey: return {K::kNak, NakCode::kRemoteOperationalError, IBV_WC_LOC_PROT_ERR, -1, true};
    case RespError::kTargetMemory:
      return {K::kNak, NakCode::kRemoteOperationalError, IBV_WC_LOC_QP_OP_ERR, IBV_EVENT_QP_FATAL, true};
  }
  return {K::kDrop, NakCode::kInvalidRequest, -1, -1, false};
}

// Completion status at the requester for a NAK (IBA 9.7.5.2.8 / C9-… ).
constexpr ibv_wc_status requester_status(NakCode nak) {
  switch (nak) {
    case NakCode::kInvalidRequest: return IBV_WC_REM_INV_REQ_ERR;
    case NakCode::kRemoteAccessError: return IBV_WC_REM_ACCESS_ERR;
    case NakCode::kRemoteOperationalError: return IBV_WC_REM_OP_ERR;
    case NakCode::kInvalidRdRequest: return IBV_WC_REM_INV_RD_REQ_ERR;
    case NakCode::kPsnSequenceError: return IBV_WC_RETRY_EXC_ERR;  // only once retries are spent
  }
  return IBV_WC_GENERAL_ERR;
}

}  // namespace softverbs::transport
