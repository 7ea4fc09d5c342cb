// MADs between the agents of one port (issue 19), through libibumad's C API
// only: a request reaches the agent registered for its class, version and
// method, in this process or another; the answer comes back by TID; RMPP
// agents exchange whole messages longer than one MAD.
#include <infiniband/umad.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_child.h"

namespace {

constexpr int kMad = 256;
constexpr uint8_t kSa = 0x03;
constexpr uint8_t kGetTable = 0x12;
constexpr uint8_t kGetTableResp = 0x92;
using Clock = std::chrono::steady_clock;

struct Buffer {
  explicit Buffer(size_t mad_bytes = kMad) : bytes(umad_size() + mad_bytes) {}
  std::vector<uint8_t> bytes;
  void* umad() { return bytes.data(); }
  uint8_t* mad() { return static_cast<uint8_t*>(umad_get_mad(umad())); }
};

uint64_t be_at(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}
void set_be(uint8_t* p, int n, uint64_t v) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

Buffer sa_request(uint64_t tid, uint8_t method = kGetTable) {
  Buffer b;
  uint8_t* m = b.mad();
  m[0] = 1;
  m[1] = kSa;
  m[2] = 2;
  m[3] = method;
  set_be(m + 8, 8, tid);
  set_be(m + 16, 2, 0x0011);  // NodeRecord
  umad_set_addr(b.umad(), 1, 1, 0, 0x80010000);  // the port's LID (the built-in SM's)
  return b;
}

// The SA's side: Get and GetTable of class 0x03 version 2, with RMPP.
int register_sa(int fd) {
  long mask[16 / sizeof(long)] = {};
  mask[0] = 1L << 0x01 | 1L << kGetTable;
  return umad_register(fd, kSa, 2, 1, mask);
}

// A GetTableResp of `records` NodeRecords for `req`, as opensm sends it:
// only the Active flag set, the whole message in one umad_send.
Buffer table_response(const uint8_t* req, int records) {
  Buffer b(56 + records * 112 > kMad ? 56 + records * 112 : kMad);
  std::memcpy(b.mad(), req, 56);
  b.mad()[3] = kGetTableResp;
  b.mad()[26] = 0x01;             // RMPP Active
  set_be(b.mad() + 44, 2, 112 / 8);  // AttributeOffset, in 8-byte words
  for (int r = 0; r < records; ++r) b.mad()[56 + r * 112] = static_cast<uint8_t>(r + 1);
  umad_set_addr(b.umad(), 1, 1, 0, 0x80010000);
  return b;
}

class UmadAgents : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = umad_open_port(nullptr, 0);
    server_ = umad_open_port(nullptr, 0);
    ASSERT_GE(client_, 0);
    ASSERT_GE(server_, 0);
  }
  void TearDown() override {
    umad_close_port(client_);
    umad_close_port(server_);
  }
  int client_ = -1, server_ = -1;
};

TEST_F(UmadAgents, ARequestReachesItsAgentAndTheAnswerComesBackByTid) {
  const int sa = register_sa(server_);
  ASSERT_GE(sa, 0);
  const int me = umad_register(client_, kSa, 2, 1, nullptr);
  ASSERT_GE(me, 0);
  Buffer req = sa_request(0x1122334455667788ull);
  ASSERT_EQ(umad_send(client_, me, req.umad(), kMad, 2000, 0), 0);
  Buffer got;
  int len = kMad;
  ASSERT_EQ(umad_recv(server_, got.umad(), &len, 2000), sa);
  EXPECT_EQ(len, kMad);
  EXPECT_EQ(umad_status(got.umad()), 0);
  const uint64_t tid = be_at(got.mad() + 8, 8);
  EXPECT_EQ(tid & 0xffffffffu, 0x55667788u);  // the low half is the program's
  EXPECT_NE(tid >> 32, 0x11223344u);          // the high half names the sending agent
  const ib_mad_addr_t* from = umad_get_mad_addr(got.umad());
  EXPECT_EQ(be32toh(from->qpn), 1u);
  EXPECT_EQ(be16toh(from->lid), 1);

  // Six records: 728 bytes, more than one MAD.
  Buffer resp = table_response(got.mad(), 6);
  ASSERT_EQ(umad_send(server_, sa, resp.umad(), 56 + 6 * 112, 0, 0), 0);
  Buffer answer;
  len = kMad;
  errno = 0;
  ASSERT_EQ(umad_recv(client_, answer.umad(), &len, 2000), -ENOSPC);
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_EQ(len, 56 + 6 * 112);  // what it takes, and it stays queued
  Buffer whole(static_cast<size_t>(len));
  ASSERT_EQ(umad_recv(client_, whole.umad(), &len, 0), me);
  EXPECT_EQ(len, 56 + 6 * 112);
  const uint8_t* m = whole.mad();
  EXPECT_EQ(m[3], kGetTableResp);
  EXPECT_EQ(be_at(m + 8, 8), tid);
  EXPECT_EQ(m[24], 1);     // RMPP version
  EXPECT_EQ(m[25], 1);     // Data
  EXPECT_EQ(m[26], 0x03);  // Active | First
  EXPECT_EQ(be_at(m + 28, 4), 1u);           // segment 1
  EXPECT_EQ(be_at(m + 32, 4), 4u * 220 - 128);  // PayloadLength of the whole transfer
  for (int r = 0; r < 6; ++r) EXPECT_EQ(m[56 + r * 112], r + 1) << r;
  // The answer ended the wait: no timeout follows.
  EXPECT_EQ(umad_recv(client_, whole.umad(), &len, 300), -ETIMEDOUT);
}

