// Reading an enum field a C caller filled in.
//
// C lets a program store any int in an enum-typed field; in C++ loading a
// value outside the enum's range is undefined (UBSan reports it). Fields of
// rdma-core structs that come from the application are therefore read as
// their underlying integer first and validated as integers.
#pragma once

#include <cstring>
#include <type_traits>

namespace softverbs::util {

template <typename Enum>
std::underlying_type_t<Enum> raw_enum(const Enum& field) {
  std::underlying_type_t<Enum> value;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

}  // namespace softverbs::util
