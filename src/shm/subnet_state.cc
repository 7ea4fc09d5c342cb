#include "shm/subnet_state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <type_traits>

#include "shm/segment.h"
#include "shm/port_pkeys.h"
#include "util/log.h"

namespace softverbs::shm {
namespace {

constexpr uint64_t kSubnetMagic = 0x5356'5355'424e'0008ull;  // "SVSUBN", version 8 (SubnetTraffic per SL and VL, discards, multicast)
static_assert(std::is_trivially_copyable_v<SubnetNode>, "the file is shared memory");

void init_file(SubnetFile* f) {
  for (SubnetNode& n : f->nodes) {
    for (SubnetPort& p : n.ports) {
      p = SubnetPort{};
      p.qos = default_qos();
      p.pkeys = default_pkeys();
    }
    n.sw = SubnetSwitch{};
    std::memset(n.sw.lft, kLftUnset, sizeof n.sw.lft);
    std::memset(n.sw.mft, 0, sizeof n.sw.mft);
    uint8_t boot[8];
    pack_sl2vl(default_qos().sl_to_vl, boot);
    for (auto& in : n.sw.sl2vl)
      for (auto& out : in) std::memcpy(out, boot, sizeof boot);
  }
  init_shared_mutex(&f->lock);
}

}  // namespace

Result<std::unique_ptr<SubnetState>> SubnetState::open(const std::string& path,
                                                       const std::function<void(SubnetNode* nodes)>& on_create) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_CREAT, 0600);
  if (fd < 0) {
    SV_LOG(kError, "cannot open subnet state %s: %s", path.c_str(), std::strerror(errno));
    return Status::error(errno);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    SV_LOG(kError, "subnet state %s must belong to uid %u with mode 0600", path.c_str(),
           static_cast<unsigned>(geteuid()));
    ::close(fd);
    return Status::error(EACCES);
  }
  // flock serialises creation; the kernel drops it if the creator dies.
  while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  const bool fresh = fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < sizeof(SubnetFile);
  if (fresh && (ftruncate(fd, 0) != 0 || ftruncate(fd, sizeof(SubnetFile)) != 0)) {
    const int err = errno;
    flock(fd, LOCK_UN);
    ::close(fd);
    return Status::error(err);
  }
  void* p = mmap(nullptr, sizeof(SubnetFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  if (p == MAP_FAILED) {
    flock(fd, LOCK_UN);
    ::close(fd);
    return Status::error(err);
  }
  auto* f = static_cast<SubnetFile*>(p);
  if (__atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) != kSubnetMagic) {
    init_file(f);
    if (on_create) on_create(f->nodes);
    __atomic_store_n(&f->magic, kSubnetMagic, __ATOMIC_RELEASE);
  }
  // The mapping holds the open file, so closing alone would keep the flock.
  flock(fd, LOCK_UN);
  ::close(fd);
  std::unique_ptr<SubnetState> s(new (std::nothrow) SubnetState());
  if (!s) {
    munmap(p, sizeof(SubnetFile));
    return Status::error(ENOMEM);
  }
  s->file_ = f;
  return s;
}

SubnetState::~SubnetState() {
  if (file_ != nullptr) munmap(file_, sizeof(SubnetFile));
}

void SubnetState::lock() const {
  if (pthread_mutex_lock(&file_->lock) == EOWNERDEAD) pthread_mutex_consistent(&file_->lock);
}

void SubnetState::unlock() const { pthread_mutex_unlock(&file_->lock); }

}  // namespace softverbs::shm
