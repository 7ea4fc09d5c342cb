// The sysfs tree of the softverbs device.
//
// Software that looks for an RDMA device in sysfs rather than through verbs
// (Open MPI's verbs components stat <sysfs>/class/infiniband; tools read
// node_guid, ports/1/state, gids/N) finds ours under ibv_get_sysfs_path().
// The tree sits beside the device segment: class/infiniband/<dev>/... and
// class/infiniband_verbs/uverbs_<dev>/... are files softverbs writes; every
// other class and top-level directory is a symlink into the real /sys, so
// callers reading non-RDMA attributes through the same root still find them.
//
// Thread-safe. Built once per process; processes of one device share it
// (the first one to finish renames its copy into place).
#pragma once

namespace softverbs::abi {

// The root of the tree, or nullptr when there is no device or the tree
// cannot be written (then rdma-core's default /sys applies).
const char* synthetic_sysfs_root();

}  // namespace softverbs::abi

// rdma-core declares it in infiniband/driver.h, which providers include.
extern "C" const char* ibv_get_sysfs_path(void);
