// Sends one GMP (PerfMgmt Get ClassPortInfo) from the first port's QP1 to
// its own PMA with the P_Key at the given index of the port's table, as a
// program would through libibumad's umad_set_pkey. Prints "answered" or
// "timed out" and exits 0 or 3, 1 on failure. topology_tools.sh traps:
// index 5 of a table opensm filled only at 0 holds the invalid key, so QP1
// drops the GMP and opensm hears trap 257.
#include <infiniband/umad.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int index = argc > 1 ? std::atoi(argv[1]) : 0;
  if (umad_init() < 0) return 1;
  umad_port_t port{};
  if (umad_get_port(nullptr, 0, &port) < 0) return 1;
  const int lid = port.base_lid;
  umad_release_port(&port);
  const int fd = umad_open_port(nullptr, 0);
  if (fd < 0) return 1;
  const int agent = umad_register(fd, 0x04, 1, 0, nullptr);
  if (agent < 0) return 1;
  std::vector<uint8_t> buf(umad_size() + 256);
  auto* m = static_cast<uint8_t*>(umad_get_mad(buf.data()));
  m[0] = 1;     // base version
  m[1] = 0x04;  // PerfMgmt
  m[2] = 1;
  m[3] = 0x01;  // Get
  m[15] = 0x57;
  m[17] = 0x01;  // ClassPortInfo
  umad_set_addr(buf.data(), lid, 1, 0, 0x80010000);
  umad_set_pkey(buf.data(), index);
  if (umad_send(fd, agent, buf.data(), 256, 300, 0) < 0) return 1;
  int len = 256;
  if (umad_recv(fd, buf.data(), &len, 3000) < 0) return 1;
  const bool timed_out = umad_status(buf.data()) == ETIMEDOUT;
  std::printf("%s\n", timed_out ? "timed out" : "answered");
  umad_close_port(fd);
  return timed_out ? 3 : 0;
}
