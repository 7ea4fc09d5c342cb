// A directory beside the segment with one file per live process (the
// userspace agents' registry, the SA memberships): each process holds a
// shared flock on its own file while it lives, so a file whose lock can be
// taken exclusively belongs to a dead process and is removed by whoever
// finds it. A lock file in the directory orders scans and changes.
#pragma once

#include <sys/file.h>
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace softverbs::umad {

// The directory's lock: LOCK_SH for a scan, LOCK_EX for a change. Creates
// the directory.
class DirLock {
public:
  explicit DirLock(const std::string &dir, int how = LOCK_EX);
  ~DirLock();
  DirLock(const DirLock &) = delete;
  DirLock &operator=(const DirLock &) = delete;

private:
  int fd_ = -1;
};

// The contents of the live processes' files, with their pids, `skip`'s left
// out; removes the files of dead ones. REQUIRES: the directory's lock.
std::vector<std::pair<pid_t, std::string>>
read_live_files(const std::string &dir, pid_t skip = 0);

// Makes `text` this process's file (`*file`: its fd, opened and locked on
// first use); empty text removes it. REQUIRES: the directory's exclusive lock.
void write_own_file(const std::string &dir, pid_t pid, int *file,
                    const std::string &text);

} // namespace softverbs::umad
