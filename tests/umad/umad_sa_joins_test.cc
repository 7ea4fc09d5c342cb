// Multicast memberships shared by the processes of one port (issue 18):
// through libibumad's C API, an SA agent in this process sees the joins and
// leaves other agents send; a leave whose JoinState another live process
// still holds never reaches it and is answered at once.
#include <infiniband/umad.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_child.h"

namespace {

constexpr int kMad = 256;
constexpr uint8_t kSa = 0x03;
constexpr uint8_t kSet = 0x02, kGetResp = 0x81, kDelete = 0x15, kDeleteResp = 0x95;

struct Buffer {
  Buffer() : bytes(umad_size() + kMad) {}
  std::vector<uint8_t> bytes;
  void* umad() { return bytes.data(); }
  uint8_t* mad() { return static_cast<uint8_t*>(umad_get_mad(umad())); }
};

// An MCMemberRecord Set or Delete for MGID ff12::<low> by this port, as
// perftest builds it (JoinState in the low nibble of record byte 48).
Buffer mcm(uint8_t method, uint8_t low, uint8_t join_state, uint32_t tid) {
  Buffer b;
  uint8_t* m = b.mad();
  m[0] = 1;
  m[1] = kSa;
  m[2] = 2;
  m[3] = method;
  for (int i = 0; i < 4; ++i) m[12 + i] = static_cast<uint8_t>(tid >> (24 - 8 * i));
  m[16] = 0x00;
  m[17] = 0x38;  // MCMemberRecord
  m[56] = 0xff;
  m[57] = 0x12;
  m[56 + 15] = low;
  m[56 + 16] = 0xfe;  // PortGID: fe80::1
  m[56 + 16 + 1] = 0x80;
  m[56 + 31] = 1;
  m[56 + 48] = join_state;
  umad_set_addr(b.umad(), 1, 1, 0, 0x80010000);
  return b;
}

long sa_methods_mask[16 / sizeof(long)] = {1L << kSet | 1L << kDelete};

// The SA answers whatever reaches it, status 0: a Set with a GetResp, a
// Delete with a DeleteResp (IBA 15.4).
void answer(int fd, int sa, Buffer& got) {
  Buffer resp = got;
  resp.mad()[3] = got.mad()[3] == kSet ? kGetResp : kDeleteResp;
  umad_set_addr(resp.umad(), 1, 1, 0, 0x80010000);
  ASSERT_EQ(umad_send(fd, sa, resp.umad(), kMad, 0, 0), 0);
}

// Another process of the port: joins group 1 as a full member, reports on
// `ready`, then waits to be killed (run by the test below through exec, so
// no thread outlives a fork).
TEST(UmadSaJoinsMember, Join) {
  const char* ready = getenv("SV_UMAD_JOIN_READY_FD");
  if (ready == nullptr) GTEST_SKIP() << "run by ALeaveAnotherProcessStillHoldsIsAnsweredHere";
  const int fd = umad_open_port(nullptr, 0);
  const int me = fd < 0 ? -1 : umad_register(fd, kSa, 2, 0, nullptr);
  Buffer join = mcm(kSet, 1, 1, 1);
  Buffer got;
  int len = kMad;
  const bool ok = me >= 0 && umad_send(fd, me, join.umad(), kMad, 2000, 0) == 0 &&
                  umad_recv(fd, got.umad(), &len, 5000) == me && umad_status(got.umad()) == 0;
  const char c = ok ? 'y' : 'n';
  (void)!write(atoi(ready), &c, 1);
  pause();
}

TEST(UmadSaJoins, ALeaveAnotherProcessStillHoldsIsAnsweredHere) {
  const int server = umad_open_port(nullptr, 0), client = umad_open_port(nullptr, 0);
  ASSERT_GE(server, 0);
  ASSERT_GE(client, 0);
  const int sa = umad_register(server, kSa, 2, 0, sa_methods_mask);
  ASSERT_GE(sa, 0);
  const int me = umad_register(client, kSa, 2, 0, nullptr);
  ASSERT_GE(me, 0);

  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  TestChild child("UmadSaJoinsMember.Join", "SV_UMAD_JOIN_READY_FD=" + std::to_string(ready[1]));
  ASSERT_GE(child.pid(), 0);
  close(ready[1]);
  // The member's join reaches the SA here, which answers it.
  Buffer got;
  int len = kMad;
  ASSERT_EQ(umad_recv(server, got.umad(), &len, 5000), sa);
  EXPECT_EQ(got.mad()[3], kSet);
  answer(server, sa, got);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, 'y');

