// The sysfs helpers other rdma-core libraries import: ibv_get_sysfs_path,
// ibv_read_sysfs_file, and the private ibv_read_ibdev_sysfs_file.
//
// Debian's librdmacm reads kernel attributes through the first two (e.g.
// the rdma_cm ABI version under class/misc/rdma_cm), so they really read
// files. The root is the device's own tree (sysfs_tree.h), whose non-RDMA
// entries lead into /sys; SYSFS_PATH overrides it as in rdma-core. Thread-safe: the sysfs root is computed once, the readers keep no
// state.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "abi/ibverbs/sysfs_tree.h"

// Entry points leave the library; the build hides everything else.
#define SV_PUBLIC __attribute__((visibility("default")))

namespace softverbs::abi {
namespace {

// rdma-core caps the SYSFS_PATH override at this many bytes.
constexpr size_t kSysfsPathMax = 256;

const char* compute_sysfs_root() {
  // The environment is only trusted when we are not running set-uid.
  const char* env = (getuid() == geteuid()) ? std::getenv("SYSFS_PATH") : nullptr;
  if (env == nullptr) {
    const char* ours = synthetic_sysfs_root();
    return ours != nullptr ? ours : "/sys";
  }
  static char root[kSysfsPathMax + 1];
  size_t len = strnlen(env, kSysfsPathMax);
  std::memcpy(root, env, len);
  while (len > 0 && root[len - 1] == '/') --len;
  root[len] = '\0';
  return root;
}

// Reads at most `size` bytes of `path` into `buf`. A trailing newline
// becomes the terminating NUL; a file that fills `buf` without one cannot be
// terminated and fails. Returns the string length, or -1 with errno set.
int read_attr_file(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len < size) {
    ssize_t n = read(fd, buf + len, size - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      close(fd);
      errno = saved;
      return -1;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  close(fd);
  if (len > INT_MAX) {
    errno = EOVERFLOW;
    return -1;
  }
  if (len > 0 && buf[len - 1] == '\n') {
    buf[--len] = '\0';
  } else if (len < size) {
    buf[len] = '\0';
  } else {
    errno = EOVERFLOW;
    return -1;
  }
  return static_cast<int>(len);
}

}  // namespace
}  // namespace softverbs::abi

extern "C" {

SV_PUBLIC const char* ibv_get_sysfs_path(void) {
  static const char* const root = softverbs::abi::compute_sysfs_root();
  return root;
}

SV_PUBLIC int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  if (dir == nullptr || file == nullptr || (buf == nullptr && size != 0)) {
    errno = EINVAL;
    return -1;
  }
  char path[PATH_MAX];
  int n = std::snprintf(path, sizeof path, "%s/%s", dir, file);
  if (n < 0 || static_cast<size_t>(n) >= sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return softverbs::abi::read_attr_file(path, buf, size);
}

// rdma-core: int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
//     struct verbs_sysfs_dev *sysfs_dev, const char *fnfmt, ...);
// Only hardware providers call it, with a verbs_sysfs_dev that rdma-core's
// device discovery made. softverbs discovers no hardware, so no such object
// exists here and there is no device directory to read from.
SV_PUBLIC int ibv_read_ibdev_sysfs_file(char* /*buf*/, size_t /*size*/, void* sysfs_dev, const char* /*fnfmt*/, ...) {
  errno = sysfs_dev == nullptr ? EINVAL : ENOENT;
  return -1;
}

}  // extern "C"
