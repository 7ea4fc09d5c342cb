#include "verbs/dm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "shm/limits.h"
#include "verbs/context.h"

namespace softverbs::verbs {

Result<Dm*> Dm::alloc(Context* ctx, const ibv_alloc_dm_attr& attr) {
  if (attr.comp_mask != 0 || attr.length == 0) return Status::error(EINVAL);
  if (attr.log_align_req > kMaxDmLogAlign) return Status::error(EINVAL);
  if (attr.length > kMaxDmSize) return Status::error(ENOMEM);
  const uint64_t size = (attr.length + shm::kPageSize - 1) & ~(shm::kPageSize - 1);
  const int fd = memfd_create("softverbs-dm", MFD_CLOEXEC);
  if (fd < 0) return Status::error(errno == EMFILE || errno == ENFILE ? errno : ENOMEM);
  struct stat st {};
  // fallocate, not ftruncate alone: a full /dev/shm fails here, not at a copy.
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0 ||
      fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::error(ENOMEM);
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return Status::error(ENOMEM);
  }
  auto* dm = new (std::nothrow) Dm();
  if (dm == nullptr) {
    munmap(p, size);
    ::close(fd);
    return Status::error(ENOMEM);
  }
  static std::atomic<uint32_t> handles{0};
  dm->ctx = ctx;
  dm->base = static_cast<char*>(p);
  dm->length = attr.length;
  dm->backing = fabric::RegionExport{fd, reinterpret_cast<uint64_t>(p), size, st.st_ino, st.st_dev, 0};
  dm->ibv.context = ctx->ibv();
  dm->ibv.handle = handles.fetch_add(1, std::memory_order_relaxed) + 1;
  return dm;
}

Status Dm::free() {
  // ibv_free_dm(3): the MRs registered on it go first.
  if (mrs.load(std::memory_order_acquire) != 0) return Status::error(EBUSY);
  munmap(base, backing.size);
  ::close(backing.fd);
  delete this;
  return Status::ok();
}

Status Dm::copy_to(uint64_t offset, const void* src, size_t n) {
  if (!contains(offset, n)) return Status::error(EINVAL);
  std::memcpy(base + offset, src, n);
  return Status::ok();
}

Status Dm::copy_from(void* dst, uint64_t offset, size_t n) const {
  if (!contains(offset, n)) return Status::error(EINVAL);
  std::memcpy(dst, base + offset, n);
  return Status::ok();
}

}  // namespace softverbs::verbs
