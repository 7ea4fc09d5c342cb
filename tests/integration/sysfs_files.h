// Reading the device's sysfs tree in the tests that check it (sysfs_test.cc,
// port_state_test.cc).
#pragma once

#include <fstream>
#include <string>

namespace softverbs::integration {

// The first line of a file, without its newline; empty if it cannot be read.
inline std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace softverbs::integration
