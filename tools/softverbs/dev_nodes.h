// The /dev/infiniband nodes that RDMA software checks before it uses a device.
//
// UCX lists an RDMA device only when /dev/infiniband/<ibv_device.dev_name>
// is an accessible character device (UCX 1.13, uct_ib_device_is_accessible);
// it never opens it. softverbs has no kernel part, so its nodes are stand-ins
// carrying /dev/null's numbers: present, accessible, harmless if opened.
//
//   setup_dev_nodes()      root, once per boot: makes them in the real /dev.
//   enter_dev_nodes_namespace()  anyone: moves this process into a private
//       mount namespace (inside a user namespace when not root) whose /dev
//       has them; `softverbs run --dev-nodes` calls it before exec. The rest
//       of /dev, the device segment in /dev/shm included, is the host's own
//       (bind-mounted), so the program shares the device with everyone else.
//
// Single-threaded callers only (unshare(CLONE_NEWUSER) refuses threaded ones).
#pragma once

#include <string>
#include <vector>

namespace softverbs::cli {

// "uverbs_" + each device name softverbs offers (device_list.cc's dev_name).
const std::vector<std::string>& dev_node_names();

// Creates (or with `remove`, deletes) the nodes in /dev/infiniband.
// Returns the exit code; reasons go to stderr.
int setup_dev_nodes(bool remove);

// True once every node exists in this process's view of /dev (at once when
// they exist already). False with *error set when it cannot be arranged.
[[nodiscard]] bool enter_dev_nodes_namespace(std::string* error);

}  // namespace softverbs::cli
