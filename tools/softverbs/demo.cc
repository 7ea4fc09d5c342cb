#include "demo.h"

#include <cstdio>
#include <string>
#include <vector>

namespace softverbs::cli {

int run_demo(const DemoOptions& options) {
  std::string error;
  if (!apply_library_env(options.env, "softverbs demo", &error)) {
    std::fprintf(stderr, "softverbs demo: %s\n", error.c_str());
    return 126;
  }
  std::vector<std::string> argv = {
      executable_dir() + "/softverbs-demo",
      "--size", std::to_string(options.size),
      "--iters", std::to_string(options.iters),
  };
  return exec_program(argv, "softverbs demo");
}

}  // namespace softverbs::cli
