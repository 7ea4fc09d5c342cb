#include "verbs/port_config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "shm/segment.h"
#include "util/log.h"
#include "util/raw_socket.h"

namespace softverbs::verbs {
namespace {

constexpr size_t kMaxGids = 16;

bool parse_addr(const std::string& text, wire::Gid* out) {
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    const auto* b = reinterpret_cast<const uint8_t*>(&v4.s_addr);
    *out = wire::gid_from_ipv4(b[0], b[1], b[2], b[3]);
    return true;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::memcpy(out->data(), v6.s6_addr, 16);
    return true;
  }
  return false;
}

// The largest IB MTU whose packets fit the link that carries `gid`: the
// interface MTU less IP (IPv6's 40 bytes, the larger), UDP, BTH, RETH,
// ImmDt and ICRC — as Soft-RoCE derives its port MTU from its netdev.
// IBV_MTU_1024 (what 1500-byte Ethernet carries) when the link is unknown.
ibv_mtu mtu_for_link(const wire::Gid& gid) {
  constexpr int kOverhead = 40 + 8 + 12 + 16 + 4 + 4;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return IBV_MTU_1024;
  std::string name;
  for (ifaddrs* a = list; a != nullptr && name.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    wire::Gid g{};
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr);
      g = wire::gid_from_ipv4(b[0], b[1], b[2], b[3]);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      std::memcpy(g.data(), reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr.s6_addr, 16);
    } else {
      continue;
    }
    if (g == gid) name = a->ifa_name;
  }
  freeifaddrs(list);
  if (name.empty() || name.size() >= IFNAMSIZ) return IBV_MTU_1024;
  ifreq req{};
  std::memcpy(req.ifr_name, name.c_str(), name.size());
  const int fd = raw_socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const bool ok = fd >= 0 && ioctl(fd, SIOCGIFMTU, &req) == 0;
  if (fd >= 0) close(fd);
  if (!ok) return IBV_MTU_1024;
  for (ibv_mtu m : {IBV_MTU_4096, IBV_MTU_2048, IBV_MTU_1024, IBV_MTU_512, IBV_MTU_256})
    if ((128 << m) + kOverhead <= req.ifr_mtu) return m;
  return IBV_MTU_256;
}

}  // namespace

PortConfig parse_port_config(const char* roce_addr, const char* roce_port, const char* roce_mtu,
                             const char* faults) {
  PortConfig c;
  c.device_name = "softverbs0";
  if (faults != nullptr && *faults != '\0') {
    fabric::fault::FaultConfigParse f = fabric::fault::parse_fault_config(faults);
    if (!f.ok()) {
      c.error = "SOFTVERBS_FAULTS: " + f.error;
      return c;
    }
    c.faults = f.config;
  }
  if (roce_addr == nullptr || *roce_addr == '\0') return c;
  c.roce = true;
  c.device_name = "softverbs_roce0";
  c.mtu = IBV_MTU_1024;
  std::string all(roce_addr);
  size_t start = 0;
  while (start <= all.size()) {
    const size_t comma = all.find(',', start);
    const std::string item = all.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? all.size() + 1 : comma + 1;
    if (item.empty()) continue;
    wire::Gid gid;
    if (!parse_addr(item, &gid)) {
      c.error = "SOFTVERBS_ROCE_ADDR: not an IPv4 or IPv6 address: '" + item + "'";
      return c;
    }
    if (c.gids.size() == kMaxGids) {
      c.error = "SOFTVERBS_ROCE_ADDR: more than 16 addresses";
      return c;
    }
    c.gids.push_back(gid);
    c.addrs.push_back(item);
  }
  if (c.gids.empty()) c.error = "SOFTVERBS_ROCE_ADDR: no address";
  if (roce_port != nullptr && *roce_port != '\0') {
    char* end = nullptr;
    const long p = std::strtol(roce_port, &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535) c.error = "SOFTVERBS_ROCE_PORT: not a UDP port: " + std::string(roce_port);
    else c.udp_port = static_cast<uint16_t>(p);
  }
  if (roce_mtu != nullptr && *roce_mtu != '\0') {
    const std::string m(roce_mtu);
    if (m == "256") c.mtu = IBV_MTU_256;
    else if (m == "512") c.mtu = IBV_MTU_512;
    else if (m == "1024") c.mtu = IBV_MTU_1024;
    else if (m == "2048") c.mtu = IBV_MTU_2048;
    else if (m == "4096") c.mtu = IBV_MTU_4096;
    else c.error = "SOFTVERBS_ROCE_MTU: one of 256, 512, 1024, 2048, 4096, not " + m;
  }
  return c;
}

void parse_link_config(const char* link, const char* pacing, PortConfig* c) {
  // What the port reported before links had a rate: 4X EDR, a RoCE port 1X.
  c->link = shm::LinkConfig{};
  if (c->roce) c->link.width = 1;
  if (link != nullptr && *link != '\0') {
    c->link_set = true;
    if (!shm::parse_link_rate(link, &c->link))
      c->error = "SOFTVERBS_LINK: a width and a speed such as 4xSDR or 1xEDR, not " + std::string(link);
  }
  if (pacing != nullptr && *pacing != '\0') {
    c->link_set = true;
    const std::string p(pacing);
    if (p == "1") c->link.paced = true;
    else if (p != "0") c->error = "SOFTVERBS_LINK_PACING: 0 or 1, not " + p;
  }
}

const PortConfig& port_config() {
  static const PortConfig config = [] {
    PortConfig c = parse_port_config(std::getenv("SOFTVERBS_ROCE_ADDR"), std::getenv("SOFTVERBS_ROCE_PORT"),
                                     std::getenv("SOFTVERBS_ROCE_MTU"), std::getenv("SOFTVERBS_FAULTS"));
    // Read where the segment is created (shm::Segment::external_sm_configured).
    if (const char* sm = std::getenv("SOFTVERBS_SM");
        c.error.empty() && sm != nullptr && *sm != '\0' && std::strcmp(sm, "none") != 0 && std::strcmp(sm, "builtin") != 0)
      c.error = "SOFTVERBS_SM: 'none' (an external SM such as opensm) or 'builtin', not '" + std::string(sm) + "'";
    if (c.error.empty()) parse_link_config(std::getenv("SOFTVERBS_LINK"), std::getenv("SOFTVERBS_LINK_PACING"), &c);
    if (!c.error.empty()) SV_LOG(kError, "%s", c.error.c_str());
    const char* mtu = std::getenv("SOFTVERBS_ROCE_MTU");
    if (c.roce && c.error.empty() && (mtu == nullptr || *mtu == '\0')) c.mtu = mtu_for_link(c.gids.front());
    return c;
  }();
  return config;
}

std::string device_segment_path() {
  if (const char* p = std::getenv("SOFTVERBS_DEVICE_PATH"); p != nullptr && *p != '\0') return p;
  const PortConfig& c = port_config();
  std::string path = "/dev/shm/softverbs-" + std::to_string(geteuid());
  if (c.roce && !c.addrs.empty()) {
    std::string a = c.addrs.front();
    for (char& ch : a)
      if (ch == ':') ch = '_';
    path += "-roce-" + a;
  }
  return path + "-v" + std::to_string(shm::kLayoutVersion);
}

int local_gid_index(const uint8_t gid[16]) { return port_config().gid_index(gid); }

}  // namespace softverbs::verbs
