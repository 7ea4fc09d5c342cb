// What the responder makes of one request packet that came over the wire
// (the UDP fabric): the packet's headers and payload as a Request, after the
// checks that need nothing but the packet and the QP — separate so that the
// fuzzer drives exactly what the fabric runs.
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "shm/objects.h"
#include "transport/request.h"
#include "wire/packet.h"

namespace softverbs::transport {

enum class PacketVerdict : uint8_t {
  kRequest,    // *out is the request
  kDropped,    // a valid packet this device does not take (invalidation: no memory windows)
  kMalformed,  // payload not of the path MTU's shape, UD without DETH
};

// `mtu`: the path MTU in bytes (UD: the port's). `iov` receives the payload
// and must outlive *out. Leaves the GRH of a UD request to the caller.
PacketVerdict request_from_packet(const wire::PacketView& v, const shm::SharedQp& qp, uint32_t mtu, iovec* iov,
                                  Request* out);

}  // namespace softverbs::transport