TEST_F(UmadAgents, AMethodNobodyRegisteredTimesOut) {
  ASSERT_GE(register_sa(server_), 0);
  const int me = umad_register(client_, kSa, 2, 1, nullptr);
  Buffer req = sa_request(5, 0x14);  // GetTraceTable: not in the SA's mask
  const auto start = Clock::now();
  ASSERT_EQ(umad_send(client_, me, req.umad(), kMad, 100, 1), 0);
  Buffer got;
  int len = kMad;
  ASSERT_EQ(umad_recv(client_, got.umad(), &len, 5000), me);
  EXPECT_EQ(umad_status(got.umad()), ETIMEDOUT);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_EQ(umad_poll(server_, 0), -ETIMEDOUT);
  Buffer v2 = sa_request(6);
  v2.mad()[2] = 1;  // class version 1: not the SA's
  ASSERT_EQ(umad_send(client_, me, v2.umad(), kMad, 50, 0), 0);
  ASSERT_EQ(umad_recv(client_, got.umad(), &len, 5000), me);
  EXPECT_EQ(umad_status(got.umad()), ETIMEDOUT);
}

TEST_F(UmadAgents, RegistrationsFollowTheKernelsRules) {
  const int sa = register_sa(server_);
  ASSERT_GE(sa, 0);
  EXPECT_EQ(register_sa(client_), -EINVAL);               // GetTable is taken on this port
  EXPECT_EQ(umad_register(client_, 0x04, 1, 1, nullptr), -EINVAL);  // the PMA has no RMPP
  // Vendor range 2 needs an OUI: umad_register gives OpenIB's (rdma-core's
  // umad.c), as ibping's client registers class 0x32.
  uint8_t no_oui[3] = {0, 0, 0};
  long one_method[16 / sizeof(long)] = {1L << 1};
  EXPECT_EQ(umad_register_oui(client_, 0x30, 0, no_oui, one_method), -EINVAL);
  uint8_t openib[3] = {0x00, 0x14, 0x05};
  const int by_class = umad_register(client_, 0x30, 1, 0, one_method);
  ASSERT_GE(by_class, 0);
  EXPECT_EQ(umad_register_oui(server_, 0x30, 0, openib, one_method), -EINVAL);  // same class, OUI, method
  ASSERT_EQ(umad_unregister(client_, by_class), 0);
  ASSERT_EQ(umad_unregister(server_, sa), 0);
  EXPECT_GE(register_sa(client_), 0);  // free again
}

TEST_F(UmadAgents, AnAgentWithoutRmppSendsOneMadAtMost) {
  const int plain = umad_register(client_, kSa, 2, 0, nullptr);
  Buffer big = table_response(sa_request(1).mad(), 6);
  big.mad()[3] = kGetTable;
  EXPECT_EQ(umad_send(client_, plain, big.umad(), 56 + 6 * 112, 0, 0), -EINVAL);
}

TEST_F(UmadAgents, AnAnswerNobodyWaitsForIsDropped) {
  const int sa = register_sa(server_);
  const int me = umad_register(client_, kSa, 2, 1, nullptr);
  Buffer req = sa_request(7);
  ASSERT_EQ(umad_send(client_, me, req.umad(), kMad, 0, 0), 0);  // waits for nothing
  Buffer got;
  int len = kMad;
  ASSERT_EQ(umad_recv(server_, got.umad(), &len, 2000), sa);
  Buffer resp = table_response(got.mad(), 1);
  ASSERT_EQ(umad_send(server_, sa, resp.umad(), kMad, 0, 0), 0);
  EXPECT_EQ(umad_recv(client_, got.umad(), &len, 300), -ETIMEDOUT);
}

