// QP1 on a port several processes share: which process's GSI agent a
// datagram to QP 1 is for, from the management class of the MAD it carries
// and the device's GSI table (src/shm/gsi_table.h).
//
// Contract:
//   1. gsi_route() returns the agent's QPN, or 0 to drop the datagram (not a MAD
//      of a class served here, no such agent). CM (class 0x07): REQ and
//      SIDR_REQ by service ID and the CMA header's destination address, to
//      the listener, or to any live agent when nobody listens (it answers
//      with a reject); every other message by the receiver's comm ID (REJ,
//      MRA, REP, RTU, DREQ, DREP: the remote comm ID; SIDR_REP: the request
//      ID), whose top byte is the receiving process's slot.
//   2. The table is opened on first use, beside the segment, and kept;
//      thread-safe. Not for the data path: a lock and the table's file lock
//      per datagram, which only management traffic pays.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace softverbs::fabric {

// The QPN of the agent a datagram to QP 1 of the device at `segment_path`
// goes to, or 0 to drop it.
uint32_t gsi_route(const std::string& segment_path, std::span<const uint8_t> mad);

}  // namespace softverbs::fabric
