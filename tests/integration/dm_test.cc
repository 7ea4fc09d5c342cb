// Device memory (issue 18): ibv_alloc_dm's limits, the copies through the
// ibv_dm ops and their range checks, ibv_reg_dm_mr (zero-based: addresses
// are offsets), EBUSY while an MR covers the DM, and a peer's READ, WRITE and
// atomics on DM MRs, which also serve as local SGEs.
#include <gtest/gtest.h>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

constexpr size_t kDmBytes = 3 * 4096 + 100;  // not a whole number of pages
constexpr uint64_t kMrOffset = 4096;          // the MR starts here in the DM
constexpr size_t kMrBytes = 2 * 4096;
constexpr uint64_t kDmSeed = 0xD3D3;
constexpr uint64_t kPeerSeed = 0xD3E0;
constexpr uint64_t kBackSeed = 0xD3F0;
constexpr size_t kChunk = 1000;

struct FreeDm {
  void operator()(ibv_dm* dm) const { EXPECT_EQ(0, ibv_free_dm(dm)); }
};
using DmPtr = std::unique_ptr<ibv_dm, FreeDm>;

DmPtr alloc_dm(ibv_context* ctx, size_t length) {
  ibv_alloc_dm_attr attr{};
  attr.length = length;
  ibv_dm* dm = ibv_alloc_dm(ctx, &attr);
  EXPECT_NE(nullptr, dm) << errno_name(errno);
  return DmPtr(dm);
}

TEST(DeviceMemory, LimitsCopiesAndLifetime) {
  run_solo("solo", [](Proc&) {
    auto ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    ibv_device_attr_ex dev{};
    ASSERT_EQ(0, ibv_query_device_ex(ctx.get(), nullptr, &dev));
    ASSERT_GE(dev.max_dm_size, uint64_t{64 * 1024});

    ibv_alloc_dm_attr attr{};
    attr.length = dev.max_dm_size + 1;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_alloc_dm(ctx.get(), &attr));
    EXPECT_EQ(ENOMEM, errno) << "larger than max_dm_size";
    attr.length = 0;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_alloc_dm(ctx.get(), &attr));
    EXPECT_EQ(EINVAL, errno);
    attr.length = 4096;
    attr.log_align_req = 30;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_alloc_dm(ctx.get(), &attr));
    EXPECT_EQ(EINVAL, errno) << "an alignment the DM cannot offer";
    attr.log_align_req = 12;
    DmPtr aligned(ibv_alloc_dm(ctx.get(), &attr));
    ASSERT_NE(nullptr, aligned) << errno_name(errno);
    DmPtr whole = alloc_dm(ctx.get(), dev.max_dm_size);
    ASSERT_NE(nullptr, whole);

    DmPtr dm = alloc_dm(ctx.get(), kDmBytes);
    ASSERT_NE(nullptr, dm);
    std::vector<uint8_t> in(kDmBytes), out(kDmBytes, 0);
    fill_pattern(in.data(), in.size(), kDmSeed);
    ASSERT_EQ(0, ibv_memcpy_to_dm(dm.get(), 0, in.data(), in.size()));
    ASSERT_EQ(0, ibv_memcpy_from_dm(out.data(), dm.get(), 0, out.size()));
    EXPECT_TRUE(expect_pattern(out.data(), out.size(), kDmSeed, "the whole DM back"));
    std::fill(out.begin(), out.end(), 0);
    ASSERT_EQ(0, ibv_memcpy_from_dm(out.data(), dm.get(), kDmBytes - 7, 7));
    EXPECT_TRUE(expect_pattern(out.data(), 7, kDmSeed, "the DM's last bytes", kDmBytes - 7));

    // Out of range, by one byte, by an offset past the end, by wrapping.
    EXPECT_EQ(EINVAL, ibv_memcpy_to_dm(dm.get(), 1, in.data(), kDmBytes));
    EXPECT_EQ(EINVAL, ibv_memcpy_from_dm(out.data(), dm.get(), kDmBytes + 1, 0));
    EXPECT_EQ(EINVAL, ibv_memcpy_to_dm(dm.get(), ~uint64_t{0} - 3, in.data(), 8));
    EXPECT_EQ(EINVAL, ibv_memcpy_from_dm(out.data(), dm.get(), 8, ~size_t{0}));
    ASSERT_EQ(0, ibv_memcpy_from_dm(out.data(), dm.get(), 0, 16));
    EXPECT_TRUE(expect_pattern(out.data(), 16, kDmSeed, "a refused copy wrote nothing"));

    auto pd = std::unique_ptr<ibv_pd, DeallocPd>(ibv_alloc_pd(ctx.get()));
    ASSERT_NE(nullptr, pd);
    errno = 0;
    EXPECT_EQ(nullptr, ibv_reg_dm_mr(pd.get(), dm.get(), 0, 4096, IBV_ACCESS_LOCAL_WRITE));
    EXPECT_EQ(EINVAL, errno) << "a DM MR is zero-based";
    errno = 0;
    EXPECT_EQ(nullptr, ibv_reg_dm_mr(pd.get(), dm.get(), 4096, kDmBytes, IBV_ACCESS_ZERO_BASED));
    EXPECT_EQ(EINVAL, errno) << "past the DM's end";
    ibv_mr* mr = ibv_reg_dm_mr(pd.get(), dm.get(), kMrOffset, kMrBytes,
                               IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(nullptr, mr) << errno_name(errno);
    EXPECT_EQ(kMrBytes, mr->length);
    EXPECT_EQ(EBUSY, ibv_free_dm(dm.get())) << "an MR still covers it";
    EXPECT_EQ(EBUSY, ibv_dealloc_pd(pd.get()));
    EXPECT_EQ(0, ibv_dereg_mr(mr));
  });
}

