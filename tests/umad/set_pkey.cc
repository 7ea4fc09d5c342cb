// Sets one entry of the first port's P_Key table as an SM does: a
// directed-route Get(P_KeyTable) of block 0 to the port itself, the entry
// changed, and a Set of the block back, through libibumad.
// Usage: softverbs_set_pkey INDEX PKEY (PKEY in hex). Exits 0 once the Set
// is answered with status 0. integration.partition: a table change reaches
// QPs that are already connected.
#include <infiniband/umad.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kMad = 256;

// One SMP to the port itself (hop count 0); the answer's MAD into `out`.
bool smp(int fd, int agent, uint8_t method, const uint8_t* data, uint8_t* out) {
  std::vector<uint8_t> buf(umad_size() + kMad);
  auto* m = static_cast<uint8_t*>(umad_get_mad(buf.data()));
  m[0] = 1;
  m[1] = 0x81;  // directed route
  m[2] = 1;
  m[3] = method;
  m[15] = method;  // TID
  m[17] = 0x16;  // P_KeyTable, block 0
  m[32] = m[33] = m[34] = m[35] = 0xff;  // DrSLID, DrDLID: permissive
  if (data != nullptr) std::memcpy(m + 64, data, 64);
  umad_set_addr(buf.data(), 0xffff, 0, 0, 0);
  if (umad_send(fd, agent, buf.data(), kMad, 1000, 0) < 0) return false;
  int len = kMad;
  if (umad_recv(fd, buf.data(), &len, 3000) < 0 || umad_status(buf.data()) != 0) return false;
  std::memcpy(out, m, kMad);
  return (m[4] & 0x7f) == 0 && m[5] == 0;  // MAD status 0 (the D bit aside)
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const long index = std::strtol(argv[1], nullptr, 0);
  const long pkey = std::strtol(argv[2], nullptr, 16);
  if (index < 0 || index >= 32 || pkey < 0 || pkey > 0xffff || umad_init() < 0) return 2;
  const int fd = umad_open_port(nullptr, 0);
  const int agent = fd < 0 ? -1 : umad_register(fd, 0x81, 1, 0, nullptr);
  if (agent < 0) return 1;
  uint8_t got[kMad];
  if (!smp(fd, agent, 0x01, nullptr, got)) return 1;
  uint8_t block[64];
  std::memcpy(block, got + 64, 64);
  block[2 * index] = static_cast<uint8_t>(pkey >> 8);
  block[2 * index + 1] = static_cast<uint8_t>(pkey);
  const bool ok = smp(fd, agent, 0x02, block, got) && std::memcmp(got + 64, block, 64) == 0;
  umad_close_port(fd);
  std::printf("%s\n", ok ? "set" : "refused");
  return ok ? 0 : 1;
}
