// The contexts the CM hands out (id->verbs, rdma_get_devices).
#pragma once

#include <infiniband/verbs.h>

#include <vector>

namespace softverbs::rdmacm_abi {

// Every device of the process, opened once on first use and never closed.
const std::vector<ibv_context*>& device_contexts();

}  // namespace softverbs::rdmacm_abi