// The SA served from another process (this binary again, run by the test
// below, so no thread outlives a fork): it reports on `ready` whether it
// registered, then blocks in poll() on the bare fd, as opensm's receiver
// does, and answers every request with three records.
TEST(UmadAgentsServer, Serve) {
  const char* ready = getenv("SV_UMAD_SERVE_READY_FD");
  if (ready == nullptr) GTEST_SKIP() << "run by AnotherProcessServesAndItsDeathTimesOut";
  const int fd = umad_open_port(nullptr, 0);
  const int sa = fd < 0 ? -1 : register_sa(fd);
  const char ok = sa >= 0 ? 'y' : 'n';
  (void)!write(atoi(ready), &ok, 1);
  for (;;) {
    pollfd p{umad_get_fd(fd), POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) _exit(1);
    Buffer got;
    int len = kMad;
    if (umad_recv(fd, got.umad(), &len, 0) != sa) continue;
    Buffer resp = table_response(got.mad(), 3);
    umad_send(fd, sa, resp.umad(), 56 + 3 * 112, 0, 0);
  }
}

// Its fd wakes without it calling into the library; once it is killed,
// requests time out and nothing hangs.
TEST_F(UmadAgents, AnotherProcessServesAndItsDeathTimesOut) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  TestChild child("UmadAgentsServer.Serve", "SV_UMAD_SERVE_READY_FD=" + std::to_string(ready[1]));
  ASSERT_GE(child.pid(), 0);
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, 'y');
  const int me = umad_register(client_, kSa, 2, 1, nullptr);
  Buffer req = sa_request(0xabc);
  ASSERT_EQ(umad_send(client_, me, req.umad(), kMad, 2000, 0), 0);
  Buffer whole(56 + 3 * 112);
  int len = 56 + 3 * 112;
  EXPECT_EQ(umad_recv(client_, whole.umad(), &len, 5000), me);
  EXPECT_EQ(umad_status(whole.umad()), 0);
  EXPECT_EQ(len, 56 + 3 * 112);
  EXPECT_EQ(be_at(whole.mad() + 8, 8) & 0xffffffffu, 0xabcu);

  ASSERT_TRUE(child.kill_and_reap());
  const auto start = Clock::now();
  ASSERT_EQ(umad_send(client_, me, req.umad(), kMad, 100, 0), 0);
  len = 56 + 3 * 112;
  ASSERT_EQ(umad_recv(client_, whole.umad(), &len, 5000), me);
  EXPECT_EQ(umad_status(whole.umad()), ETIMEDOUT);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  // The dead registrant's methods are free to take.
  EXPECT_GE(register_sa(server_), 0);
}

// IBA 9.6.1.1 / 14.2.5.1: QP1 drops a GMP whose P_Key matches no valid
// entry of the port's table (index 5 of the boot table: the invalid key 0).
// Its agent never sees it, the sender times out, and the SM hears trap 257
// (Bad P_Key) naming the key, the LIDs and QP1 at both ends.
TEST_F(UmadAgents, AGmpWithABadPKeyIsDroppedAndTheSmHearsTrap257) {
  long mask[16 / sizeof(long)] = {};
  mask[0] = 1L << 0x05;  // Trap
  const int sm = umad_register(server_, 0x01, 1, 0, mask);
  ASSERT_GE(sm, 0);
  const int sa = register_sa(server_);
  ASSERT_GE(sa, 0);
  const int me = umad_register(client_, kSa, 2, 1, nullptr);
  ASSERT_GE(me, 0);
  Buffer req = sa_request(0x99);
  umad_set_pkey(req.umad(), 5);
  ASSERT_EQ(umad_send(client_, me, req.umad(), kMad, 200, 0), 0);
  Buffer got;
  int len = kMad;
  ASSERT_EQ(umad_recv(server_, got.umad(), &len, 2000), sm) << "the SA got it, or the SM no trap";
  const uint8_t* m = got.mad();
  EXPECT_EQ(m[1], 0x01);
  EXPECT_EQ(m[3], 0x05);                  // SubnTrap
  EXPECT_EQ(be_at(m + 16, 2), 0x0002u);   // Notice
  EXPECT_EQ(m[64], 0x82);                 // generic, Security
  EXPECT_EQ(be_at(m + 65, 3), 1u);        // producer: CA
  EXPECT_EQ(be_at(m + 68, 2), 257u);
  EXPECT_EQ(be_at(m + 76, 2), 1u);        // LID1: the sender, the port itself
  EXPECT_EQ(be_at(m + 78, 2), 1u);        // LID2
  EXPECT_EQ(be_at(m + 80, 4), 0u);        // the key it carried: invalid
  EXPECT_EQ(be_at(m + 84, 4) & 0xffffff, 1u);  // QP1
  EXPECT_EQ(be_at(m + 88, 4) & 0xffffff, 1u);  // QP2
  len = kMad;
  ASSERT_EQ(umad_recv(client_, got.umad(), &len, 2000), me);
  EXPECT_EQ(umad_status(got.umad()), ETIMEDOUT);
  EXPECT_EQ(umad_poll(server_, 0), -ETIMEDOUT) << "the SA saw it";
  // The default P_Key, at index 0, passes.
  umad_set_pkey(req.umad(), 0);
  ASSERT_EQ(umad_send(client_, me, req.umad(), kMad, 200, 0), 0);
  len = kMad;
  EXPECT_EQ(umad_recv(server_, got.umad(), &len, 2000), sa);
}

