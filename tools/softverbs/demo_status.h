// softverbs-demo: a value-type error for the demo program (no exceptions).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>
#include <utility>

namespace softverbs::demo {

// OK, or a human-readable reason. The demo prints the first failure and exits 1.
class [[nodiscard]] Status {
 public:
  static Status ok() { return Status(); }
  static Status fail(const char* fmt, ...) __attribute__((format(printf, 1, 2))) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    Status s;
    s.message_ = buf[0] != '\0' ? buf : "failed";
    return s;
  }
  bool is_ok() const { return message_.empty(); }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

}  // namespace softverbs::demo

#define DEMO_TRY(expr)                                    \
  do {                                                    \
    ::softverbs::demo::Status demo_status_ = (expr);      \
    if (!demo_status_.is_ok()) return demo_status_;       \
  } while (0)
