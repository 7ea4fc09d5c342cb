#include "verbs/issm.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace softverbs::verbs {

std::string issm_path(const std::string& segment_path) { return segment_path + ".issm1"; }

int make_issm(const std::string& path) {
  if (mkfifo(path.c_str(), 0600) == 0 || errno == EEXIST) return 0;
  return errno;
}

bool issm_held(const std::string& path) {
  // O_NONBLOCK: a writer's open neither waits for a reader nor, having
  // found one, disturbs it (nothing is ever written).
  const int fd = open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return false;  // ENXIO: no reader; ENOENT: never made
  struct stat st;
  const bool fifo = fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
  close(fd);
  return fifo;
}

}  // namespace softverbs::verbs
