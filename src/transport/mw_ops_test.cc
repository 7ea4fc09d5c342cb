// Memory windows in a hand-built segment: the key encoding, the bind checks,
// what check_key makes of a window, and invalidation's bookkeeping.
#include "transport/mw_ops.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "transport/mem_ops.h"
#include "transport/testing/hand_built.h"

namespace softverbs::transport {
namespace {

constexpr uint32_t kPd = 7;
constexpr uint32_t kQpn = 0x4242;
constexpr shm::OwnerId kOwner{5, 1};
constexpr uint32_t kMrSlot = 3;
constexpr uint32_t kWindowSlot = shm::kFirstMwSlot + 9;

TEST(WindowKeys, NeverCollideWithRegionKeys) {
  for (uint32_t slot : {shm::kFirstMwSlot, shm::kFirstMwSlot + 1, shm::kMaxMrs - 1})
    for (uint32_t random : {0u, 0x7fu, 0x80u, 0xffu})
      for (uint32_t byte : {0u, 1u, 0xffu}) {
        const uint32_t key = window_key_base(slot, static_cast<uint8_t>(random)) | byte;
        EXPECT_TRUE(is_window_key(key));
        EXPECT_EQ(slot, mr_slot_of_key(key)) << std::hex << key;
        EXPECT_EQ(key & ~kKeyByteMask, window_key_base(slot, static_cast<uint8_t>(random)));
      }
  for (uint32_t slot : {1u, 77u, shm::kFirstMwSlot - 1}) {
    const uint32_t key = (0xbeefu << 16) | slot;  // as verbs/mr.cc makes them
    EXPECT_FALSE(is_window_key(key));
    EXPECT_EQ(slot, mr_slot_of_key(key));
  }
}

class WindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-mw-test-" + std::to_string(getpid());
    Result<std::unique_ptr<shm::Segment>> s = shm::Segment::open(path_);
    ASSERT_TRUE(s.is_ok());
    seg_ = std::move(s.value());
    mem_.assign(8192, 0);
    hand_built::make_mr(*seg_, kMrSlot, mem_.data(), mem_.size(),
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND, kPd, kOwner);
    shm::SharedMr& w = seg_->mr(kWindowSlot);
    w.owner = kOwner;
    w.pd_id = kPd;
    w.mw_type = IBV_MW_TYPE_2;
    w.lkey = window_key_base(kWindowSlot, 0x5c);
  }
  void TearDown() override {
    seg_.reset();
    unlink(path_.c_str());
  }
  uint32_t key(uint32_t byte) const { return window_key_base(kWindowSlot, 0x5c) | byte; }
  WindowBind bind(uint32_t byte, uint64_t offset, uint64_t length, uint32_t access) const {
    return {kWindowSlot, key(byte), hand_built::lkey_of(kMrSlot), seg_->mr(kMrSlot).iova + offset, length, access};
  }
  KeyCheck access(uint32_t rkey, uint32_t qpn, uint64_t va, uint64_t len, uint32_t need, MrRef* ref) const {
    return check_key(*seg_, rkey, true, kOwner, kPd, qpn, va, len, need, ref);
  }

  std::string path_;
  std::unique_ptr<shm::Segment> seg_;
  std::vector<uint8_t> mem_;
};

TEST_F(WindowTest, Type2BindAccessInvalidate) {
  const uint64_t base = seg_->mr(kMrSlot).iova;
  ASSERT_EQ(IBV_WC_SUCCESS, bind_window(*seg_, kOwner, kPd, kQpn, bind(1, 4096, 1024, IBV_ACCESS_REMOTE_WRITE)));
  EXPECT_EQ(1u, seg_->mr(kMrSlot).bound_windows.load());
  MrRef ref;
  EXPECT_EQ(KeyCheck::kOk, access(key(1), kQpn, base + 4096 + 8, 64, IBV_ACCESS_REMOTE_WRITE, &ref));
  EXPECT_EQ(reinterpret_cast<uint64_t>(mem_.data()) + 4096 + 8, ref.va);
  EXPECT_EQ(KeyCheck::kBadKey, access(key(1), kQpn + 1, base + 4096, 64, 0, &ref)) << "another QP";
  EXPECT_EQ(KeyCheck::kBadKey, access(key(2), kQpn, base + 4096, 64, 0, &ref)) << "another key byte";
  EXPECT_EQ(KeyCheck::kRange, access(key(1), kQpn, base + 4096 + 1000, 64, 0, &ref)) << "past the window";
  EXPECT_EQ(KeyCheck::kAccess, access(key(1), kQpn, base + 4096, 64, IBV_ACCESS_REMOTE_READ, &ref));
  EXPECT_EQ(KeyCheck::kBadKey, check_key(*seg_, key(1), false, kOwner, kPd, 0, base + 4096, 8, 0, &ref))
      << "a window has no L_Key";
  // C10-…: a valid type 2 window is not bound again.
  EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_window(*seg_, kOwner, kPd, kQpn, bind(2, 0, 64, 0)));
  EXPECT_FALSE(invalidate_window(*seg_, key(1), kOwner, kPd, kQpn + 1)) << "remote, through another QP";
  EXPECT_FALSE(invalidate_window(*seg_, key(1), kOwner, kPd + 1, 0)) << "another PD";
  EXPECT_TRUE(invalidate_window(*seg_, key(1), kOwner, kPd, kQpn));
  EXPECT_FALSE(invalidate_window(*seg_, key(1), kOwner, kPd, kQpn)) << "only once";
  EXPECT_EQ(0u, seg_->mr(kMrSlot).bound_windows.load());
  EXPECT_EQ(KeyCheck::kBadKey, access(key(1), kQpn, base + 4096, 64, 0, &ref));
}

