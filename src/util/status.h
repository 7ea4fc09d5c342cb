// Value-type errors for the inside of softverbs.
//
// A Status is an errno value (0 = OK); a Result<T> is a value or an errno.
// Nothing inside the library throws; each ABI entry point turns these into
// the contract of its verb (return code, or NULL with errno set).
#pragma once

#include <cerrno>
#include <utility>

namespace softverbs {

class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  static constexpr Status ok() { return Status(); }
  static constexpr Status error(int err) { return Status(err); }

  constexpr bool is_ok() const { return err_ == 0; }
  constexpr int code() const { return err_; }

 private:
  constexpr explicit Status(int err) : err_(err) {}
  int err_ = 0;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : err_(status.is_ok() ? EINVAL : status.code()) {}  // NOLINT

  bool is_ok() const { return err_ == 0; }
  int code() const { return err_; }
  Status status() const { return err_ == 0 ? Status::ok() : Status::error(err_); }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T* operator->() { return &value_; }
  T& operator*() { return value_; }

 private:
  T value_{};
  int err_ = 0;
};

}  // namespace softverbs

#define SV_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::softverbs::Status sv_status_ = (expr); \
    if (!sv_status_.is_ok()) return sv_status_; \
  } while (0)
