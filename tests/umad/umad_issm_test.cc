// The port's IsSM bit under an external SM (SOFTVERBS_SM=none), as the
// kernel's issm device gives it: set while some process holds the file
// umad_get_issm_path names open (as opensm does, open(path, O_NONBLOCK)),
// clear again once that process is killed. PortInfo from the SMA, the
// capability mask umad_get_port reports, and the SMA's refusal of SMInfo
// (the SM's process answers that) all agree.
#include <endian.h>
#include <fcntl.h>
#include <infiniband/umad.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_child.h"

namespace {

constexpr int kMad = 256;
constexpr uint32_t kIsSm = 1u << 1;  // PortInfo:CapabilityMask bit 1
constexpr char kChildEnv[] = "SOFTVERBS_ISSM_HOLDER=1";

struct Buffer {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(umad_size() + kMad);
  void* umad() { return bytes.data(); }
  uint8_t* mad() { return static_cast<uint8_t*>(umad_get_mad(umad())); }
};

// A directed-route Get of `attr` to the port itself: its SMA's answer.
bool ask_sma(int fd, int agent, uint16_t attr, Buffer* resp) {
  Buffer b;
  uint8_t* m = b.mad();
  m[0] = 1, m[1] = 0x81, m[2] = 1, m[3] = 0x01;
  m[15] = 7;  // TID
  m[16] = static_cast<uint8_t>(attr >> 8), m[17] = static_cast<uint8_t>(attr);
  m[32] = m[33] = m[34] = m[35] = 0xff;  // DrSLID, DrDLID permissive
  umad_set_addr(b.umad(), 0xffff, 0, 0, 0);
  if (umad_send(fd, agent, b.umad(), kMad, 1000, 0) != 0) return false;
  int len = kMad;
  return umad_recv(fd, resp->umad(), &len, 2000) == agent;
}

uint32_t be32_at(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }

struct Seen {
  uint32_t sma_cap = 0;   // PortInfo:CapabilityMask from the SMA
  uint32_t umad_cap = 0;  // umad_get_port's capmask
  uint16_t sm_info_status = 0;
};

Seen look(int fd, int agent) {
  Seen s;
  Buffer pi;
  if (ask_sma(fd, agent, 0x0015, &pi)) s.sma_cap = be32_at(pi.mad() + 64 + 20);
  umad_port_t port;
  if (umad_get_port(nullptr, 1, &port) == 0) {
    s.umad_cap = be32toh(port.capmask);
    umad_release_port(&port);
  }
  Buffer si;
  if (ask_sma(fd, agent, 0x0020, &si)) s.sm_info_status = static_cast<uint16_t>((si.mad()[4] << 8 | si.mad()[5]) & 0x7fff);
  return s;
}

class RemoveSegment : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* path = getenv("SOFTVERBS_DEVICE_PATH");
    if (path == nullptr || getenv("SOFTVERBS_ISSM_HOLDER") != nullptr) return;
    for (const char* suffix : {"", ".pma", ".issm1"}) unlink((std::string(path) + suffix).c_str());
    const std::string agents = std::string(path) + ".agents";
    unlink((agents + "/.lock").c_str());
    rmdir(agents.c_str());
  }
};
const ::testing::Environment* const kRemoveSegment = ::testing::AddGlobalTestEnvironment(new RemoveSegment);

// Run only in the child: holds the issm file as opensm does, until killed
// (or for 60 s at most, should the parent be gone).
TEST(UmadIssmHolder, HoldsTheIssmFile) {
  if (getenv("SOFTVERBS_ISSM_HOLDER") == nullptr) GTEST_SKIP() << "the child's part";
  char path[256];
  ASSERT_EQ(umad_get_issm_path(nullptr, 1, path, sizeof path), 0);
  const int fd = open(path, O_NONBLOCK);
  ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
  std::this_thread::sleep_for(std::chrono::seconds(60));
  close(fd);
}

TEST(UmadIssm, IsSmWhileAProcessHoldsTheIssmFile) {
  ASSERT_STREQ(getenv("SOFTVERBS_SM"), "none");
  ASSERT_EQ(umad_init(), 0);
  char path[256];
  ASSERT_EQ(umad_get_issm_path("softverbs0", 1, path, sizeof path), 0);
  EXPECT_EQ(std::string(path), std::string(getenv("SOFTVERBS_DEVICE_PATH")) + ".issm1");
  EXPECT_EQ(umad_get_issm_path("softverbs0", 1, path, 8), -EINVAL);  // does not fit
  EXPECT_EQ(umad_get_issm_path("mlx5_0", 1, path, sizeof path), -ENODEV);
  const int fd = umad_open_port(nullptr, 0);
  ASSERT_GE(fd, 0);
  long mask[16 / sizeof(long)] = {};
  const int agent = umad_register(fd, 0x81, 1, 0, mask);
  ASSERT_GE(agent, 0);

  Seen s = look(fd, agent);
  EXPECT_EQ(s.sma_cap & kIsSm, 0u) << std::hex << s.sma_cap;
  EXPECT_NE(s.sma_cap, 0u);  // the answer came
  EXPECT_EQ(s.umad_cap, s.sma_cap);
  EXPECT_EQ(s.sm_info_status, 0x000c);

  TestChild holder("UmadIssmHolder.HoldsTheIssmFile", kChildEnv);
  ASSERT_GT(holder.pid(), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s = look(fd, agent);
  } while ((s.sma_cap & kIsSm) == 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_NE(s.sma_cap & kIsSm, 0u) << std::hex << s.sma_cap;
  EXPECT_EQ(s.umad_cap, s.sma_cap);
  // The SM's SMInfo is its own process's to answer, not the device's.
  EXPECT_EQ(s.sm_info_status, 0x000c);

  // Killed, the holder's end goes with it: the next PortInfo says so.
  ASSERT_TRUE(holder.kill_and_reap());
  s = look(fd, agent);
  EXPECT_EQ(s.sma_cap & kIsSm, 0u) << std::hex << s.sma_cap;
  EXPECT_EQ(s.umad_cap, s.sma_cap);

  EXPECT_EQ(umad_close_port(fd), 0);
  umad_done();
}

}  // namespace
