#include "verbs/context.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <new>

#include "shm/port_pkeys.h"

namespace softverbs::verbs {

Result<Context*> Context::open(ibv_device* device, Placement placement) { return make(device, -1, placement); }

Result<Context*> Context::import(ibv_device* device, int cmd_fd, Placement placement) {
  return make(device, cmd_fd, placement);
}

Result<Context*> Context::make(ibv_device* device, int import_fd, Placement placement) {
  Result<Device*> dev = Device::get();
  if (!dev.is_ok()) return dev.status();
  const uint64_t guid = dev.value()->seg().header().node_guid;
  Result<ContextFile*> file = import_fd >= 0 ? ContextFile::open(import_fd, guid) : ContextFile::create(guid);
  if (!file.is_ok()) return file.status();
  auto* ctx = new (std::nothrow) Context();
  if (ctx == nullptr) {
    if (import_fd >= 0) file.value()->release_fd();  // a failed import leaves the caller's fd open
    delete file.value();
    return Status::error(ENOMEM);
  }
  ctx->file_ = file.value();
  ctx->placement_ = placement;
  ctx->vctx_.context.async_fd = -1;  // nothing to close yet
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    if (import_fd >= 0) ctx->file_->release_fd();
    delete ctx;
    return Status::error(errno);
  }
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  ctx->device_ = dev.value();
  ctx->async_write_fd_ = fds[1];
  ibv_context& c = ctx->vctx_.context;
  c.device = device;
  c.async_fd = fds[0];
  // No kernel command channel exists: the descriptor is the context's file
  // (context_file.h), which ibv_import_device accepts in another process.
  c.cmd_fd = ctx->file_->fd();
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx->vctx_.sz = sizeof(verbs_context);
  // From here on it hears of the port's events, as a uverbs file does.
  ctx->device_->add_context(ctx);
  return ctx;
}

Context::~Context() {
  if (device_ != nullptr && async_write_fd_ >= 0) device_->remove_context(this);
  ibv_context& c = vctx_.context;
  if (c.async_fd >= 0) ::close(c.async_fd);
  delete file_;  // closes cmd_fd
  if (async_write_fd_ >= 0) ::close(async_write_fd_);
  pthread_mutex_destroy(&c.mutex);
}

void Context::raise_async(ibv_event_type type, AsyncObject kind, void* object) {
  AsyncRecord r{static_cast<uint32_t>(type), kind, object};
  // A full pipe (64 KiB of unread events) loses the event rather than block
  // the caller; the kernel's event queue has the same limit in spirit.
  ssize_t n = ::write(async_write_fd_, &r, sizeof r);
  (void)n;
}

Status Context::next_async(AsyncRecord* out) {
  for (;;) {
    ssize_t n = ::read(vctx_.context.async_fd, out, sizeof *out);
    if (n == static_cast<ssize_t>(sizeof *out)) return Status::ok();
    if (n < 0 && errno == EINTR) continue;
    return Status::error(n < 0 ? errno : EIO);
  }
}

namespace {
std::atomic<SubnetPKeyAt> g_subnet_pkey_at{nullptr};
}  // namespace

void set_subnet_pkey_at(SubnetPKeyAt reader) { g_subnet_pkey_at.store(reader, std::memory_order_release); }

uint16_t pkey_at(Context& ctx, unsigned index) {
  if (ctx.ca() == 0) return shm::pkey_at(ctx.device().seg().header(), index);
  const SubnetPKeyAt reader = g_subnet_pkey_at.load(std::memory_order_acquire);
  return reader != nullptr ? reader(ctx.device().seg(), ctx.ca(), index) : 0;
}

}  // namespace softverbs::verbs
