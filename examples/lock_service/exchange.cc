#include "exchange.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace lock_service {

bool send_msg(int fd, const void* msg, unsigned size) {
  for (;;) {
    const ssize_t n = ::send(fd, msg, size, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(size)) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n >= 0) errno = EMSGSIZE;
    return false;
  }
}

bool recv_msg(int fd, void* msg, unsigned size, int timeout_ms) {
  pollfd p = {fd, POLLIN, 0};
  for (;;) {
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) errno = ETIMEDOUT;
    if (ready <= 0) return false;
    const ssize_t n = ::recv(fd, msg, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == static_cast<ssize_t>(size)) return true;
    if (n >= 0) errno = n == 0 ? EPIPE : EMSGSIZE;  // 0: the peer hung up
    return false;
  }
}

}  // namespace lock_service
