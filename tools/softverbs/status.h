// `softverbs status [--json]`: what the device segment holds right now.
//
// Defined in status.cc. tools/softverbs/CMakeLists.txt compiles status.cc (and
// links softverbs_core) only when the file exists, and then defines
// SOFTVERBS_HAVE_STATUS=1 for main.cc; without it the subcommand says it is
// not built and exits 1.
#pragma once

namespace softverbs::cli {

// Prints the device state on stdout, as text or (json) one JSON document.
// Returns the process exit code.
[[nodiscard]] int run_status(bool json);

}  // namespace softverbs::cli
