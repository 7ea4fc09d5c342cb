// lock_service: the three roles. The launcher forks the server and the
// clients before any of them touches a device; each role returns its exit
// status (0: its part of the verdict held).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace lock_service {

int launch(const Options& options);
// `fds[i]` is the socket to client i (client ids are i + 1).
int run_server(const Options& options, const std::vector<int>& fds);
int run_client(const Options& options, uint32_t client_id, int fd);

// The device the processes open: --device, else softverbs_roce0 with --roce,
// else softverbs0.
std::string device_name(const Options& options);

}  // namespace lock_service
