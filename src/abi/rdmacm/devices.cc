// rdma_get_devices / rdma_free_devices: the process's one open context per
// device, the same ones the CM's ids report in id->verbs.
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>

#include "abi/rdmacm/abi.h"
#include "cm/agent.h"

SV_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  const auto& contexts = softverbs::cm::Agent::get().contexts();
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
