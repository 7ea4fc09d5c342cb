// A PMA Set of an Op attribute with the OpCode chosen (issue 20):
// Debian's perfquery sends OpCode 0 with every query and reset, so a test
// that selects another opcode sends the Set itself, through libibumad.so.3's
// public API as any performance manager would.
//   softverbs_pma_select ATTR OPCODE
//       ATTR oprcv (0x17), vloppackets (0x19) or vlopdata (0x1A); OPCODE a
//       BTH opcode, e.g. 0x0a. Port 1 of the port's own PMA (LID routed to
//       the port itself); CounterSelect all. Prints the OpCode the answer
//       names; exits 1 unless the PMA answered with status 0.
#include <infiniband/umad.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  constexpr int kMad = 256;
  const std::string attr_name = argc == 3 ? argv[1] : "";
  const uint16_t attr = attr_name == "oprcv"         ? 0x17
                        : attr_name == "vloppackets" ? 0x19
                        : attr_name == "vlopdata"    ? 0x1a
                                                     : 0;
  if (attr == 0) {
    std::fprintf(stderr, "usage: %s oprcv|vloppackets|vlopdata OPCODE\n", argv[0]);
    return 2;
  }
  const auto opcode = static_cast<uint8_t>(std::strtoul(argv[2], nullptr, 0));
  if (umad_init() != 0) return 1;
  const int fd = umad_open_port(nullptr, 0);
  if (fd < 0) return 1;
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd, 0x04, 1, 0, mask);  // PerfMgt, class version 1
  if (agent < 0) return 1;
  std::vector<uint8_t> req(umad_size() + kMad), resp(umad_size() + kMad);
  auto* m = static_cast<uint8_t*>(umad_get_mad(req.data()));
  m[0] = 1, m[1] = 0x04, m[2] = 1, m[3] = 0x02;  // PerfSet
  m[15] = 1;                                      // TID
  m[16] = static_cast<uint8_t>(attr >> 8), m[17] = static_cast<uint8_t>(attr);
  uint8_t* d = m + 64;  // the GSI data
  d[0] = opcode;
  d[1] = 1;                // PortSelect
  d[2] = d[3] = 0xff;      // CounterSelect: every counter
  // The port's own LID (0 on RoCE: the port's PMA, as perfquery reaches it), QP1 with the GSI Q_Key.
  umad_port_t port;
  if (umad_get_port(nullptr, 0, &port) != 0) return 1;
  const int lid = port.base_lid;
  umad_release_port(&port);
  umad_set_addr(req.data(), lid, 1, 0, 0x80010000);
  if (umad_send(fd, agent, req.data(), kMad, 1000, 2) != 0) return 1;
  int len = kMad;
  if (umad_recv(fd, resp.data(), &len, 3000) < 0 || umad_status(resp.data()) != 0) {
    std::fprintf(stderr, "no answer\n");
    return 1;
  }
  const auto* a = static_cast<const uint8_t*>(umad_get_mad(resp.data()));
  const unsigned status = static_cast<unsigned>(a[4]) << 8 | a[5];
  std::printf("OpCode 0x%02x status 0x%04x\n", a[64], status);
  umad_close_port(fd);
  return status == 0 ? 0 : 1;
}