TEST_F(WindowTest, ZeroBasedWindow) {
  ASSERT_EQ(IBV_WC_SUCCESS, bind_window(*seg_, kOwner, kPd, kQpn,
                                        bind(1, 4096, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED)));
  MrRef ref;
  EXPECT_EQ(KeyCheck::kOk, access(key(1), kQpn, 16, 8, IBV_ACCESS_REMOTE_READ, &ref));
  EXPECT_EQ(reinterpret_cast<uint64_t>(mem_.data()) + 4096 + 16, ref.va);
}

TEST_F(WindowTest, BindChecks) {
  struct Case {
    const char* what;
    WindowBind b;
    uint32_t pd;
  };
  WindowBind other_index = bind(1, 0, 64, 0);
  other_index.new_rkey = window_key_base(kWindowSlot + 1, 0x5c) | 1;
  WindowBind no_mr = bind(1, 0, 64, 0);
  no_mr.mr_lkey = 0;
  const Case cases[] = {
      {"past the MR's end", bind(1, 4096, 8192, 0), kPd},
      {"remote write, no local write on the MR", bind(1, 0, 64, IBV_ACCESS_REMOTE_WRITE), kPd},
      {"an access flag that is no window's", bind(1, 0, 64, IBV_ACCESS_LOCAL_WRITE), kPd},
      {"a QP of another PD", bind(1, 0, 64, 0), kPd + 1},
      {"a new R_Key of another window", other_index, kPd},
      {"no MR", no_mr, kPd},
  };
  // The MR without local write, to make remote write fail; and one without MW_BIND.
  seg_->mr(kMrSlot).access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
  for (const Case& c : cases)
    EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_window(*seg_, kOwner, c.pd, kQpn, c.b)) << c.what;
  seg_->mr(kMrSlot).access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_window(*seg_, kOwner, kPd, kQpn, bind(1, 0, 64, 0))) << "no MW_BIND";
  EXPECT_EQ(0u, seg_->mr(kMrSlot).bound_windows.load());
  EXPECT_EQ(0u, seg_->mr(kWindowSlot).rkey.load());
}

// Type 1: rebinding moves the window; unbinding and unbind_window leave it
// invalid, its MR uncounted; LOCAL_INV and SEND WITH INVALIDATE cannot touch it.
TEST_F(WindowTest, Type1RebindUnbind) {
  seg_->mr(kWindowSlot).mw_type = IBV_MW_TYPE_1;
  ASSERT_EQ(IBV_WC_SUCCESS, bind_window(*seg_, kOwner, kPd, kQpn, bind(1, 0, 64, IBV_ACCESS_REMOTE_READ)));
  EXPECT_EQ(0u, seg_->mr(kWindowSlot).mw_qpn) << "type 1: any QP of the PD";
  ASSERT_EQ(IBV_WC_SUCCESS, bind_window(*seg_, kOwner, kPd, kQpn, bind(2, 64, 64, IBV_ACCESS_REMOTE_READ)));
  EXPECT_EQ(1u, seg_->mr(kMrSlot).bound_windows.load());
  EXPECT_FALSE(invalidate_window(*seg_, key(2), kOwner, kPd, 0));
  WindowBind unbind{kWindowSlot, key(3), 0, 0, 0, 0};
  ASSERT_EQ(IBV_WC_SUCCESS, bind_window(*seg_, kOwner, kPd, kQpn, unbind));
  EXPECT_EQ(0u, seg_->mr(kWindowSlot).rkey.load());
  EXPECT_EQ(0u, seg_->mr(kMrSlot).bound_windows.load());
  ASSERT_EQ(IBV_WC_SUCCESS, bind_window(*seg_, kOwner, kPd, kQpn, bind(4, 0, 64, IBV_ACCESS_REMOTE_READ)));
  unbind_window(*seg_, kWindowSlot);
  EXPECT_EQ(0u, seg_->mr(kWindowSlot).rkey.load());
  EXPECT_EQ(0u, seg_->mr(kMrSlot).bound_windows.load());
}

}  // namespace
}  // namespace softverbs::transport
