// socket(2) straight to the kernel, past any interposer.
//
// Debian's librspreload (LD_PRELOAD) replaces socket() with one that makes
// an rsocket of every socket it can, which would turn the library's own
// sockets (the RoCE fabric's UDP sockets, the forwarder's AF_UNIX ones) into
// rsockets over the very device they carry. Everything else on those fds
// (bind, sendto, poll, close, ...) passes through librspreload untouched:
// it acts only on fds its own socket() returned.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

namespace softverbs {

inline int raw_socket(int domain, int type, int protocol) {
  return static_cast<int>(::syscall(SYS_socket, domain, type, protocol));
}

}  // namespace softverbs
