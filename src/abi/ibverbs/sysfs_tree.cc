#include "abi/ibverbs/sysfs_tree.h"

#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "mad/ca_devices.h"
#include "verbs/device.h"
#include "verbs/device_attrs.h"
#include "verbs/port_config.h"
#include "verbs/sysfs_port.h"

namespace softverbs::abi {
namespace {

namespace fs = std::filesystem;

// The kernel's uverbs ABI (class/infiniband_verbs/abi_version) and the
// per-device one that rdma-core's discovery compares with its own.
constexpr int kUverbsAbiVersion = 6;
constexpr int kDeviceAbiVersion = 1;
// Names the node GUID of the device a tree describes.
constexpr char kMarker[] = ".softverbs_node_guid";

std::string guid_text(uint64_t be_guid) {
  const auto* b = reinterpret_cast<const uint8_t*>(&be_guid);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
                b[6], b[7]);
  return buf;
}

bool write_file(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  if (fd < 0) return false;
  std::string line = text + "\n";
  bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  return close(fd) == 0 && ok;
}

// Every entry of `real` except `keep` becomes a symlink in `dir`.
void link_all_but(const fs::path& real, const fs::path& dir, const char* keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (fs::directory_iterator it(real, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == keep) continue;
    fs::create_symlink(it->path(), dir / name, ec);
    ec.clear();
  }
}

// class/infiniband/<name> and class/infiniband_verbs/uverbs_<name> of
// device `index`: the device's own CA, or a topology's other CA with its
// GUIDs and port (mad/ca_devices.h).
bool write_device(const fs::path& root, const shm::Segment& seg, unsigned index) {
  const std::string name = verbs::device_name(index);
  ibv_device_attr attr;
  verbs::fill_device_attr(seg, &attr);
  ibv_port_attr port;
  mad::PortView other;
  const bool is_other = mad::fill_ca_device_port_attr(seg, index, &port, &other);
  if (is_other) {
    attr.node_guid = htobe64(other.node_guid);
    attr.sys_image_guid = htobe64(other.sys_image_guid);
  }
  const fs::path ib = root / "class" / "infiniband" / name;
  char buf[64];
  char host[64] = "softverbs";
  gethostname(host, sizeof host - 1);
  bool ok = write_file(ib / "node_type", "1: CA");
  ok &= write_file(ib / "node_guid", guid_text(attr.node_guid));
  ok &= write_file(ib / "sys_image_guid", guid_text(attr.sys_image_guid));
  ok &= write_file(ib / "fw_ver", attr.fw_ver);
  std::snprintf(buf, sizeof buf, "0x%x", attr.hw_ver);
  ok &= write_file(ib / "hw_rev", buf);
  ok &= write_file(ib / "hca_type", "softverbs");
  ok &= write_file(ib / "board_id", "SOFTVERBS");
  ok &= write_file(ib / "node_desc", std::string(host) + " " + name);
  const std::string port_dir = (ib / "ports" / "1").string();
  ok &= is_other ? verbs::write_sysfs_port(port_dir, seg, port, other.pkeys, htobe64(other.port_guid))
                 : verbs::write_sysfs_port(port_dir, seg);
  const fs::path verbs_class = root / "class" / "infiniband_verbs";
  ok &= write_file(verbs_class / ("uverbs_" + name) / "ibdev", name);
  ok &= write_file(verbs_class / ("uverbs_" + name) / "abi_version", std::to_string(kDeviceAbiVersion));
  return ok;
}

bool write_tree(const fs::path& root, verbs::Device& dev) {
  const shm::Segment& seg = dev.seg();
  ibv_device_attr attr;
  verbs::fill_device_attr(seg, &attr);
  bool ok = write_file(root / "class" / "infiniband_verbs" / "abi_version", std::to_string(kUverbsAbiVersion));
  const unsigned devices = mad::ca_device_count(seg);
  for (unsigned i = 0; i < devices; ++i) ok &= write_device(root, seg, i);
  // What identifies the device this tree describes: a tree left by an
  // earlier segment (another node GUID) is replaced.
  ok &= write_file(root / kMarker, guid_text(attr.node_guid));
  link_all_but("/sys/class", root / "class", "");
  link_all_but("/sys", root, "class");
  return ok;
}

bool tree_is_current(const fs::path& root, uint64_t node_guid) {
  char buf[64] = {};
  int fd = open((root / kMarker).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n > 0 && std::string(buf, static_cast<size_t>(n)) == guid_text(node_guid) + "\n";
}

// Trees (and half-built copies) whose device segment is gone: tests make a
// segment per run and remove only the segment file.
void remove_orphan_trees(const fs::path& dir) {
  constexpr std::string_view kSuffix = ".sysfs";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.find(kSuffix);
    if (at == std::string::npos) continue;
    std::error_code exists_ec;
    // Only directories this file wrote (they carry the marker).
    if (fs::is_regular_file(it->path() / kMarker, exists_ec) && !fs::exists(dir / name.substr(0, at), exists_ec) &&
        !exists_ec) {
      std::error_code rm_ec;
      fs::remove_all(it->path(), rm_ec);
    }
  }
}

std::string build() {
  softverbs::Result<verbs::Device*> dev = verbs::Device::get();
  if (!dev.is_ok()) return {};
  const fs::path root = verbs::device_segment_path() + ".sysfs";
  const uint64_t guid = dev.value()->seg().header().node_guid;
  if (tree_is_current(root, guid)) return root.string();
  remove_orphan_trees(root.parent_path());
  // Built aside and renamed into place, so a reader sees a whole tree or none.
  const fs::path tmp = root.string() + ".tmp." + std::to_string(getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!write_tree(tmp, *dev.value())) {
    fs::remove_all(tmp, ec);
    return {};
  }
  if (std::rename(tmp.c_str(), root.c_str()) != 0) {
    // Another process put its copy in place first, or a stale tree is there.
    if (!tree_is_current(root, guid)) {
      const fs::path stale = root.string() + ".stale." + std::to_string(getpid());
      if (std::rename(root.c_str(), stale.c_str()) == 0) fs::remove_all(stale, ec);
      if (std::rename(tmp.c_str(), root.c_str()) != 0 && !tree_is_current(root, guid)) {
        fs::remove_all(tmp, ec);
        return {};
      }
    }
    fs::remove_all(tmp, ec);
  }
  return root.string();
}

}  // namespace

const char* synthetic_sysfs_root() {
  static const std::string root = build();
  return root.empty() ? nullptr : root.c_str();
}

}  // namespace softverbs::abi
