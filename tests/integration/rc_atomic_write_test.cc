// IBA 1.5 ATOMIC WRITE on RC (as Linux's Soft-RoCE does it): eight bytes
// stored at an 8-byte aligned remote address as one 64-bit store, through
// ibv_post_send (IBV_WR_ATOMIC_WRITE, the bytes named by the gather list, the
// address and key in wr.rdma) and through ibv_wr_atomic_write. Completes
// with IBV_WC_ATOMIC_WRITE. RcAtomicWrite.* is data path (every host path,
// faults, RoCE); RcAtomicWriteErrors.* the refusals.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

uint64_t load64(const uint8_t* p) { return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE); }
void store64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }

// IB_UVERBS_DEVICE_ATOMIC_WRITE (Linux uapi); rdma-core 44's headers lack the name.
constexpr uint64_t kDeviceCapAtomicWrite = 1ull << 40;

constexpr size_t kWords = 8;
constexpr size_t kWord = 3;

// The target: words 0..7 set to i * 0x1111111111111111, word 3 to `initial`;
// after "done" word 3 must hold `expect` and the others be untouched.
void target_words(Proc& p, const QpConfig& config, uint64_t initial, uint64_t expect) {
  auto ep = connected_endpoint(p.peer(), config);
  ASSERT_NE(nullptr, ep);
  auto words = Region::create(ep->pd.get(), kWords * 8);
  ASSERT_NE(nullptr, words);
  for (size_t i = 0; i < kWords; ++i) store64(words->data() + i * 8, 0x1111111111111111ull * i);
  store64(words->data() + kWord * 8, initial);
  ASSERT_TRUE(p.peer().send(words->remote()));
  ASSERT_TRUE(p.peer().wait("done"));
  EXPECT_EQ(expect, load64(words->data() + kWord * 8)) << "the target word";
  for (size_t i = 0; i < kWords; ++i) {
    if (i != kWord) {
      EXPECT_EQ(0x1111111111111111ull * i, load64(words->data() + i * 8)) << "word " << i;
    }
  }
  ASSERT_TRUE(p.peer().signal("checked"));
}

TEST(RcAtomicWrite, PostSendStoresTheGatheredEightBytes) {
  constexpr uint64_t kValue = 0x0123456789ABCDEFull;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, local);
        store64(local->data() + 16, kValue);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        Wr w = wr_atomic_write(7, local->sge(16, 8), remote.at(kWord * 8));
        ASSERT_TRUE(run_wr(ep->qp(), w));  // IBV_WC_ATOMIC_WRITE, wr_id 7
        EXPECT_EQ(kValue, load64(local->data() + 16)) << "the source is only read";
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "target", [&](Proc& p) { target_words(p, QpConfig{}, 0x5555555555555555ull, kValue); });
}

// IBV_SEND_INLINE: the eight bytes are copied at post.
TEST(RcAtomicWrite, PostSendInline) {
  constexpr uint64_t kValue = 0xFEEDFACECAFEBEEFull;
  QpConfig config;
  config.max_inline_data = 64;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), config);
        ASSERT_NE(nullptr, ep);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        uint64_t value = kValue;
        ibv_sge sge{reinterpret_cast<uintptr_t>(&value), 8, 0};
        Wr w = wr_atomic_write(8, sge, remote.at(kWord * 8), IBV_SEND_SIGNALED | IBV_SEND_INLINE);
        ASSERT_TRUE(post(ep->qp(), w));
        value = 0;  // the WR took its copy
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp().send_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 8, .opcode = IBV_WC_ATOMIC_WRITE, .qp_num = ep->qp().qpn()}));
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "target", [&](Proc& p) { target_words(p, QpConfig{}, 0, kValue); });
}

