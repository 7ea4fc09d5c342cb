#include "verbs/context_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "util/raw_mmap.h"

namespace softverbs::verbs {

struct ContextFile::Table {
  static constexpr uint64_t kMagic = 0x3130'5854'4356'5653ull;  // "SVCTX01" + version
  uint64_t magic;
  uint64_t node_guid;
  std::atomic<uint32_t> pds[kMaxPds];  // live PD ids, 0 = free
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

ContextFile::Table* ContextFile::map_table(int fd) {
  void* p = util::raw_mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Table*>(p);
}

Result<ContextFile*> ContextFile::create(uint64_t node_guid) {
  int fd = memfd_create("softverbs-context", MFD_CLOEXEC);
  if (fd < 0) return Status::error(errno);
  Table* t = nullptr;
  if (ftruncate(fd, sizeof(Table)) != 0 || (t = map_table(fd)) == nullptr) {
    const int err = errno;
    close(fd);
    return Status::error(err);
  }
  t->node_guid = node_guid;
  t->magic = Table::kMagic;
  auto* f = new (std::nothrow) ContextFile(fd, t);
  if (f == nullptr) {
    util::raw_munmap(t, sizeof(Table));
    close(fd);
    return Status::error(ENOMEM);
  }
  return f;
}

Result<ContextFile*> ContextFile::open(int fd, uint64_t node_guid) {
  Table header{};
  // A descriptor of anything else (a kernel uverbs device, a socket) is not ours.
  if (pread(fd, &header, sizeof header.magic + sizeof header.node_guid, 0) !=
          static_cast<ssize_t>(sizeof header.magic + sizeof header.node_guid) ||
      header.magic != Table::kMagic || header.node_guid != node_guid)
    return Status::error(EINVAL);
  Table* t = map_table(fd);
  if (t == nullptr) return Status::error(errno);
  auto* f = new (std::nothrow) ContextFile(fd, t);
  if (f == nullptr) {
    util::raw_munmap(t, sizeof(Table));
    return Status::error(ENOMEM);
  }
  return f;
}

ContextFile::~ContextFile() {
  util::raw_munmap(table_, sizeof(Table));
  if (fd_ >= 0) close(fd_);
}

int ContextFile::release_fd() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

bool ContextFile::add_pd(uint32_t id) {
  for (std::atomic<uint32_t>& slot : table_->pds) {
    uint32_t expected = 0;
    if (slot.load(std::memory_order_relaxed) == 0 && slot.compare_exchange_strong(expected, id)) return true;
  }
  return false;
}

void ContextFile::remove_pd(uint32_t id) {
  for (std::atomic<uint32_t>& slot : table_->pds) {
    uint32_t expected = id;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

bool ContextFile::has_pd(uint32_t id) const {
  if (id == 0) return false;
  for (const std::atomic<uint32_t>& slot : table_->pds)
    if (slot.load(std::memory_order_acquire) == id) return true;
  return false;
}

}  // namespace softverbs::verbs
