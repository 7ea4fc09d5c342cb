// Running Debian's infiniband-diags and opensm against our libraries from a
// test (port_state_test.cc, partition_test.cc), bounded in time.
#pragma once

#include <dlfcn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace softverbs::integration {

// Debian's tools are not instrumented, and our libraries in a sanitizer
// tree are: the sanitizer's runtime must be loaded first, or a tool crashes
// in them (opensm, which starts threads of its own, under TSan); the tools'
// own leaks and races are not ours to report.
#if defined(__SANITIZE_ADDRESS__)
extern "C" void __asan_init();
inline void* sanitizer_runtime_symbol() { return reinterpret_cast<void*>(&__asan_init); }
inline constexpr char kToolSanitizerOptions[] = "ASAN_OPTIONS=detect_leaks=0";
#elif defined(__SANITIZE_THREAD__)
extern "C" void __tsan_init();
inline void* sanitizer_runtime_symbol() { return reinterpret_cast<void*>(&__tsan_init); }
inline constexpr char kToolSanitizerOptions[] = "TSAN_OPTIONS=report_bugs=0";
#else
inline void* sanitizer_runtime_symbol() { return nullptr; }
inline constexpr char kToolSanitizerOptions[] = "";
#endif
inline std::string tool_env() {
  Dl_info info{};
  void* runtime = sanitizer_runtime_symbol();
  if (runtime == nullptr || dladdr(runtime, &info) == 0 || info.dli_fname == nullptr) return "";
  return std::string("env LD_PRELOAD=") + info.dli_fname + " " + kToolSanitizerOptions + " ";
}

// Whether Debian's `tools` are installed, asked without the sanitizer
// runtime (tool_env): `which` is a dash script, and dash crashes with TSan's
// runtime preloaded (the tests skipped as if nothing were installed).
inline bool installed(const std::string& tools) {
  const std::string cmd = "which " + tools + " > /dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// Debian's tools find our libibumad beside our libibverbs.
inline void tools_use_our_libraries() {
  const std::string lib = SOFTVERBS_ITEST_EXPECTED_LIBIBVERBS;
  setenv("LD_LIBRARY_PATH", lib.substr(0, lib.rfind('/')).c_str(), 1);
}

// Debian's tool against our libibumad (beside our libibverbs), killed after
// `seconds`; its exit status, its output appended to `out`.
inline int tool(const std::string& args, std::string* out = nullptr, int seconds = 20) {
  const std::string cmd = "timeout " + std::to_string(seconds) + " " + tool_env() + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr)
    if (out != nullptr) *out += buf;
  const int rc = pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace softverbs::integration
