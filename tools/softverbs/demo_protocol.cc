#include "demo_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace softverbs::demo {

Reply ok_reply(uint64_t v1, uint64_t v2) {
  Reply r;
  r.ok = 1;
  r.v1 = v1;
  r.v2 = v2;
  return r;
}

Reply error_reply(const Status& status) {
  Reply r;
  r.ok = 0;
  std::snprintf(r.message, sizeof r.message, "%s", status.message().c_str());
  return r;
}

Status Channel::send(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::fail("socket send to the peer process: %s", std::strerror(errno));
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::ok();
}

static int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

Status Channel::recv(void* data, size_t len, int timeout_ms) {
  auto* p = static_cast<uint8_t*>(data);
  int64_t deadline = timeout_ms < 0 ? 0 : monotonic_ms() + timeout_ms;
  while (len > 0) {
    int wait = -1;
    if (timeout_ms >= 0) {
      int64_t left = deadline - monotonic_ms();
      if (left <= 0) return Status::fail("no answer from the peer process within %d ms", timeout_ms);
      wait = static_cast<int>(left);
    }
    pollfd pfd = {fd_, POLLIN, 0};
    int r = ::poll(&pfd, 1, wait);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::fail("poll on the peer socket: %s", std::strerror(errno));
    if (r == 0) continue;  // the deadline check above reports it
    ssize_t n = ::read(fd_, p, len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Status::fail("socket read from the peer process: %s", std::strerror(errno));
    if (n == 0) return Status::fail("the peer process closed the connection (did it exit?)");
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status Channel::call(const Command& cmd, Reply* reply, int timeout_ms) {
  DEMO_TRY(send(cmd));
  DEMO_TRY(recv(reply, timeout_ms));
  reply->message[sizeof reply->message - 1] = '\0';
  if (reply->ok == 0) return Status::fail("server: %s", reply->message);
  return Status::ok();
}

uint8_t pattern_byte(uint64_t seed, size_t i) {
  uint64_t x = (uint64_t{i} + 1) * 0x9E3779B97F4A7C15ull ^ (seed + 1) * 0xD6E8FEB86659FD93ull;
  x ^= x >> 29;
  return static_cast<uint8_t>(x >> 32);
}

void fill_pattern(uint8_t* p, size_t len, uint64_t seed) {
  for (size_t i = 0; i < len; ++i) p[i] = pattern_byte(seed, i);
}

Status check_pattern(const uint8_t* p, size_t len, uint64_t seed, size_t guard, const char* what) {
  for (size_t i = 0; i < len; ++i) {
    uint8_t want = pattern_byte(seed, i);
    if (p[i] != want) {
      size_t bad = 0;
      for (size_t j = i; j < len; ++j) bad += p[j] != pattern_byte(seed, j);
      return Status::fail("%s: byte %zu is 0x%02x, expected 0x%02x (%zu of %zu bytes wrong)", what, i,
                          p[i], want, bad, len);
    }
  }
  for (size_t i = len; i < len + guard; ++i) {
    if (p[i] != kPoison) {
      return Status::fail("%s: byte %zu past the %zu-byte message was overwritten (0x%02x)", what,
                          i - len, len, p[i]);
    }
  }
  return Status::ok();
}

}  // namespace softverbs::demo