// ibv_wr_atomic_write copies the eight bytes when called; the device reports
// the capability in device_cap_flags_ex.
TEST(RcAtomicWrite, ExtendedApiStoresAndReportsTheCapability) {
  constexpr uint64_t kValue = 0x8000000000000001ull;
  QpConfig config;
  config.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_RDMA_WRITE;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), config);
        ASSERT_NE(nullptr, ep);
        ibv_device_attr_ex attr{};
        ASSERT_EQ(0, ibv_query_device_ex(ep->ctx.get(), nullptr, &attr));
        EXPECT_NE(0u, attr.device_cap_flags_ex & kDeviceCapAtomicWrite);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        ibv_qp_ex* qx = ibv_qp_to_qp_ex(ep->qp().get());
        ASSERT_NE(nullptr, qx);
        ASSERT_NE(nullptr, qx->wr_atomic_write);
        uint64_t value = kValue;
        ibv_wr_start(qx);
        qx->wr_id = 9;
        qx->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_atomic_write(qx, remote.rkey, remote.addr + kWord * 8, &value);
        value = 0x0BADull;
        ASSERT_EQ(0, ibv_wr_complete(qx));
        ibv_wc wc{};
        ASSERT_TRUE(poll_one(ep->qp().send_cq(), &wc));
        EXPECT_TRUE(check_wc(wc, {.wr_id = 9, .opcode = IBV_WC_ATOMIC_WRITE, .qp_num = ep->qp().qpn()}));
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "target", [&](Proc& p) { target_words(p, QpConfig{}, 7, kValue); });
}

// The use IBA 1.5 made it for: a WRITE of data, then an ATOMIC WRITE of a
// flag on the same QP. A target that sees the flag sees all the data.
TEST(RcAtomicWrite, FlagLandsAfterTheDataBeforeIt) {
  constexpr size_t kData = 64 * 1024;
  constexpr int kRounds = 20;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), kData + 64);
        ASSERT_NE(nullptr, local);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        for (int r = 1; r <= kRounds; ++r) {
          fill_pattern(local->data(), kData, r);
          store64(local->data() + kData, static_cast<uint64_t>(r));
          Wr data = wr_write(100 + r, {local->sge(0, kData)}, remote, 0);
          Wr flag = wr_atomic_write(200 + r, local->sge(kData, 8), remote.at(kData));
          ASSERT_TRUE(post(ep->qp(), {&data, &flag}));
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(ep->qp().send_cq(), 2, &wcs));  // sq_sig_all
          EXPECT_TRUE(check_wc(wcs[1], {.wr_id = static_cast<uint64_t>(200 + r), .opcode = IBV_WC_ATOMIC_WRITE}));
          ASSERT_TRUE(p.peer().wait("seen"));
        }
        ASSERT_TRUE(p.peer().signal("done"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto buf = Region::create(ep->pd.get(), kData + 64);
        ASSERT_NE(nullptr, buf);
        store64(buf->data() + kData, 0);
        ASSERT_TRUE(p.peer().send(buf->remote()));
        for (int r = 1; r <= kRounds; ++r) {
          const Deadline deadline = Deadline::op();
          while (load64(buf->data() + kData) != static_cast<uint64_t>(r)) {
            ASSERT_FALSE(deadline.expired()) << "round " << r << ": the flag never arrived";
            ::usleep(50);
          }
          ASSERT_TRUE(expect_pattern(buf->data(), kData, r, "the data before the flag"));
          ASSERT_TRUE(p.peer().signal("seen"));
        }
        // Seeing the last flag is not its ACK having arrived: with that ACK
        // lost (the faults entry), the QP must still be here to answer the
        // retry, or the initiator ends in RETRY_EXC_ERR.
        ASSERT_TRUE(p.peer().wait("done"));
      });
}

