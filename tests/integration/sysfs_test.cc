// The device's sysfs tree under ibv_get_sysfs_path() (src/abi/ibverbs/
// sysfs_tree.h): what Open MPI's verbs components and sysfs readers find
// there agrees with what the verbs report, and the rest of /sys stays
// reachable through the same root.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "harness.h"
#include "sysfs_files.h"
#include "verbs_fixture.h"

extern "C" const char* ibv_get_sysfs_path(void);

namespace softverbs::integration {
namespace {

bool is_dir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string guid_text(__be64 guid) {
  const auto* b = reinterpret_cast<const uint8_t*>(&guid);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6],
                b[7]);
  return buf;
}

TEST(Sysfs, TreeDescribesTheDevice) {
  run_solo("solo", [](Proc&) {
    int num = 0;
    ibv_device** list = ibv_get_device_list(&num);
    ASSERT_NE(nullptr, list);
    ASSERT_GE(num, 1);
    ibv_device* dev = list[0];
    const std::string name = ibv_get_device_name(dev);
    const std::string root = ibv_get_sysfs_path();
    ASSERT_NE("/sys", root) << "the device's own tree, not the kernel's";
    // Open MPI's check (opal_common_verbs_check_basics): the class exists.
    EXPECT_TRUE(is_dir(root + "/class/infiniband"));
    const std::string ib = root + "/class/infiniband/" + name;
    EXPECT_EQ(ib, dev->ibdev_path);
    EXPECT_EQ(root + "/class/infiniband_verbs/" + dev->dev_name, dev->dev_path);
    EXPECT_EQ(name, read_line(std::string(dev->dev_path) + "/ibdev"));
    EXPECT_EQ("1: CA", read_line(ib + "/node_type"));
    EXPECT_EQ(guid_text(ibv_get_device_guid(dev)), read_line(ib + "/node_guid"));

    ibv_context* ctx = ibv_open_device(dev);
    ASSERT_NE(nullptr, ctx);
    ibv_port_attr port{};
    ASSERT_EQ(0, ibv_query_port(ctx, 1, &port));
    EXPECT_EQ("4: ACTIVE", read_line(ib + "/ports/1/state"));
    char lid[16];
    std::snprintf(lid, sizeof lid, "0x%x", port.lid);
    EXPECT_EQ(lid, read_line(ib + "/ports/1/lid"));
    EXPECT_EQ(port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
              read_line(ib + "/ports/1/link_layer"));
    ibv_gid gid{};
    ASSERT_EQ(0, ibv_query_gid(ctx, 1, 0, &gid));
    std::string want;
    for (int i = 0; i < 16; i += 2) {
      char part[8];
      std::snprintf(part, sizeof part, "%s%02x%02x", i == 0 ? "" : ":", gid.raw[i], gid.raw[i + 1]);
      want += part;
    }
    EXPECT_EQ(want, read_line(ib + "/ports/1/gids/0"));
    EXPECT_EQ(0, ibv_close_device(ctx));
    // Everything else leads into the real /sys.
    EXPECT_TRUE(is_dir(root + "/class/net")) << "class/net through the tree";
    EXPECT_TRUE(is_dir(root + "/devices")) << "devices through the tree";
    ibv_free_device_list(list);
  });
}

}  // namespace
}  // namespace softverbs::integration
