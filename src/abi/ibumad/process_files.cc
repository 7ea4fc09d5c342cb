#include "abi/ibumad/process_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/log.h"

namespace softverbs::umad {

DirLock::DirLock(const std::string &dir, int how) {
  mkdir(dir.c_str(), 0700);
  fd_ = open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ >= 0)
    flock(fd_, how);
}

DirLock::~DirLock() {
  if (fd_ >= 0)
    close(fd_); // releases the flock
}

std::vector<std::pair<pid_t, std::string>>
read_live_files(const std::string &dir, pid_t skip) {
  std::vector<std::pair<pid_t, std::string>> live;
  DIR *d = opendir(dir.c_str());
  if (d == nullptr)
    return live;
  while (dirent *e = readdir(d)) {
    char *end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == skip)
      continue;
    const std::string path = dir + "/" + e->d_name;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) { // its owner is gone
      unlink(path.c_str());
      close(fd);
      continue;
    }
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
      text.append(buf, static_cast<size_t>(n));
    close(fd);
    live.emplace_back(static_cast<pid_t>(pid), std::move(text));
  }
  closedir(d);
  return live;
}

void write_own_file(const std::string &dir, pid_t pid, int *file,
                    const std::string &text) {
  const std::string path = dir + "/" + std::to_string(pid);
  if (text.empty()) {
    if (*file >= 0) {
      unlink(path.c_str());
      close(*file);
      *file = -1;
    }
    return;
  }
  if (*file < 0) {
    *file = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (*file < 0)
      return;
    flock(*file, LOCK_SH);
  }
  if (ftruncate(*file, 0) != 0 || pwrite(*file, text.data(), text.size(), 0) !=
                                      static_cast<ssize_t>(text.size()))
    SV_LOG(kWarn, "umad: cannot write %s: %s", path.c_str(),
           std::strerror(errno));
}

} // namespace softverbs::umad
