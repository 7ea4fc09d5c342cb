// Prints the name libibumad's umad_str.h functions give for every class, for
// every method and attribute of the classes that name theirs (and some that
// do not), and for statuses across all their bits, from the library named on
// the command line (dlopen'ed alone, so two libibumad.so.3 never meet in one
// process). umad_strings.sh runs it on Debian's library and on ours and
// wants the same lines.
//   umad_strings_dump LIBRARY
#include <dlfcn.h>
#include <endian.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>

namespace {
using ClassStr = const char* (*)(uint8_t);
using MethodStr = const char* (*)(uint8_t, uint8_t);
using AttrStr = const char* (*)(uint8_t, uint16_t);
using StatusStr = const char* (*)(uint16_t);

template <class F>
F symbol(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (f == nullptr) {
    std::fprintf(stderr, "%s: %s\n", name, dlerror());
    return nullptr;
  }
  return reinterpret_cast<F>(f);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  auto class_str = symbol<ClassStr>(lib, "umad_class_str");
  auto method_str = symbol<MethodStr>(lib, "umad_method_str");
  auto attr_str = symbol<AttrStr>(lib, "umad_attribute_str");
  auto common_status = symbol<StatusStr>(lib, "umad_common_mad_status_str");
  auto sa_status = symbol<StatusStr>(lib, "umad_sa_mad_status_str");
  if (!class_str || !method_str || !attr_str || !common_status || !sa_status) return 1;
  for (unsigned c = 0; c < 256; ++c) std::printf("class %#x %s\n", c, class_str(uint8_t(c)));
  for (unsigned c : {0x01u, 0x81u, 0x03u, 0x04u, 0x07u, 0x0au, 0x10u})
    for (unsigned m = 0; m < 256; ++m) std::printf("method %#x %#x %s\n", c, m, method_str(uint8_t(c), uint8_t(m)));
  for (unsigned c : {0x01u, 0x81u, 0x03u, 0x04u, 0x07u, 0x0au, 0x10u})
    for (unsigned a = 0; a < 0x10000; a = a < 0x200 ? a + 1 : a + 0x101)
      std::printf("attr %#x %#x %s\n", c, a, attr_str(uint8_t(c), htobe16(uint16_t(a))));
  for (unsigned s = 0; s < 0x10000; s = s < 0x400 ? s + 1 : s + 0x100) {
    std::printf("status %#x %s\n", s, common_status(htobe16(uint16_t(s))));
    std::printf("sa status %#x %s\n", s, sa_status(htobe16(uint16_t(s))));
  }
  return 0;
}
