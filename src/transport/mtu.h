// Bytes of an ibv_mtu (IBA 7.7.9: 256 << (mtu - 1)); anything below
// IBV_MTU_256 counts as 256.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace softverbs::transport {

constexpr uint32_t mtu_bytes(uint8_t mtu) { return 128u << (mtu < IBV_MTU_256 ? 1 : mtu); }

}  // namespace softverbs::transport