// A SubnTrap(Notice) SMP (IBA 14.2.5.1) for this port reaches the agent
// that registered class 0x01 for the Trap method, as opensm registers it;
// the SM's TrapRepress gets no answer; with no SM registered the trap goes
// nowhere (and a sender that waits learns so from its timeout).
TEST_F(UmadAgents, ATrapReachesTheSmAndItsRepressIsNotAnswered) {
  long mask[16 / sizeof(long)] = {};
  mask[0] = 1L << 0x01 | 1L << 0x02 | 1L << 0x05 | 1L << 0x07;  // Get, Set, Trap, TrapRepress
  const int sm = umad_register(server_, 0x01, 1, 0, mask);
  ASSERT_GE(sm, 0);
  const int me = umad_register(client_, 0x01, 1, 0, nullptr);
  ASSERT_GE(me, 0);
  Buffer trap;
  uint8_t* m = trap.mad();
  m[0] = 1;
  m[1] = 0x01;
  m[2] = 1;
  m[3] = 0x05;  // SubnTrap
  set_be(m + 8, 8, 0x77);
  set_be(m + 16, 2, 0x0002);  // Notice
  m[64] = 0x81;               // generic, urgent
  set_be(m + 67, 1, 2);       // producer: switch
  set_be(m + 68, 2, 128);     // trap 128
  umad_set_addr(trap.umad(), 1, 0, 0, 0);  // to the SM's LID: the port's own
  ASSERT_EQ(umad_send(client_, me, trap.umad(), kMad, 0, 0), 0);
  Buffer got;
  int len = kMad;
  ASSERT_EQ(umad_recv(server_, got.umad(), &len, 2000), sm);
  EXPECT_EQ(got.mad()[3], 0x05);
  EXPECT_EQ(be_at(got.mad() + 68, 2), 128u);
  EXPECT_EQ(be32toh(umad_get_mad_addr(got.umad())->qpn), 0u);  // it came to QP0

  // The SM represses it: nothing comes back to the trap's sender, nor
  // from a node elsewhere in the subnet (here: none at LID 9).
  Buffer repress;
  std::memcpy(repress.mad(), got.mad(), kMad);
  repress.mad()[3] = 0x07;
  umad_set_addr(repress.umad(), 1, 0, 0, 0);
  ASSERT_EQ(umad_send(server_, sm, repress.umad(), kMad, 0, 0), 0);
  umad_set_addr(repress.umad(), 9, 0, 0, 0);
  ASSERT_EQ(umad_send(server_, sm, repress.umad(), kMad, 200, 0), 0);
  len = kMad;
  EXPECT_EQ(umad_recv(client_, got.umad(), &len, 300), -ETIMEDOUT);
  EXPECT_EQ(umad_poll(server_, 300), -ETIMEDOUT);

  // No SM: the port's SMA neither takes nor answers the trap.
  ASSERT_EQ(umad_unregister(server_, sm), 0);
  const auto start = Clock::now();
  ASSERT_EQ(umad_send(client_, me, trap.umad(), kMad, 100, 0), 0);
  len = kMad;
  ASSERT_EQ(umad_recv(client_, got.umad(), &len, 2000), me);
  EXPECT_EQ(umad_status(got.umad()), ETIMEDOUT);
  EXPECT_EQ(got.mad()[3], 0x05);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(umad_poll(server_, 0), -ETIMEDOUT);
}

}  // namespace
