#include "dev_nodes.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace softverbs::cli {
namespace {

constexpr char kDir[] = "/dev/infiniband";

// /dev/null's numbers (Documentation/admin-guide/devices.txt: 1 char, minor 3).
const dev_t kStandIn = makedev(1, 3);

std::string node_path(const std::string& name) { return std::string(kDir) + "/" + name; }

bool is_char_device(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

bool all_present() {
  for (const std::string& n : dev_node_names())
    if (!is_char_device(node_path(n))) return false;
  return true;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

bool write_proc_file(const char* path, const std::string& text, std::string* error) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = errno_text(std::string("open ") + path);
    return false;
  }
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (!ok) *error = errno_text(std::string("write ") + path);
  close(fd);
  return ok;
}

// Becomes the owner of a new mount namespace: as root directly, otherwise
// through a user namespace that maps only our own uid and gid (so files keep
// their owners and the program runs as us, without privileges, after exec).
bool own_mount_namespace(std::string* error) {
  if (geteuid() == 0) {
    if (unshare(CLONE_NEWNS) != 0) {
      *error = errno_text("unshare(CLONE_NEWNS)");
      return false;
    }
  } else {
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      *error = errno_text("unshare(CLONE_NEWUSER|CLONE_NEWNS) (are unprivileged user namespaces enabled?)");
      return false;
    }
    if (!write_proc_file("/proc/self/setgroups", "deny", error) ||
        !write_proc_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1", error) ||
        !write_proc_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1", error))
      return false;
  }
  // Nothing mounted here may leak back into the host's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    *error = errno_text("mount --make-rprivate /");
    return false;
  }
  return true;
}

// Puts `source` (a node or file) at `target`, a new empty file.
bool bind_file(const std::string& source, const std::string& target, std::string* error) {
  int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = errno_text("create " + target);
    return false;
  }
  close(fd);
  if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    *error = errno_text("bind " + source + " on " + target);
    return false;
  }
  return true;
}

// Covers `dir` with a writable tmpfs that shows what it held before: each
// entry comes back as a bind mount (a symlink as a symlink), reached through
// a handle on the covered directory.
bool cover_with_tmpfs(const char* dir, std::string* error) {
  int under = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (under < 0) {
    *error = errno_text(std::string("open ") + dir);
    return false;
  }
  const std::string old_root = "/proc/self/fd/" + std::to_string(under);
  std::vector<std::string> names;
  if (DIR* d = opendir(old_root.c_str()); d != nullptr) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    closedir(d);
  }
  if (mount("softverbs-dev", dir, "tmpfs", MS_NOSUID, "mode=0755") != 0) {
    *error = errno_text(std::string("mount tmpfs on ") + dir);
    close(under);
    return false;
  }
  bool ok = true;
  for (const std::string& name : names) {
    const std::string from = old_root + "/" + name;
    const std::string to = std::string(dir) + "/" + name;
    struct stat st;
    if (lstat(from.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char link[4096];
      ssize_t n = readlink(from.c_str(), link, sizeof link - 1);
      if (n > 0) {
        link[n] = '\0';
        ok &= symlink(link, to.c_str()) == 0;
      }
    } else if (S_ISDIR(st.st_mode)) {
      ok &= mkdir(to.c_str(), st.st_mode & 07777) == 0 &&
            mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
    } else {
      std::string ignored;
      ok &= bind_file(from, to, &ignored);
    }
  }
  close(under);
  if (!ok) *error = std::string("could not show all of the old ") + dir + " again";
  return ok;
}

}  // namespace

const std::vector<std::string>& dev_node_names() {
  static const std::vector<std::string> names = {"uverbs_softverbs0", "uverbs_softverbs_roce0"};
  return names;
}

int setup_dev_nodes(bool remove) {
  if (geteuid() != 0) {
    std::fprintf(stderr,
                 "softverbs setup-dev: needs root (it writes %s). Without root, run programs with "
                 "`softverbs run --dev-nodes -- PROGRAM`.\n",
                 kDir);
    return 1;
  }
  int rc = 0;
  if (remove) {
    for (const std::string& n : dev_node_names()) {
      const std::string path = node_path(n);
      struct stat st;
      // Only our stand-ins: a real uverbs node of the same name stays.
      if (stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == kStandIn &&
          unlink(path.c_str()) != 0) {
        std::fprintf(stderr, "softverbs setup-dev: unlink %s: %s\n", path.c_str(), std::strerror(errno));
        rc = 1;
      }
    }
    rmdir(kDir);  // only when empty
    return rc;
  }
  if (mkdir(kDir, 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "softverbs setup-dev: mkdir %s: %s\n", kDir, std::strerror(errno));
    return 1;
  }
  for (const std::string& n : dev_node_names()) {
    const std::string path = node_path(n);
    if (is_char_device(path)) continue;
    if (mknod(path.c_str(), S_IFCHR | 0666, kStandIn) != 0 || chmod(path.c_str(), 0666) != 0) {
      std::fprintf(stderr, "softverbs setup-dev: mknod %s: %s\n", path.c_str(), std::strerror(errno));
      rc = 1;
      continue;
    }
    std::printf("%s\n", path.c_str());
  }
  return rc;
}

bool enter_dev_nodes_namespace(std::string* error) {
  if (all_present()) return true;
  if (!own_mount_namespace(error)) return false;
  struct stat st;
  if (stat(kDir, &st) == 0) {
    if (!cover_with_tmpfs(kDir, error)) return false;
  } else {
    if (!cover_with_tmpfs("/dev", error)) return false;
    if (mkdir(kDir, 0755) != 0) {
      *error = errno_text(std::string("mkdir ") + kDir);
      return false;
    }
  }
  for (const std::string& n : dev_node_names()) {
    const std::string path = node_path(n);
    if (!is_char_device(path) && !bind_file("/dev/null", path, error)) return false;
  }
  return true;
}

}  // namespace softverbs::cli