  // This process joins group 1 too (full member and send-only non-member).
  Buffer join = mcm(kSet, 1, 0x5, 2);
  ASSERT_EQ(umad_send(client, me, join.umad(), kMad, 2000, 0), 0);
  ASSERT_EQ(umad_recv(server, got.umad(), &len, 5000), sa);
  answer(server, sa, got);
  ASSERT_EQ(umad_recv(client, got.umad(), &len, 5000), me);
  EXPECT_EQ(got.mad()[3], kGetResp);

  // Its leave: the SA is asked to take out only the send-only bit, which
  // the other process does not hold.
  Buffer leave = mcm(kDelete, 1, 0x5, 3);
  ASSERT_EQ(umad_send(client, me, leave.umad(), kMad, 2000, 0), 0);
  ASSERT_EQ(umad_recv(server, got.umad(), &len, 5000), sa);
  EXPECT_EQ(got.mad()[3], kDelete);
  EXPECT_EQ(got.mad()[56 + 48] & 0xf, 0x4);
  answer(server, sa, got);
  ASSERT_EQ(umad_recv(client, got.umad(), &len, 5000), me);
  EXPECT_EQ(got.mad()[3], kDeleteResp);

  // Join and leave as a full member only: the other process still is one,
  // so the DeleteResp comes without the SA seeing the Delete.
  Buffer join2 = mcm(kSet, 1, 0x1, 4);
  ASSERT_EQ(umad_send(client, me, join2.umad(), kMad, 2000, 0), 0);
  ASSERT_EQ(umad_recv(server, got.umad(), &len, 5000), sa);
  answer(server, sa, got);
  ASSERT_EQ(umad_recv(client, got.umad(), &len, 5000), me);
  Buffer leave2 = mcm(kDelete, 1, 0x1, 5);
  ASSERT_EQ(umad_send(client, me, leave2.umad(), kMad, 2000, 0), 0);
  ASSERT_EQ(umad_recv(client, got.umad(), &len, 5000), me);
  EXPECT_EQ(got.mad()[3], kDeleteResp);
  EXPECT_EQ(umad_status(got.umad()), 0);
  EXPECT_EQ(got.mad()[4] | got.mad()[5], 0);  // MAD status: success
  EXPECT_EQ(got.mad()[15], 5);                // the leave's own TID
  EXPECT_EQ(umad_recv(server, got.umad(), &len, 200), -ETIMEDOUT);

  // Once that process is gone, its membership no longer counts: the next
  // leave reaches the SA.
  ASSERT_TRUE(child.kill_and_reap());
  ASSERT_EQ(umad_send(client, me, join2.umad(), kMad, 2000, 0), 0);
  ASSERT_EQ(umad_recv(server, got.umad(), &len, 5000), sa);
  answer(server, sa, got);
  ASSERT_EQ(umad_recv(client, got.umad(), &len, 5000), me);
  ASSERT_EQ(umad_send(client, me, leave2.umad(), kMad, 2000, 0), 0);
  ASSERT_EQ(umad_recv(server, got.umad(), &len, 5000), sa);
  EXPECT_EQ(got.mad()[3], kDelete);
  answer(server, sa, got);
  ASSERT_EQ(umad_recv(client, got.umad(), &len, 5000), me);

  umad_close_port(client);
  umad_close_port(server);
}

}  // namespace
