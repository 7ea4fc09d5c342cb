#include "verbs/sysfs_port.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "shm/port_pkeys.h"
#include "verbs/device_attrs.h"
#include "verbs/port_config.h"

namespace softverbs::verbs {
namespace {

namespace fs = std::filesystem;

// What ports/1/state prints for the states ibv_query_port gives (the
// kernel's ib_port_state_to_str with its "N: " prefix).
const char* port_state_text(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN: return "1: DOWN";
    case IBV_PORT_INIT: return "2: INIT";
    case IBV_PORT_ARMED: return "3: ARMED";
    case IBV_PORT_ACTIVE: return "4: ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "5: ACTIVE_DEFER";
    default: return "0: NOP";
  }
}

// The kernel's phys_state_to_str (IBA 14.2.5.6 PortPhysicalState).
const char* phys_state_text(uint8_t s) {
  switch (s) {
    case 1: return "1: Sleep";
    case 2: return "2: Polling";
    case 3: return "3: Disabled";
    case 4: return "4: PortConfigurationTraining";
    case 5: return "5: LinkUp";
    case 6: return "6: LinkErrorRecovery";
    case 7: return "7: Phy Test";
    default: return "0: <unknown>";
  }
}

std::string gid_text(const ibv_gid& g) {
  std::string s;
  char part[8];
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(part, sizeof part, "%s%02x%02x", i == 0 ? "" : ":", g.raw[i], g.raw[i + 1]);
    s += part;
  }
  return s;
}

// Written aside and renamed over the old file: a reader (ibstatus's cat)
// never sees it empty or half-written.
bool write_file(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  const fs::path tmp = p.string() + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  if (fd < 0) return false;
  const std::string line = text + "\n";
  bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = close(fd) == 0 && ok;
  if (ok && std::rename(tmp.c_str(), p.c_str()) == 0) return true;
  unlink(tmp.c_str());
  return false;
}

}  // namespace

bool write_sysfs_port(const std::string& port_dir, const shm::Segment& seg) {
  ibv_port_attr a;
  fill_port_attr(seg, &a);
  return write_sysfs_port(port_dir, seg, a, shm::load_pkeys(seg.header()), seg.header().port_guid);
}

bool write_sysfs_port(const std::string& port_dir, const shm::Segment& seg, const ibv_port_attr& a,
                      const shm::PKeyTable& pkeys, uint64_t port_guid_be) {
  const fs::path port(port_dir);
  const bool eth = a.link_layer == IBV_LINK_LAYER_ETHERNET;
  char buf[64];
  bool ok = write_file(port / "state", port_state_text(a.state));
  ok &= write_file(port / "phys_state", phys_state_text(a.phys_state));
  std::snprintf(buf, sizeof buf, "0x%x", a.lid);
  ok &= write_file(port / "lid", buf);
  std::snprintf(buf, sizeof buf, "0x%x", a.sm_lid);
  ok &= write_file(port / "sm_lid", buf);
  ok &= write_file(port / "sm_sl", std::to_string(a.sm_sl));
  ok &= write_file(port / "lid_mask_count", std::to_string(a.lmc));
  std::snprintf(buf, sizeof buf, "0x%08x", a.port_cap_flags);
  ok &= write_file(port / "cap_mask", buf);
  ok &= write_file(port / "link_layer", eth ? "Ethernet" : "InfiniBand");
  ok &= write_file(port / "rate", port_rate_text(a));
  // As the kernel's: one file per entry of the table, invalid ones included.
  for (unsigned i = 0; i < pkeys.size() && i < a.pkey_tbl_len; ++i) {
    std::snprintf(buf, sizeof buf, "0x%04x", pkeys[i]);
    ok &= write_file(port / "pkeys" / std::to_string(i), buf);
  }
  for (int i = 0; i < port_gid_count(); ++i) {
    ibv_gid gid;
    if (!port_gid(seg, i, &gid)) break;
    if (!eth) std::memcpy(gid.raw + 8, &port_guid_be, sizeof port_guid_be);
    const std::string idx = std::to_string(i);
    ok &= write_file(port / "gids" / idx, gid_text(gid));
    ok &= write_file(port / "gid_attrs" / "types" / idx, eth ? "RoCE v2" : "IB/RoCE v1");
  }
  return ok;
}

std::string device_name(unsigned index) {
  const std::string& name = port_config().device_name;
  if (index == 0) return name;
  std::string stem = name;
  while (!stem.empty() && stem.back() >= '0' && stem.back() <= '9') stem.pop_back();
  return stem + std::to_string(index);
}

std::string sysfs_device_dir(const shm::Segment& seg, unsigned index) {
  return (fs::path(seg.path() + ".sysfs") / "class" / "infiniband" / device_name(index)).string();
}

namespace {
fs::path port_dir(const shm::Segment& seg) { return fs::path(sysfs_device_dir(seg, 0)) / "ports" / "1"; }
}  // namespace

void refresh_sysfs_port(const shm::Segment& seg) {
  const fs::path dir = port_dir(seg);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  write_sysfs_port(dir.string(), seg);
}

void sync_sysfs_cap_mask(const shm::Segment& seg, uint32_t cap_mask) {
  char want[16];
  std::snprintf(want, sizeof want, "0x%08x\n", cap_mask);
  const fs::path file = port_dir(seg) / "cap_mask";
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no tree: nothing to keep current
  char got[16] = {};
  const ssize_t n = read(fd, got, sizeof got - 1);
  close(fd);
  if (n == static_cast<ssize_t>(std::strlen(want)) && std::memcmp(got, want, static_cast<size_t>(n)) == 0) return;
  want[std::strlen(want) - 1] = '\0';
  write_file(file, want);
}

}  // namespace softverbs::verbs
