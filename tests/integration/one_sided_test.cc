// One-sided operations against a passive target: the target process makes no
// verbs call at all while the initiator WRITEs, READs and runs atomics of
// 1 B .. 4 MiB against its memory — it sits blocked in read(2) on a pipe, or in
// sleep(3). It checks the results after it wakes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>

#include "harness.h"
#include "pattern.h"
#include "verbs_fixture.h"

namespace softverbs::integration {
namespace {

const std::vector<size_t>& one_sided_sizes() {
  static const std::vector<size_t> sizes = {1, 7, 4096, 65537, kMiB, 4 * kMiB};
  return sizes;
}

constexpr uint64_t kReadSeed = 0x0E5ADull;
constexpr int kFetchAdds = 100;
constexpr uint64_t kAddend = 3;
constexpr uint64_t kSwaps = 50;

uint64_t write_seed(size_t k) { return 0x0E5E0 + k; }

// What the target offers: WRITE area, READ area, 8 atomic words.
struct TargetMemory {
  std::unique_ptr<Region> write_area;
  std::unique_ptr<Region> read_area;
  std::unique_ptr<Region> words;
};

bool prepare_target(Endpoint& ep, Link& link, TargetMemory* mem) {
  const Layout layout = make_layout(one_sided_sizes(), 64, 3);
  mem->write_area = Region::create(ep.pd.get(), layout.total);
  mem->read_area = Region::create(ep.pd.get(), layout.total);
  mem->words = Region::create(ep.pd.get(), 64);
  if (!mem->write_area || !mem->read_area || !mem->words) return false;
  fill_pattern(mem->read_area->data(), layout.total, kReadSeed);
  std::memset(mem->words->data(), 0, 64);
  const uint64_t w2 = 0x7777;
  std::memcpy(mem->words->data() + 16, &w2, 8);
  std::vector<RemoteBuf> unused;
  return exchange(link,
                  std::vector<RemoteBuf>{mem->write_area->remote(), mem->read_area->remote(),
                                         mem->words->remote()},
                  &unused);
}

// Runs on the initiator: every operation, checked locally where it can be.
void initiator_work(Endpoint& ep, const std::vector<RemoteBuf>& remote) {
  ASSERT_EQ(3u, remote.size());
  const auto& sizes = one_sided_sizes();
  const Layout layout = make_layout(sizes, 64, 3);
  auto local = Region::create(ep.pd.get(), layout.total);
  auto scratch = Region::create(ep.pd.get(), 64);
  ASSERT_TRUE(local && scratch);
  TestQp& qp = ep.qp();
  for (size_t k = 0; k < sizes.size(); ++k) {
    SCOPED_TRACE("size " + std::to_string(sizes[k]));
    fill_pattern(local->data() + layout.offsets[k], sizes[k], write_seed(k));
    Wr write = wr_write(k, {local->sge(layout.offsets[k], sizes[k])}, remote[0].at(layout.offsets[k]));
    ASSERT_TRUE(run_wr(qp, write, scaled(Millis(20'000))));
  }
  std::memset(local->data(), kGuardByte, local->size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    SCOPED_TRACE("size " + std::to_string(sizes[k]));
    Wr read = wr_read(100 + k, {local->sge(layout.offsets[k], sizes[k])}, remote[1].at(layout.offsets[k]));
    ASSERT_TRUE(run_wr(qp, read, scaled(Millis(20'000))));
    EXPECT_TRUE(expect_pattern(local->data() + layout.offsets[k], sizes[k], kReadSeed, "READ from a passive target",
                               layout.offsets[k]));
  }
  for (int i = 0; i < kFetchAdds; ++i) {
    Wr faa = wr_faa(200 + i, scratch->sge(0, 8), remote[2], kAddend);
    ASSERT_TRUE(run_wr(qp, faa));
    uint64_t old = 0;
    std::memcpy(&old, scratch->data(), 8);
    ASSERT_EQ(kAddend * i, old) << "FetchAdd #" << i;
  }
  for (uint64_t i = 0; i < kSwaps; ++i) {
    Wr cas = wr_cas(400 + i, scratch->sge(8, 8), remote[2].at(8), i, i + 1);
    ASSERT_TRUE(run_wr(qp, cas));
    uint64_t old = 0;
    std::memcpy(&old, scratch->data() + 8, 8);
    ASSERT_EQ(i, old) << "CmpSwap #" << i;
  }
  Wr miss = wr_cas(500, scratch->sge(16, 8), remote[2].at(16), 1, 2);
  ASSERT_TRUE(run_wr(qp, miss));
  uint64_t old = 0;
  std::memcpy(&old, scratch->data() + 16, 8);
  EXPECT_EQ(0x7777u, old) << "CmpSwap with a non-matching compare returns the current value";
}

void target_verify(const TargetMemory& mem) {
  const auto& sizes = one_sided_sizes();
  const Layout layout = make_layout(sizes, 64, 3);
  std::vector<Span> spans;
  for (size_t k = 0; k < sizes.size(); ++k) {
    EXPECT_TRUE(expect_pattern(mem.write_area->data() + layout.offsets[k], sizes[k], write_seed(k),
                               "WRITE of " + std::to_string(sizes[k]) + " bytes into a passive target"));
    spans.push_back({layout.offsets[k], sizes[k]});
  }
  EXPECT_TRUE(expect_guard_outside(mem.write_area->data(), layout.total, spans, "WRITE area"));
  EXPECT_TRUE(expect_pattern(mem.read_area->data(), layout.total, kReadSeed, "READ area (unchanged)"));
  uint64_t w[8];
  std::memcpy(w, mem.words->data(), sizeof w);
  EXPECT_EQ(kAddend * kFetchAdds, w[0]) << "FetchAdd counter";
  EXPECT_EQ(kSwaps, w[1]) << "CmpSwap chain";
  EXPECT_EQ(0x7777u, w[2]) << "word of the failed CmpSwap";
  for (int i = 3; i < 8; ++i) {
    EXPECT_EQ(0u, w[i]) << "word " << i;
  }
}

TEST(OneSided, TargetBlockedInRead) {
  int pipe_fds[2];
  ASSERT_EQ(0, ::pipe(pipe_fds));
  const int rd = pipe_fds[0];
  const int wr = pipe_fds[1];
  RunOptions options;
  options.timeout = Millis(60'000);
  options.close_in_parent = {rd, wr};
  run_pair(
      "initiator",
      [&](Proc& p) {
        ::close(rd);
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        std::vector<RemoteBuf> remote;
        ASSERT_TRUE(exchange(p.peer(), std::vector<RemoteBuf>{}, &remote));
        ASSERT_TRUE(p.peer().wait("blocking"));
        ::usleep(20'000);  // the target is in read() by now
        initiator_work(*ep, remote);
        ASSERT_EQ(1, ::write(wr, "x", 1));
        ASSERT_TRUE(p.peer().wait("verified", Deadline(scaled(Millis(30'000)))));
      },
      "target",
      [&](Proc& p) {
        ::close(wr);
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        TargetMemory mem;
        ASSERT_TRUE(prepare_target(*ep, p.peer(), &mem));
        ASSERT_TRUE(p.peer().signal("blocking"));
        char byte = 0;
        ssize_t n;
        do {
          n = ::read(rd, &byte, 1);  // no verbs call until the initiator is done
        } while (n < 0 && errno == EINTR);
        ASSERT_EQ(1, n) << "the initiator closed the pipe without finishing";
        target_verify(mem);
        ASSERT_TRUE(p.peer().signal("verified"));
      },
      options);
}

volatile sig_atomic_t g_woken = 0;
void on_wake(int) { g_woken = 1; }

TEST(OneSided, TargetAsleep) {
  RunOptions options;
  options.timeout = Millis(60'000);
  run_pair(
      "initiator",
      [&](Proc& p) {
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        std::vector<RemoteBuf> remote;
        ASSERT_TRUE(exchange(p.peer(), std::vector<RemoteBuf>{}, &remote));
        pid_t target = 0;
        ASSERT_TRUE(p.peer().recv(&target));
        ::usleep(20'000);
        initiator_work(*ep, remote);
        ASSERT_EQ(0, ::kill(target, SIGUSR1));
        ASSERT_TRUE(p.peer().wait("verified", Deadline(scaled(Millis(30'000)))));
      },
      "target",
      [&](Proc& p) {
        struct sigaction sa {};
        sa.sa_handler = on_wake;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0;  // no SA_RESTART: sleep() returns early
        ASSERT_EQ(0, ::sigaction(SIGUSR1, &sa, nullptr));
        auto ep = connected_endpoint(p.peer());
        ASSERT_NE(nullptr, ep);
        TargetMemory mem;
        ASSERT_TRUE(prepare_target(*ep, p.peer(), &mem));
        const pid_t self = ::getpid();
        ASSERT_TRUE(p.peer().send(self));
        const Deadline deadline(scaled(Millis(50'000)));
        while (g_woken == 0 && !deadline.expired()) ::sleep(1);
        ASSERT_EQ(1, g_woken) << "never woken by the initiator";
        target_verify(mem);
        ASSERT_TRUE(p.peer().signal("verified"));
      },
      options);
}

}  // namespace
}  // namespace softverbs::integration
