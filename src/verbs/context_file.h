// What a context's command descriptor (ibv_context::cmd_fd) refers to: a
// small memfd that names the device and the protection domains allocated
// through the contexts sharing it.
//
// rdma-core shares a device context between processes by passing its
// cmd_fd (SCM_RIGHTS, pidfd_getfd) to ibv_import_device(3); PDs and MRs are
// then imported by handle (ibv_import_pd(3), ibv_import_mr(3)). softverbs
// has no kernel object behind the descriptor, so the descriptor itself is
// the shared object: whoever holds it can read which device it belongs to
// and which PD handles are live in it.
//
// Thread- and process-safe: the PD table is updated with atomics in the
// shared mapping; a PD handle is a device-wide PD id (Device::new_pd_id).
#pragma once

#include <atomic>
#include <cstdint>

#include "util/status.h"

namespace softverbs::verbs {

class ContextFile {
 public:
  static constexpr uint32_t kMaxPds = 1024;

  // A new file for `node_guid`'s device; fd() is then the context's cmd_fd.
  static Result<ContextFile*> create(uint64_t node_guid);
  // The file behind `fd` (taken over: closed with the object); EINVAL when
  // it is not a softverbs context of the device `node_guid`.
  static Result<ContextFile*> open(int fd, uint64_t node_guid);
  ~ContextFile();

  int fd() const { return fd_; }
  // ibv_close_device closes the descriptor; ibv_unimport_device leaves it
  // to the caller.
  int release_fd();

  // false when the table is full: the PD works, but cannot be imported.
  bool add_pd(uint32_t id);
  void remove_pd(uint32_t id);
  bool has_pd(uint32_t id) const;

 private:
  struct Table;
  static Table* map_table(int fd);
  ContextFile(int fd, Table* table) : fd_(fd), table_(table) {}
  int fd_;
  Table* table_;
};

}  // namespace softverbs::verbs
