// softverbs-demo, server process: registers its buffer, connects, then sits
// blocked on the socket and carries out the client's few Commands (post a
// receive, check a completion or its memory, echo ping-pongs).
#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "demo_endpoint.h"
#include "demo_protocol.h"
#include "demo_roles.h"

namespace softverbs::demo {

namespace {

Status in_buffer(const Endpoint& ep, uint64_t offset, uint64_t len) {
  if (offset > ep.buffer_size() || len > ep.buffer_size() - offset) {
    return Status::fail("range %llu+%llu is outside the %zu-byte buffer",
                        static_cast<unsigned long long>(offset), static_cast<unsigned long long>(len),
                        ep.buffer_size());
  }
  return Status::ok();
}

// The guard after a message, when asked for and it fits in the message's area.
size_t guard_for(const Endpoint& ep, const Command& cmd) {
  if ((cmd.flags & kCheckGuard) == 0) return 0;
  return cmd.offset + cmd.len + kGuard <= ep.buffer_size() && cmd.len + kGuard <= kArea ? kGuard : 0;
}

Status expect_recv(Endpoint& ep, const Command& cmd, Reply* reply) {
  DEMO_TRY(in_buffer(ep, cmd.offset, cmd.len));
  ibv_wc wc;
  DEMO_TRY(ep.wait_recv(&wc, kOpTimeoutMs, "receive completion"));
  bool write_imm = (cmd.flags & kExpectWriteImm) != 0;
  ibv_wc_opcode want = write_imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  if (wc.opcode != want) {
    return Status::fail("receive completion has opcode %d, expected %d (%s)", static_cast<int>(wc.opcode),
                        static_cast<int>(want), write_imm ? "IBV_WC_RECV_RDMA_WITH_IMM" : "IBV_WC_RECV");
  }
  if (wc.wr_id != cmd.value) {
    return Status::fail("receive completion has wr_id %llu, expected %llu",
                        static_cast<unsigned long long>(wc.wr_id), static_cast<unsigned long long>(cmd.value));
  }
  if (wc.qp_num != ep.qp_num()) return Status::fail("receive completion names QP 0x%x", wc.qp_num);
  bool has_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
  if ((cmd.flags & kExpectImm) != 0) {
    if (!has_imm) return Status::fail("receive completion lacks IBV_WC_WITH_IMM");
    if (ntohl(wc.imm_data) != cmd.imm) {
      return Status::fail("immediate is 0x%08x, expected 0x%08x", ntohl(wc.imm_data), cmd.imm);
    }
  } else if (has_imm) {
    return Status::fail("receive completion has IBV_WC_WITH_IMM for a SEND without immediate");
  }
  // IBA: byte_len of a receive is the length of the incoming message.
  if (!write_imm && wc.byte_len != cmd.len) {
    return Status::fail("receive completion byte_len %u, expected %u", wc.byte_len, cmd.len);
  }
  DEMO_TRY(check_pattern(ep.buffer() + cmd.offset, cmd.len, cmd.seed, guard_for(ep, cmd),
                         write_imm ? "server memory" : "server receive buffer"));
  *reply = ok_reply(wc.byte_len, has_imm ? ntohl(wc.imm_data) : 0);
  return Status::ok();
}

// SEND ping-pong: echo each 8-byte ping back until kPingStop.
Status ping_pong(Endpoint& ep, Channel& ch, Reply* reply) {
  for (int slot = 0; slot < kPingDepth; ++slot) {
    DEMO_TRY(ep.post_recv(kPingRecvArea + slot * kPingSlot, kPingSlot, static_cast<uint64_t>(slot)));
  }
  DEMO_TRY(ch.send(ok_reply()));
  uint32_t outstanding = 0;  // signaled echoes not yet completed
  uint64_t expect = 0;
  ibv_wc wc[16];
  for (;;) {
    ibv_wc rwc;
    DEMO_TRY(ep.wait_recv(&rwc, kOpTimeoutMs, "ping receive"));
    int slot = static_cast<int>(rwc.wr_id);
    uint64_t value;
    std::memcpy(&value, ep.buffer() + kPingRecvArea + slot * kPingSlot, sizeof value);
    if (value == kPingStop) break;
    if (rwc.byte_len != sizeof value || value != expect) {
      return Status::fail("ping %llu: received %u bytes holding %llu", static_cast<unsigned long long>(expect),
                          rwc.byte_len, static_cast<unsigned long long>(value));
    }
    DEMO_TRY(ep.post_recv(kPingRecvArea + slot * kPingSlot, kPingSlot, static_cast<uint64_t>(slot)));
    while (outstanding >= static_cast<uint32_t>(kPingDepth)) {
      ibv_wc swc;
      DEMO_TRY(ep.wait_send(&swc, kOpTimeoutMs, "echo send"));
      --outstanding;
    }
    size_t send_off = kPingSendArea + (expect % kPingDepth) * kPingSlot;
    std::memcpy(ep.buffer() + send_off, &value, sizeof value);
    SendRequest req;
    req.opcode = IBV_WR_SEND;
    req.local_offset = send_off;
    req.length = sizeof value;
    req.wr_id = expect;
    DEMO_TRY(ep.post_send(req));
    ++outstanding;
    int n = ep.poll_send(wc, 16);
    if (n < 0) return Status::fail("ibv_poll_cq: %d", n);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return Status::fail("echo send: %s", describe(wc[i]).c_str());
    }
    outstanding -= static_cast<uint32_t>(n);
    ++expect;
  }
  while (outstanding > 0) {
    ibv_wc swc;
    DEMO_TRY(ep.wait_send(&swc, kOpTimeoutMs, "echo send"));
    --outstanding;
  }
  *reply = ok_reply(expect);
  return Status::ok();
}

Status serve_one(Endpoint& ep, Channel& ch, const Command& cmd, Reply* reply) {
  *reply = ok_reply();
  switch (cmd.op) {
    case Op::kPostRecv:
      DEMO_TRY(in_buffer(ep, cmd.offset, cmd.len));
      return ep.post_recv(cmd.offset, cmd.len, cmd.value);
    case Op::kExpectRecv:
      return expect_recv(ep, cmd, reply);
    case Op::kCheckMem:
      DEMO_TRY(in_buffer(ep, cmd.offset, cmd.len));
      return check_pattern(ep.buffer() + cmd.offset, cmd.len, cmd.seed, guard_for(ep, cmd),
                           "server memory");
    case Op::kFill:
      DEMO_TRY(in_buffer(ep, cmd.offset, cmd.len));
      fill_pattern(ep.buffer() + cmd.offset, cmd.len, cmd.seed);
      return Status::ok();
    case Op::kSetU64:
    case Op::kGetU64: {
      DEMO_TRY(in_buffer(ep, cmd.offset, 8));
      // The word is also the target of the client's RDMA atomics: access it atomically.
      auto* word = reinterpret_cast<uint64_t*>(ep.buffer() + cmd.offset);
      if (cmd.op == Op::kSetU64) {
        __atomic_store_n(word, cmd.value, __ATOMIC_SEQ_CST);
      } else {
        reply->v1 = __atomic_load_n(word, __ATOMIC_SEQ_CST);
      }
      return Status::ok();
    }
    case Op::kPingPong:
      return ping_pong(ep, ch, reply);
    case Op::kQuit:
      return Status::ok();
  }
  return Status::fail("unknown command %u", static_cast<unsigned>(cmd.op));
}

}  // namespace