// A target reading the word all along sees only whole values: the initial
// one or one of the two stored, never a mix of their halves. The initiator
// keeps storing until the target has seen the word change kChanges times.
TEST(RcAtomicWrite, NeverTorn) {
  constexpr uint64_t kA = 0xAAAAAAAA55555555ull;
  constexpr uint64_t kB = 0x55555555AAAAAAAAull;
  constexpr uint64_t kChanges = 200;
  constexpr int kWindow = 4;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, local);
        store64(local->data(), kA);
        store64(local->data() + 8, kB);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        ASSERT_TRUE(p.peer().wait("watching"));
        uint64_t posted = 0, done = 0;
        const Deadline deadline(scaled(Millis(30'000)));
        pollfd pfd{p.peer().fd(), POLLIN, 0};
        // Until the target has seen enough ("enough" waits on the link), then
        // what is still out.
        bool enough = false;
        while (!enough || done < posted) {
          ASSERT_FALSE(deadline.expired()) << done << " stores, and the target saw no " << kChanges << " changes";
          if (!enough && ::poll(&pfd, 1, 0) > 0) {
            ASSERT_TRUE(p.peer().wait("enough"));
            enough = true;
          }
          while (!enough && posted - done < kWindow) {
            Wr w = wr_atomic_write(posted, local->sge((posted % 2) * 8, 8), remote.at(8));
            ASSERT_TRUE(post(ep->qp(), w));
            ++posted;
          }
          ibv_wc wc{};
          const int n = ibv_poll_cq(ep->qp().send_cq(), 1, &wc);
          ASSERT_GE(n, 0);
          if (n == 0) continue;
          ASSERT_TRUE(check_wc(wc, {.wr_id = done, .opcode = IBV_WC_ATOMIC_WRITE}));
          ++done;
        }
        ASSERT_TRUE(p.peer().send(done));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto word = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, word);
        store64(word->data() + 8, 0);
        ASSERT_TRUE(p.peer().send(word->remote()));
        ASSERT_TRUE(p.peer().signal("watching"));
        uint64_t reads = 0, changes = 0, last = 0;
        bool said_enough = false;
        const Deadline deadline(scaled(Millis(40'000)));
        pollfd pfd{p.peer().fd(), POLLIN, 0};
        // Reads until the link has something to say (the count of stores),
        // which is read whole below.
        while (::poll(&pfd, 1, 0) == 0) {
          ASSERT_FALSE(deadline.expired()) << "the initiator never finished";
          for (int i = 0; i < 1000; ++i) {
            const uint64_t v = load64(word->data() + 8);
            ++reads;
            if (v != 0 && v != kA && v != kB) {
              ADD_FAILURE() << "torn value " << std::hex << v;
              break;
            }
            changes += v != last;
            last = v;
          }
          if (!said_enough && changes >= kChanges) {
            ASSERT_TRUE(p.peer().signal("enough"));
            said_enough = true;
          }
        }
        uint64_t stores = 0;
        ASSERT_TRUE(p.peer().recv(&stores));
        EXPECT_EQ(stores % 2 == 1 ? kA : kB, load64(word->data() + 8)) << "the last value stored";
        note("%llu stores, %llu reads, %llu changes seen", static_cast<unsigned long long>(stores),
             static_cast<unsigned long long>(reads), static_cast<unsigned long long>(changes));
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// Each word gets an ATOMIC WRITE and then a plain WRITE of another value, in
// one chain. Under loss and duplication (the faults entries) an ATOMIC WRITE
// whose answer was lost is sent again; the responder answers it from its
// responder resources without storing again, so the later WRITE's value stays.
TEST(RcAtomicWrite, RetriedRequestsAreNotStoredAgain) {
  constexpr int kWordsUsed = 64;
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), kWordsUsed * 16);
        ASSERT_NE(nullptr, local);
        RemoteBuf remote;
        ASSERT_TRUE(p.peer().recv(&remote));
        for (int i = 0; i < kWordsUsed; ++i) {
          store64(local->data() + i * 16, 0xA000000000000000ull | static_cast<uint64_t>(i));
          store64(local->data() + i * 16 + 8, 0xB000000000000000ull | static_cast<uint64_t>(i));
          Wr first = wr_atomic_write(2 * i, local->sge(i * 16, 8), remote.at(i * 8));
          Wr second = wr_write(2 * i + 1, {local->sge(i * 16 + 8, 8)}, remote.at(i * 8));
          ASSERT_TRUE(post(ep->qp(), {&first, &second}));
          std::vector<ibv_wc> wcs;
          ASSERT_TRUE(poll_n(ep->qp().send_cq(), 2, &wcs));
          EXPECT_TRUE(check_wc(wcs[0], {.wr_id = static_cast<uint64_t>(2 * i), .opcode = IBV_WC_ATOMIC_WRITE}));
          EXPECT_TRUE(check_wc(wcs[1], {.wr_id = static_cast<uint64_t>(2 * i + 1), .opcode = IBV_WC_RDMA_WRITE}));
        }
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "target",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        auto words = Region::create(ep->pd.get(), kWordsUsed * 8);
        ASSERT_NE(nullptr, words);
        ASSERT_TRUE(p.peer().send(words->remote()));
        ASSERT_TRUE(p.peer().wait("done"));
        for (int i = 0; i < kWordsUsed; ++i) {
          EXPECT_EQ(0xB000000000000000ull | static_cast<uint64_t>(i), load64(words->data() + i * 8)) << "word " << i;
        }
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// ---- refusals ------------------------------------------------------------------

// Responder errors (rxe's checks): a bad R_Key, an MR without REMOTE_WRITE and
// a range outside the MR are remote access errors; an unaligned address and
// a QP without IBV_ACCESS_REMOTE_WRITE are invalid requests. The target word
// is untouched and the requester's QP goes to Error.
TEST(RcAtomicWriteErrors, RemoteChecks) {
  enum Variant { kBadRkey, kMrWithoutRemoteWrite, kPastMrEnd, kUnaligned, kQpWithoutRemoteWrite, kCount };
  const char* const names[] = {"bad R_Key", "MR without REMOTE_WRITE", "past the MR's end", "unaligned address",
                               "QP without REMOTE_WRITE"};
  const ibv_wc_status want[] = {IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR,
                                IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_INV_REQ_ERR};
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer(), QpConfig{}, kCount);
        ASSERT_NE(nullptr, ep);
        auto local = Region::create(ep->pd.get(), 64);
        ASSERT_NE(nullptr, local);
        store64(local->data(), 0x1234567812345678ull);
        RemoteBuf rw, ro;
        ASSERT_TRUE(p.peer().recv(&rw));
        ASSERT_TRUE(p.peer().recv(&ro));
        for (int v = 0; v < kCount; ++v) {
          SCOPED_TRACE(names[v]);
          RemoteBuf dst = rw.at(16);
          if (v == kBadRkey) dst.rkey ^= 0x5A5A5A00;
          if (v == kMrWithoutRemoteWrite) dst = ro.at(16);
          if (v == kPastMrEnd) dst = rw.at(rw.len - 4);
          if (v == kUnaligned) dst = rw.at(20);
          Wr w = wr_atomic_write(v, local->sge(0, 8), dst);
          ASSERT_TRUE(run_wr_expect(ep->qp(v), w, want[v]));
          EXPECT_TRUE(ep->qp(v).wait_state(IBV_QPS_ERR));
        }
        ASSERT_TRUE(p.peer().signal("done"));
        ASSERT_TRUE(p.peer().wait("checked"));
      },
      "target",
      [&](Proc& p) {
        auto ep = Endpoint::open();
        ASSERT_NE(nullptr, ep);
        std::vector<TestQp*> qps;
        for (int v = 0; v < kCount; ++v) {
          QpConfig c;
          if (v == kQpWithoutRemoteWrite) c.access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
          qps.push_back(ep->add_qp(c));
          ASSERT_NE(nullptr, qps.back());
        }
        ASSERT_TRUE(connect_over(p.peer(), qps));
        auto rw = Region::create(ep->pd.get(), 64);
        auto ro = Region::create(ep->pd.get(), 64, IBV_ACCESS_REMOTE_READ);
        ASSERT_TRUE(rw && ro);
        ASSERT_TRUE(p.peer().send(rw->remote()));
        ASSERT_TRUE(p.peer().send(ro->remote()));
        ASSERT_TRUE(p.peer().wait("done"));
        EXPECT_TRUE(expect_fill(rw->data(), 64, kGuardByte, "the writable MR"));
        EXPECT_TRUE(expect_fill(ro->data(), 64, kGuardByte, "the read-only MR"));
        ASSERT_TRUE(p.peer().signal("checked"));
      });
}

// Refused at post: anything but eight bytes of data (EINVAL), and on UC and
// UD, which have no ATOMIC WRITE (IBA 1.5: RC only): EINVAL at post,
// EOPNOTSUPP from ibv_create_qp_ex for IBV_QP_EX_WITH_ATOMIC_WRITE.
TEST(RcAtomicWriteErrors, RefusedAtPostAndOnOtherTransports) {
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    auto local = Region::create(ep->pd.get(), 64);
    ASSERT_NE(nullptr, local);
    const RemoteBuf remote = local->remote();
    TestQp* rc = ep->add_qp(QpConfig{});
    TestQp* rc_peer = ep->add_qp(QpConfig{});
    ASSERT_TRUE(rc && rc_peer);
    ASSERT_TRUE(connect_local(*rc, *rc_peer));
    ibv_send_wr* bad = nullptr;
    for (const uint32_t len : {0u, 4u, 16u}) {
      Wr w = wr_atomic_write(1, local->sge(0, len), remote);
      if (len == 0) w.sges.clear();
      EXPECT_EQ(EINVAL, ibv_post_send(rc->get(), w.get(), &bad)) << len << " bytes";
    }
    QpConfig uc_config;
    uc_config.qp_type = IBV_QPT_UC;
    TestQp* uc = ep->add_qp(uc_config);
    TestQp* uc_peer = ep->add_qp(uc_config);
    ASSERT_TRUE(uc && uc_peer);
    ASSERT_TRUE(connect_local(*uc, *uc_peer));
    Wr w = wr_atomic_write(2, local->sge(0, 8), remote);
    EXPECT_EQ(EINVAL, ibv_post_send(uc->get(), w.get(), &bad)) << "UC";

    CqPtr cq = create_cq(ep->ctx.get(), 16);
    ASSERT_NE(nullptr, cq);
    auto create = [&](ibv_qp_type type, uint64_t ops) {
      ibv_qp_init_attr_ex a{};
      a.send_cq = cq.get();
      a.recv_cq = cq.get();
      a.cap.max_send_wr = 4;
      a.cap.max_recv_wr = 4;
      a.cap.max_send_sge = 1;
      a.cap.max_recv_sge = 1;
      a.qp_type = type;
      a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      a.pd = ep->pd.get();
      a.send_ops_flags = ops;
      errno = 0;
      ibv_qp* qp = ibv_create_qp_ex(ep->ctx.get(), &a);
      const int err = qp == nullptr ? errno : 0;
      if (qp != nullptr) {
        EXPECT_EQ(nullptr, type == IBV_QPT_RC ? nullptr : ibv_qp_to_qp_ex(qp)->wr_atomic_write);
        EXPECT_EQ(0, ibv_destroy_qp(qp));
      }
      return err;
    };
    EXPECT_EQ(0, create(IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_RDMA_READ));
    EXPECT_EQ(EOPNOTSUPP, create(IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_WRITE));
    EXPECT_EQ(EOPNOTSUPP, create(IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_WRITE));
  });
}

