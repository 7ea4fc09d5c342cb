// The CM's table shared by every process of one device: which process's
// CM agent answers which comm IDs, and who holds which port.
//
// QP1 demultiplexing on a port that several processes share. A CM MAD is
// addressed to QP1 of a port; here each process runs its own CM agent, an
// ordinary UD QP, and the table says which agent a MAD is for:
//   - REQ and SIDR_REQ by service ID: the process listening on that port
//     space, port and address (or the wildcard address);
//   - every other message by the comm ID the receiver chose, whose top
//     byte is the receiving process's slot.
// On the host fabric the sender reads the table and sends straight to the
// agent (there is no wire to cross); the table is the GSI routing state
// the management plane (issue 19) can extend with its classes.
//
// Contract:
//   1. A file beside the device's segment (`<segment>.cm`), made by the first
//      process that opens it; every change holds flock(LOCK_EX) on it, and
//      callers also serialise their own threads (the CM's lock).
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

namespace softverbs::cm {

// An address as the table keeps it: family and 16 bytes (IPv4 in the last 4,
// as the CMA header holds it; all zero is the wildcard).
struct TableAddr {
  uint8_t family = 0;  // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};
  bool wildcard() const;
  friend bool operator==(const TableAddr&, const TableAddr&) = default;
};

class PortTable {
 public:
  static constexpr int kSlots = 256;
  static constexpr int kBindings = 4096;

  // Maps (creating if needed) the table at `path`; nullopt on failure
  // (errno set).
  static std::optional<PortTable> open(const std::string& path);
  PortTable(PortTable&& o) noexcept;
  PortTable& operator=(PortTable&&) = delete;
  ~PortTable();

  // This process's slot, with its agent's QPN; -1 with errno ENOSPC.
  int claim_slot(uint32_t agent_qpn);
  void release_slot(int slot);
  // The agent QPN of a live slot, or 0.
  uint32_t agent_of_slot(int slot);

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
  PortTable(int fd, Layout* layout) : fd_(fd), layout_(layout) {}
  class Lock;

  int fd_ = -1;
  Layout* layout_ = nullptr;
};

}  // namespace softverbs::cm