int run_server(const DemoConfig& config, int fd) {
  Channel ch(fd);
  std::unique_ptr<Endpoint> ep;
  Hello hello;
  if (Status s = Endpoint::open(config.device, config.port, config.size, &ep); !s.is_ok()) {
    hello.status = error_reply(s);
    (void)ch.send(hello);
    return 1;
  }
  hello.status = ok_reply(static_cast<uint64_t>(getpid()));
  hello.info = ep->info();
  if (!ch.send(hello).is_ok()) return 1;

  EndpointInfo peer;
  if (!ch.recv(&peer, 10'000).is_ok()) return 1;
  Status s = ep->connect(peer);
  if (!ch.send(s.is_ok() ? ok_reply() : error_reply(s)).is_ok() || !s.is_ok()) return 1;

  for (;;) {
    Command cmd;
    if (!ch.recv(&cmd, -1).is_ok()) return 1;  // the client went away
    Reply reply;
    if (cmd.op == Op::kQuit) {
      s = ep->close();
      (void)ch.send(s.is_ok() ? ok_reply() : error_reply(s));
      return s.is_ok() ? 0 : 1;
    }
    s = serve_one(*ep, ch, cmd, &reply);
    if (!ch.send(s.is_ok() ? reply : error_reply(s)).is_ok()) return 1;
  }
}

}  // namespace softverbs::demo
