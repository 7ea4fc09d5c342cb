// An opened device context: the ABI's verbs_context plus its async event queue.
//
// Async events travel through a pipe (context->async_fd, pollable, as the
// kernel's uverbs event file is): whoever raises one writes an AsyncRecord;
// ibv_get_async_event reads it.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "util/status.h"
#include "verbs/context_file.h"
#include "verbs/device.h"

namespace softverbs::verbs {

enum class AsyncObject : uint32_t { kNone, kQp, kCq, kSrq, kPort };

struct AsyncRecord {
  uint32_t type;  // enum ibv_event_type
  AsyncObject kind;
  void* object;   // the event token of a QP, CQ or SRQ (never its address), or the port number
};

// Which CA's port 1 a context's QPs sit behind (shm::SharedQp::ca): 0 the
// device's own CA, k > 0 the topology's k-th other CA (issue 19); `subnet`:
// the device has a topology, so their peers may sit behind other CAs' ports.
struct Placement {
  uint8_t ca = 0;
  bool subnet = false;
};

class Context {
 public:
  static Result<Context*> open(ibv_device* device, Placement placement = {});
  // ibv_import_device(3): a context sharing `cmd_fd`'s (taken over) file.
  static Result<Context*> import(ibv_device* device, int cmd_fd, Placement placement = {});
  static Context* from(ibv_context* c) {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(Context, vctx_) -
                                      offsetof(verbs_context, context));
  }
  ~Context();

  ibv_context* ibv() { return &vctx_.context; }
  verbs_context* vctx() { return &vctx_; }
  Device& device() { return *device_; }
  // Fixed before the context is registered for the port's events (the
  // service thread reads it then).
  uint8_t ca() const { return placement_.ca; }
  bool in_subnet() const { return placement_.subnet; }
  // The file behind cmd_fd: the PD handles importable through it.
  ContextFile& file() { return *file_; }

  void raise_async(ibv_event_type type, AsyncObject kind, void* object);
  // Blocks (unless async_fd is non-blocking) for the next event.
  Status next_async(AsyncRecord* out);

 private:
  Context() = default;
  static Result<Context*> make(ibv_device* device, int import_fd, Placement placement);

  verbs_context vctx_{};  // its ibv_context is what the application holds
  Device* device_ = nullptr;
  int async_write_fd_ = -1;
  ContextFile* file_ = nullptr;  // owns cmd_fd
  Placement placement_;
};

// Another CA's P_Key table is the subnet's (mad/ca_devices.h), which the
// verbs layer does not include: the ABI layer hands in its reader when it
// lists the topology's CAs.
using SubnetPKeyAt = uint16_t (*)(const shm::Segment& seg, unsigned ca, unsigned index);
void set_subnet_pkey_at(SubnetPKeyAt reader);
// The P_Key at `index` of the context's port (0, invalid, past the table).
uint16_t pkey_at(Context& ctx, unsigned index);

}  // namespace softverbs::verbs
