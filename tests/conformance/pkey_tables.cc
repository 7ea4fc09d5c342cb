// Prints every listed device's P_Key table as the verbs give it
// (ibv_query_pkey), a line per valid entry: "<device> <index> 0x<pkey>".
// ibv_devinfo prints only the table's size; topology_tools.sh multi-ca
// checks what an SM's partitions gave each CA.
#include <endian.h>
#include <infiniband/verbs.h>

#include <cstdio>

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return 1;
  int rc = 0;
  for (int i = 0; i < n; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    ibv_port_attr port{};
    if (ctx == nullptr || ibv_query_port(ctx, 1, &port) != 0) {
      std::fprintf(stderr, "%s: cannot open or query\n", ibv_get_device_name(list[i]));
      rc = 1;
      if (ctx != nullptr) ibv_close_device(ctx);
      continue;
    }
    for (int index = 0; index < port.pkey_tbl_len; ++index) {
      __be16 pkey = 0;
      if (ibv_query_pkey(ctx, 1, index, &pkey) != 0) {
        rc = 1;
        break;
      }
      if (be16toh(pkey) != 0) std::printf("%s %d 0x%04x\n", ibv_get_device_name(list[i]), index, be16toh(pkey));
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  return rc;
}
