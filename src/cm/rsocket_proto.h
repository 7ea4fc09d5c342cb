// rdma-core's rsocket wire protocol, version 1: what one rsocket tells its
// peer, as pure functions over bytes. A softverbs rsocket speaks it so that it
// can talk to rdma-core's librdmacm on a hardware host.
//
// The protocol, as rdma-core's librdmacm/rsocket.c defines it:
//   1. Connection data (40 bytes) rides in the CM REQ and REP private data
//      (after the CMA header): version 1, flags (bit 0: the sender's host is
//      big-endian, bit 1: it has an iomap table), its receive credits (be16),
//      3 reserved bytes, its iomap table's entries (scaled to a byte), then two SGEs
//      {be64 addr, be32 rkey, be32 length}: its target SGL (where the peer
//      writes buffer updates; length = entries) and the first half of its
//      receive buffer.
//   2. Every message is an RDMA WRITE WITH IMMEDIATE (zero-length for
//      control). The immediate's top 3 bits are the op, the low 29 its data:
//      DATA (bytes written into the peer's buffer), SGL (credits: the
//      sequence number up to which the peer may send; when it carries a
//      payload, that is a new 16-byte SGE written, in the writer's byte
//      order, into the peer's target SGL), IOMAP_SGL (an iomap entry written
//      at index `data`), CTRL (0 disconnect, 1 keepalive, 2 shutdown).
//   3. An iomap entry is {u64 offset, SGE}, in the writer's byte order; iomap
//      entries follow the target SGL in the same registered region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softverbs::cm::rsproto {

inline constexpr uint8_t kVersion = 1;
inline constexpr uint8_t kFlagNet = 1 << 0;
inline constexpr uint8_t kFlagIomap = 1 << 1;
inline constexpr size_t kConnDataLen = 40;
inline constexpr int kSglSize = 2;  // entries in a target SGL

enum class Op : uint32_t { kData = 0, kWrite = 2, kSgl = 4, kIomapSgl = 6, kCtrl = 7 };
enum class Ctrl : uint32_t { kDisconnect = 0, kKeepalive = 1, kShutdown = 2 };

constexpr uint32_t msg(Op op, uint32_t data) { return (uint32_t(op) << 29) | (data & 0x1FFFFFFF); }
constexpr Op msg_op(uint32_t m) { return Op(m >> 29); }
constexpr uint32_t msg_data(uint32_t m) { return m & 0x1FFFFFFF; }

// One scatter entry as the protocol writes it into the peer's memory: host
// byte order of the writer (the NET flag says which).
struct Sge {
  uint64_t addr;
  uint32_t key;
  uint32_t length;
};
static_assert(sizeof(Sge) == 16);

struct Iomap {
  uint64_t offset;
  Sge sge;
};
static_assert(sizeof(Iomap) == 24);

struct ConnData {
  uint8_t version = kVersion;
  uint8_t flags = 0;
  uint16_t credits = 0;
  uint8_t iomap_scale = 0;  // the iomap table's entries, scaled (value_to_scale)
  Sge target_sgl{};
  Sge data_buf{};
};

namespace detail {
inline void put_be(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = uint8_t(v);
}
inline uint64_t get_be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}
inline void put_sge(uint8_t* p, const Sge& s) {
  put_be(p, s.addr, 8);
  put_be(p + 8, s.key, 4);
  put_be(p + 12, s.length, 4);
}
inline Sge get_sge(const uint8_t* p) {
  return Sge{get_be(p, 8), uint32_t(get_be(p + 8, 4)), uint32_t(get_be(p + 12, 4))};
}
}  // namespace detail

inline void encode(const ConnData& c, uint8_t out[kConnDataLen]) {
  std::memset(out, 0, kConnDataLen);
  out[0] = c.version;
  out[1] = c.flags;
  detail::put_be(out + 2, c.credits, 2);
  out[7] = c.iomap_scale;
  detail::put_sge(out + 8, c.target_sgl);
  detail::put_sge(out + 24, c.data_buf);
}

// False when `len` is too short to hold connection data.
inline bool decode(const uint8_t* in, size_t len, ConnData* c) {
  if (in == nullptr || len < kConnDataLen) return false;
  c->version = in[0];
  c->flags = in[1];
  c->credits = uint16_t(detail::get_be(in + 2, 2));
  c->iomap_scale = in[7];
  c->target_sgl = detail::get_sge(in + 8);
  c->data_buf = detail::get_sge(in + 24);
  return true;
}

// The iomap size in one byte (8 bits): up to 128 entries as-is, more as
// 0x80 | (value >> 8), read back as (scale & 0x7F) << 8.
inline uint32_t scale_to_value(uint32_t scale, int bits) {
  return scale <= (1u << (bits - 1)) ? scale : (scale & ~(1u << (bits - 1))) << bits;
}
inline uint8_t value_to_scale(uint32_t value, int bits) {
  return uint8_t(value <= (1u << (bits - 1)) ? value : (1u << (bits - 1)) | (value >> bits));
}

inline Sge swap(const Sge& s) {
  return Sge{__builtin_bswap64(s.addr), __builtin_bswap32(s.key), __builtin_bswap32(s.length)};
}

}  // namespace softverbs::cm::rsproto