// ---- FLUSH (answered, never posted: rdma-core 44 has no verb) -------------------

// The rights a peer's FLUSH needs, with Linux's uapi values (rdma-core 44's
// verbs.h has no names for them): FLUSH_GLOBAL is granted to regions and
// QPs; FLUSH_PERSISTENT only to QPs, since no memory here is persistent (as
// rxe refuses it for such memory). The device says which it answers.
TEST(RcFlush, RightsAndCapability) {
  constexpr int kFlushGlobal = 1 << 8;      // IB_UVERBS_ACCESS_FLUSH_GLOBAL
  constexpr int kFlushPersistent = 1 << 9;  // IB_UVERBS_ACCESS_FLUSH_PERSISTENT
  constexpr uint64_t kCapFlushGlobal = 1ull << 38, kCapFlushPersistent = 1ull << 39;
  run_solo("solo", [](Proc&) {
    auto ep = Endpoint::open();
    ASSERT_NE(nullptr, ep);
    ibv_device_attr_ex attr{};
    ASSERT_EQ(0, ibv_query_device_ex(ep->ctx.get(), nullptr, &attr));
    EXPECT_NE(0u, attr.device_cap_flags_ex & kCapFlushGlobal);
    EXPECT_EQ(0u, attr.device_cap_flags_ex & kCapFlushPersistent);
    Buffer buf(4096);
    MrPtr global(ibv_reg_mr(ep->pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | kFlushGlobal));
    EXPECT_NE(nullptr, global) << errno_name(errno);
    errno = 0;
    MrPtr persistent(ibv_reg_mr(ep->pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | kFlushPersistent));
    EXPECT_EQ(nullptr, persistent);
    EXPECT_EQ(EINVAL, errno);
    QpConfig c;
    c.access = IBV_ACCESS_REMOTE_WRITE | kFlushGlobal | kFlushPersistent;
    TestQp* qp = ep->add_qp(c);
    ASSERT_NE(nullptr, qp);
    ASSERT_TRUE(qp->to_init());
    ibv_qp_attr got{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(0, ibv_query_qp(qp->get(), &got, IBV_QP_ACCESS_FLAGS, &init));
    EXPECT_EQ(static_cast<unsigned>(c.access), got.qp_access_flags);
  });
}

}  // namespace
}  // namespace softverbs::integration
