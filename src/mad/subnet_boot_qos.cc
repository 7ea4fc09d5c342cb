#include "mad/subnet_boot_qos.h"

#include <cstring>

namespace softverbs::mad {

void boot_subnet_qos(const Topology& t, shm::SubnetNode* nodes) {
  for (size_t i = 0; i < t.nodes.size() && i < shm::kSubnetMaxNodes; ++i) {
    const TopoNode& n = t.nodes[i];
    shm::SubnetNode& st = nodes[i];
    for (unsigned port = n.is_switch() ? 0 : 1; port <= n.num_ports && port < shm::kSubnetMaxPorts; ++port) {
      const BootQos& b = !n.is_switch() ? t.ca_qos : port == 0 ? t.sw0_qos : t.swe_qos;
      if (!b.given) continue;
      st.ports[port].qos = b.tables;
      if (!n.is_switch()) continue;
      uint8_t packed[8];
      shm::pack_sl2vl(b.tables.sl_to_vl, packed);
      for (unsigned in = 0; in <= n.num_ports && in < shm::kSubnetMaxPorts; ++in)
        std::memcpy(st.sw.sl2vl[in][port], packed, sizeof packed);
    }
  }
}

}  // namespace softverbs::mad
