// rdma_get_devices / rdma_free_devices: the process's one open context per
// device, the same ones the CM's ids report in id->verbs (contexts are
// opened once and kept for the life of the process, as rdma-core's are).
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "abi/rdmacm/abi.h"
#include "abi/rdmacm/devices.h"

namespace softverbs::rdmacm_abi {

const std::vector<ibv_context*>& device_contexts() {
  static std::once_flag once;
  static std::vector<ibv_context*> contexts;
  std::call_once(once, [] {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) return;
    for (int i = 0; i < n; ++i) {
      if (ibv_context* ctx = ibv_open_device(list[i])) contexts.push_back(ctx);
    }
    ibv_free_device_list(list);
  });
  return contexts;
}

}  // namespace softverbs::rdmacm_abi

SV_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  const auto& contexts = softverbs::rdmacm_abi::device_contexts();
  auto* list = static_cast<ibv_context**>(std::calloc(contexts.size() + 1, sizeof(ibv_context*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < contexts.size(); ++i) list[i] = contexts[i];
  if (num_devices != nullptr) *num_devices = static_cast<int>(contexts.size());
  return list;
}

SV_EXPORT void rdma_free_devices(ibv_context** list) { std::free(list); }
