// lock_service: the messages the server and a client exchange before and
// after the run, over the SOCK_SEQPACKET socketpair the launcher gave them
// (one datagram per message). Plain structs: both ends are one binary.
#pragma once

#include <cstdint>

namespace lock_service {

// What the peer needs to bring its QP to RTR against ours.
struct QpAddress {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
};

struct Hello {  // client -> server
  QpAddress qp;
  uint32_t client_id = 0;  // the value a holder leaves in the lock word; never 0
};

struct Welcome {  // server -> client
  QpAddress qp;
  uint64_t addr = 0;  // the server's page: lock word, holders, counter (options.h)
  uint32_t rkey = 0;
};

struct Report {  // client -> server, once its loop is over
  uint64_t rounds = 0;      // critical sections completed
  uint64_t cas_retries = 0; // acquire attempts that found the lock held
  uint64_t violations = 0;  // occupancy checks that saw another holder
  uint64_t median_ns = 0;   // one lock/unlock round, acquire to release completion
  uint64_t p99_ns = 0;
  int32_t uc_post_rc = 0;   // --uc: what ibv_post_send returned for the atomic
  uint32_t uc_bad_wr_is_atomic = 0;
  char error[160] = {};     // empty when the client ran to the end
};

struct Bye {};  // server -> client: the verdict is taken, tear down

// One message each way; false on error, hang-up or timeout (with errno set).
bool send_msg(int fd, const void* msg, unsigned size);
bool recv_msg(int fd, void* msg, unsigned size, int timeout_ms);

template <class T>
bool send_msg(int fd, const T& msg) { return send_msg(fd, &msg, sizeof msg); }
template <class T>
bool recv_msg(int fd, T* msg, int timeout_ms) { return recv_msg(fd, msg, sizeof *msg, timeout_ms); }

}  // namespace lock_service