// The target's DM, reached by a peer: READ what the owner copied in, WRITE,
// fetch-and-add; then the owner WRITEs from its DM (a local SGE at a DM
// offset) into the peer's memory; last a WRITE past the MR's end.
TEST(DeviceMemory, PeerRdmaOnDm) {
  run_pair(
      "owner",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        DmPtr dm = alloc_dm(ep->ctx.get(), kDmBytes);
        ASSERT_NE(nullptr, dm);
        std::vector<uint8_t> buf(kDmBytes);
        fill_pattern(buf.data(), buf.size(), kDmSeed);
        ASSERT_EQ(0, ibv_memcpy_to_dm(dm.get(), 0, buf.data(), buf.size()));
        MrPtr mr(ibv_reg_dm_mr(ep->pd.get(), dm.get(), kMrOffset, kMrBytes,
                               IBV_ACCESS_ZERO_BASED | kAllAccess));
        ASSERT_NE(nullptr, mr) << errno_name(errno);
        RemoteBuf theirs;
        ASSERT_TRUE(exchange(p.peer(), RemoteBuf{0, mr->rkey, 0, kMrBytes}, &theirs));
        ASSERT_TRUE(p.peer().wait("peer done"));

        // The peer wrote kChunk bytes at MR offset 2000 and added 5 to the
        // word at MR offset 4096 (DM offset kMrOffset + …).
        ASSERT_EQ(0, ibv_memcpy_from_dm(buf.data(), dm.get(), 0, kDmBytes));
        EXPECT_TRUE(expect_pattern(buf.data(), kMrOffset + 2000, kDmSeed, "DM before the WRITE"));
        EXPECT_TRUE(expect_pattern(buf.data() + kMrOffset + 2000, kChunk, kPeerSeed, "the peer's WRITE"));
        uint64_t word = 0, before = 0;
        std::memcpy(&word, buf.data() + kMrOffset + 4096, 8);
        std::vector<uint8_t> orig(kDmBytes);
        fill_pattern(orig.data(), orig.size(), kDmSeed);
        std::memcpy(&before, orig.data() + kMrOffset + 4096, 8);
        EXPECT_EQ(before + 5, word) << "the peer's fetch-and-add";

        // A local SGE in the DM MR: zero-based, so its address is an offset.
        std::vector<uint8_t> back(kChunk);
        fill_pattern(back.data(), back.size(), kBackSeed);
        ASSERT_EQ(0, ibv_memcpy_to_dm(dm.get(), kMrOffset + 100, back.data(), back.size()));
        Wr w = wr_write(7, {ibv_sge{100, static_cast<uint32_t>(kChunk), mr->lkey}}, theirs);
        ASSERT_TRUE(run_wr(ep->qp(), w));
        ASSERT_TRUE(p.peer().signal("written"));
        ASSERT_TRUE(p.peer().wait("bad write done"));
      },
      "peer",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), 16 * 1024);
        ASSERT_NE(nullptr, local);
        RemoteBuf dm;
        ASSERT_TRUE(exchange(p.peer(), local->remote(), &dm));
        EXPECT_EQ(0u, dm.addr);
        TestQp& qp = ep->qp();

        Wr read = wr_read(1, {local->sge(0, kMrBytes)}, dm);
        ASSERT_TRUE(run_wr(qp, read));
        EXPECT_TRUE(expect_pattern(local->data(), kMrBytes, kDmSeed, "READ of the DM MR", kMrOffset));
        fill_pattern(local->data() + 8192, kChunk, kPeerSeed);
        Wr write = wr_write(2, {local->sge(8192, kChunk)}, dm.at(2000));
        ASSERT_TRUE(run_wr(qp, write));
        Wr faa = wr_faa(3, local->sge(12288, 8), dm.at(4096), 5);
        ASSERT_TRUE(run_wr(qp, faa));
        ASSERT_TRUE(p.peer().signal("peer done"));
        ASSERT_TRUE(p.peer().wait("written"));
        EXPECT_TRUE(expect_pattern(local->data(), kChunk, kBackSeed, "the owner's WRITE from its DM"));

        // A WRITE that runs past the MR's end: remote access error.
        Wr bad = wr_write(4, {local->sge(0, 64)}, RemoteBuf{kMrBytes - 32, dm.rkey, 0, 64});
        ASSERT_TRUE(run_wr_expect(qp, bad, IBV_WC_REM_ACCESS_ERR));
        ASSERT_TRUE(p.peer().signal("bad write done"));
      });
}

}  // namespace
}  // namespace softverbs::integration
