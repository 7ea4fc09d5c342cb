// The GSI table of one device: which process's agent answers for QP1 (the
// General Services Interface) on the port the processes share, and who
// holds which RDMA CM port.
//
// Several processes share a port, and each runs its own CM agent: an
// ordinary UD QP of the process that sends with source QP 1 (ibv_create_qp_ex,
// IBV_QP_CREATE_SOURCE_QPN). A datagram to QP 1 is routed to one of them by
// management class (src/fabric/gsi_route.h):
//   - CM (class 0x07): REQ and SIDR_REQ by service ID, to the process
//     listening on that port space, port and address (or the wildcard);
//     every other message by the comm ID its receiver chose, whose top
//     byte is the receiving process's slot here.
// Issue 19 adds its classes (SA, PMA) to the same table.
//
// Contract:
//   1. A file beside the device's segment (`<segment>.cm`, path_for()),
//      made by the first process that opens it; every change holds
//      flock(LOCK_EX) on it (each opener has its own open file, so the
//      fabric's reader and the CM's writer in one process exclude each other).
//   2. A slot or binding whose owner process is gone (kill(pid, 0): ESRCH)
//      is free: taking one reclaims it, lookups skip it.
//   3. Bindings follow the kernel's rules for one port space: a port is
//      held by one id per address, a wildcard address conflicts with every
//      address, port 0 asks for an ephemeral port.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace softverbs::shm {

// An address as the table keeps it: family and 16 bytes (IPv4 in the last 4,
// as the CMA header holds it; all zero is the wildcard).
inline constexpr uint8_t kFamilyIb = 27;  // AF_IB: a GID in `bytes`

struct TableAddr {
  uint8_t family = 0;  // AF_INET, AF_INET6 or kFamilyIb
  std::array<uint8_t, 16> bytes{};
  bool wildcard() const;
  friend bool operator==(const TableAddr&, const TableAddr&) = default;
};

class GsiTable {
 public:
  static constexpr int kSlots = 256;
  static constexpr int kBindings = 4096;

  static std::string path_for(const std::string& segment_path) { return segment_path + ".cm"; }

  // Maps (creating if needed) the table at `path`; nullopt on failure
  // (errno set).
  static std::optional<GsiTable> open(const std::string& path);
  GsiTable(GsiTable&& o) noexcept;
  GsiTable& operator=(GsiTable&&) = delete;
  ~GsiTable();

  // This process's slot, with its agent's QPN; -1 with errno ENOSPC.
  int claim_slot(uint32_t agent_qpn);
  void release_slot(int slot);
  // The agent QPN of a live slot, or 0.
  uint32_t agent_of_slot(int slot);
  // Some live process's agent, or 0: any CM of the port may answer a
  // request nobody listens for (with a reject).
  uint32_t any_agent();

  // Takes `port` (0: an ephemeral one) of port space `ps` on `addr` for
  // `slot`; the binding index, or -1 with errno EADDRINUSE / ENOSPC.
  // *port is set to the port taken.
  int bind(int slot, uint16_t ps, const TableAddr& addr, uint16_t* port, bool reuse);
  void set_listening(int binding, bool listening);
  void unbind(int binding);
  // The slot listening on (ps, port) at `addr` or the wildcard; -1 if none.
  int listener_slot(uint16_t ps, uint16_t port, const TableAddr& addr);

 private:
  struct Layout;
  GsiTable(int fd, Layout* layout) : fd_(fd), layout_(layout) {}
  class Lock;

  int fd_ = -1;
  Layout* layout_ = nullptr;
};

}  // namespace softverbs::shm
