// rc_stress: many mixed RC operations between two processes (two network
// namespaces in the tests), each one verified, to show that RC delivers
// exactly once, in order and intact over a network that loses, duplicates,
// reorders and corrupts (SOFTVERBS_FAULTS).
//
//   rc_stress --server --port P [--ops N]            (prints nothing until done)
//   rc_stress --connect ADDR --port P [--ops N] [--seed S] [--timeout T]
//   rc_stress --connect ADDR --port P --dead-peer    (the server is gone: expect RETRY_EXC_ERR)
//
// Written against <infiniband/verbs.h> only. The client drives:
//   SEND     numbered messages of 1 B .. 5 KiB (several packets), which the
//            server checks arrive each once, in order, with their bytes;
//   WRITE    patterns into slots of the server's memory, read back later;
//   READ     from a pattern area, or back from a slot just written (a READ
//            after a WRITE on one QP sees it); a WRITE to a slot that a READ
//            still in flight reads is fenced (IBA 10.8.3.3: unfenced, it may
//            overtake the READ's retried execution);
//   FETCH_ADD +1 on a counter: each must return the number of earlier ones
//            (executed once each, in order);
//   CMP_SWAP on a word whose value the client knows: each must succeed.
// Completions must come in posting order with IBV_WC_SUCCESS.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kMaxSend = 5000;
constexpr uint32_t kSlots = 64;
constexpr uint32_t kSlotBytes = 8192;
constexpr uint32_t kPatternBytes = 65536;
constexpr uint32_t kRecvDepth = 64;
constexpr uint32_t kDepth = 16;  // WRs the client keeps outstanding
constexpr uint32_t kDoneMagic = 0xd0d0d0d0;

// Server memory: counter | cas word | pattern area | write slots.
constexpr size_t kCounterOff = 0;
constexpr size_t kCasOff = 8;
constexpr size_t kPatternOff = 64;
constexpr size_t kSlotsOff = kPatternOff + kPatternBytes;
constexpr size_t kServerBytes = kSlotsOff + size_t{kSlots} * kSlotBytes;

[[noreturn]] void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "rc_stress: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::exit(1);
}

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint8_t pattern_byte(uint64_t key, size_t i) { return static_cast<uint8_t>(mix(key * 8191 + i / 8) >> (8 * (i % 8))); }
void fill(uint8_t* p, size_t n, uint64_t key) {
  for (size_t i = 0; i < n; ++i) p[i] = pattern_byte(key, i);
}
bool matches(const uint8_t* p, size_t n, uint64_t key, size_t* bad) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != pattern_byte(key, i)) {
      *bad = i;
      return false;
    }
  return true;
}

struct Wire {  // what the two ends exchange over TCP, network order not needed (same host)
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16];
  uint32_t rkey;
  uint64_t addr;
};

void write_all(int fd, const void* p, size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = write(fd, c, n);
    if (k <= 0) die("tcp write: %s", std::strerror(errno));
    c += k;
    n -= static_cast<size_t>(k);
  }
}
bool read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = read(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

int tcp_listen_accept(uint16_t port) {
  const int s = socket(AF_INET6, SOCK_STREAM, 0);
  const int on = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_any;
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(s, 1) != 0)
    die("tcp listen on %u: %s", port, std::strerror(errno));
  const int c = accept(s, nullptr, nullptr);
  if (c < 0) die("accept: %s", std::strerror(errno));
  close(s);
  return c;
}

int tcp_connect(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) die("cannot resolve %s", host.c_str());
  for (int attempt = 0; attempt < 100; ++attempt) {  // the server may not listen yet
    const int s = socket(res->ai_family, SOCK_STREAM, 0);
    if (connect(s, res->ai_addr, res->ai_addrlen) == 0) {
      freeaddrinfo(res);
      return s;
    }
    close(s);
    usleep(100'000);
  }
  die("cannot connect to %s:%u", host.c_str(), port);
}

struct Verbs {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_gid gid{};
  uint8_t port = 1;
  ibv_mtu mtu = IBV_MTU_1024;

  void open(uint32_t send_depth) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr || n == 0) die("no RDMA device");
    ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (ctx == nullptr) die("ibv_open_device: %s", std::strerror(errno));
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, port, &pa) != 0) die("ibv_query_port");
    mtu = pa.active_mtu;
    if (ibv_query_gid(ctx, port, 0, &gid) != 0) die("ibv_query_gid");
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 2 * (send_depth + kRecvDepth), nullptr, nullptr, 0);
    if (pd == nullptr || cq == nullptr) die("pd/cq: %s", std::strerror(errno));
    ibv_qp_init_attr ia{};
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = send_depth;
    ia.cap.max_recv_wr = kRecvDepth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    qp = ibv_create_qp(pd, &ia);
    if (qp == nullptr) die("ibv_create_qp: %s", std::strerror(errno));
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
      die("INIT: %s", std::strerror(errno));
  }

  void connect(const Wire& me, const Wire& peer, uint8_t timeout) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = port;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
      die("RTR: %s", std::strerror(errno));
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = me.psn;
    a.timeout = timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_MAX_QP_RD_ATOMIC) != 0)
      die("RTS: %s", std::strerror(errno));
  }

  ibv_wc poll_one(int seconds) {
    ibv_wc wc{};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (;;) {
      const int n = ibv_poll_cq(cq, 1, &wc);
      if (n < 0) die("ibv_poll_cq failed");
      if (n == 1) return wc;
      if (std::chrono::steady_clock::now() > deadline) die("no completion for %d s", seconds);
    }
  }
};

Wire local_wire(const Verbs& v, uint32_t psn, ibv_mr* mr) {
  Wire w{};
  w.qpn = v.qp->qp_num;
  w.psn = psn;
  std::memcpy(w.gid, v.gid.raw, 16);
  w.rkey = mr != nullptr ? mr->rkey : 0;
  w.addr = mr != nullptr ? reinterpret_cast<uint64_t>(mr->addr) : 0;
  return w;
}

struct Totals {
  uint64_t sends = 0;
  uint64_t fetch_adds = 0;
  uint64_t cas_value = 0;
};

int run_server(uint16_t port) {
  Verbs v;
  v.open(4);
  std::vector<uint8_t> mem(kServerBytes, 0);
  fill(mem.data() + kPatternOff, kPatternBytes, 0x5eed);
  std::vector<uint8_t> recv(size_t{kRecvDepth} * kMaxSend);
  ibv_mr* mr = ibv_reg_mr(v.pd, mem.data(), mem.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                              IBV_ACCESS_REMOTE_ATOMIC);
  ibv_mr* rmr = ibv_reg_mr(v.pd, recv.data(), recv.size(), IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr || rmr == nullptr) die("reg_mr: %s", std::strerror(errno));
  auto post_recv = [&](uint32_t i) {
    ibv_sge sge{reinterpret_cast<uint64_t>(recv.data() + size_t{i} * kMaxSend), kMaxSend, rmr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(v.qp, &wr, &bad) != 0) die("post_recv");
  };
  for (uint32_t i = 0; i < kRecvDepth; ++i) post_recv(i);

  const int tcp = tcp_listen_accept(port);
  Wire peer{};
  if (!read_all(tcp, &peer, sizeof peer)) die("no peer");
  const Wire me = local_wire(v, 0x123456, mr);
  write_all(tcp, &me, sizeof me);
  v.connect(me, peer, 14);
  if (peer.qpn == 0) return 0;  // --dead-peer: we leave at once

  uint64_t expect_seq = 0;
  for (;;) {
    const ibv_wc wc = v.poll_one(120);
    if (wc.status != IBV_WC_SUCCESS) die("server: completion %s", ibv_wc_status_str(wc.status));
    if (wc.opcode != IBV_WC_RECV) die("server: unexpected opcode %d", wc.opcode);
    const uint8_t* m = recv.data() + wc.wr_id * kMaxSend;
    uint32_t head[2];
    if (wc.byte_len < 8) die("server: a %u-byte SEND", wc.byte_len);
    std::memcpy(head, m, 8);
    if (head[1] == kDoneMagic) {
      Totals t{};
      if (wc.byte_len < 8 + sizeof t) die("server: short done message");
      std::memcpy(&t, m + 8, sizeof t);
      if (t.sends != expect_seq) die("server: %llu SENDs arrived, the client sent %llu",
                                     static_cast<unsigned long long>(expect_seq), static_cast<unsigned long long>(t.sends));
      uint64_t counter = 0;
      uint64_t cas = 0;
      std::memcpy(&counter, mem.data() + kCounterOff, 8);
      std::memcpy(&cas, mem.data() + kCasOff, 8);
      if (counter != t.fetch_adds) die("server: counter %llu after %llu FETCH_ADDs",
                                       static_cast<unsigned long long>(counter), static_cast<unsigned long long>(t.fetch_adds));
      if (cas != t.cas_value) die("server: CMP_SWAP word %llu, expected %llu", static_cast<unsigned long long>(cas),
                                  static_cast<unsigned long long>(t.cas_value));
      const char ok = 'k';
      write_all(tcp, &ok, 1);
      // Stay until the client has its last completion: our ACK of the last
      // SEND may be lost, and only we can answer its retry.
      char bye = 0;
      (void)read_all(tcp, &bye, 1);
      std::printf("server: %llu SENDs in order, counter %llu, cas %llu: OK\n", static_cast<unsigned long long>(expect_seq),
                  static_cast<unsigned long long>(counter), static_cast<unsigned long long>(cas));
      return 0;
    }
    if (head[0] != static_cast<uint32_t>(expect_seq))
      die("server: SEND #%u arrived where #%llu was due", head[0], static_cast<unsigned long long>(expect_seq));
    if (head[1] != wc.byte_len) die("server: SEND #%u is %u bytes, sent as %u", head[0], wc.byte_len, head[1]);
    size_t bad = 0;
    if (!matches(m + 8, wc.byte_len - 8, 0x10000000 + expect_seq, &bad))
      die("server: SEND #%u byte %zu differs", head[0], bad + 8);
    ++expect_seq;
    post_recv(static_cast<uint32_t>(wc.wr_id));
  }
}

enum class Op { kSend, kWrite, kRead, kReadBack, kFetchAdd, kCmpSwap };

struct Pending {
  uint64_t index = 0;
  Op op = Op::kSend;
  uint32_t length = 0;
  uint64_t key = 0;       // pattern of the data read
  uint64_t expected = 0;  // atomics: the original value due
};

int run_client(const std::string& host, uint16_t port, uint64_t ops, uint64_t seed, uint8_t timeout, bool dead_peer) {
  Verbs v;
  v.open(kDepth + 1);
  // One buffer per outstanding WR.
  std::vector<uint8_t> local(size_t{kDepth} * kSlotBytes);
  ibv_mr* mr = ibv_reg_mr(v.pd, local.data(), local.size(), IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr) die("reg_mr: %s", std::strerror(errno));
  const int tcp = tcp_connect(host, port);
  const Wire me = local_wire(v, 0x654321, nullptr);
  Wire sent = me;
  if (dead_peer) sent.qpn = 0;  // tells the server to leave
  write_all(tcp, &sent, sizeof sent);
  Wire peer{};
  if (!read_all(tcp, &peer, sizeof peer)) die("no server");
  v.connect(me, peer, timeout);

  if (dead_peer) {
    char c;
    while (read(tcp, &c, 1) > 0) {
    }  // the server has exited
    usleep(200'000);
    ibv_sge sge{reinterpret_cast<uint64_t>(local.data()), 64, mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    ibv_send_wr* bad = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    if (ibv_post_send(v.qp, &wr, &bad) != 0) die("post_send");
    const ibv_wc wc = v.poll_one(60);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // IBA: retry_cnt (7) retries, each after the local ACK timeout 4.096 us * 2^timeout.
    const double bound = 8 * 4.096e-6 * static_cast<double>(1u << timeout);
    std::printf("client: dead peer: %s after %.3f s (8 ACK timeouts: %.3f s)\n", ibv_wc_status_str(wc.status), s, bound);
    if (wc.status != IBV_WC_RETRY_EXC_ERR) die("expected IBV_WC_RETRY_EXC_ERR");
    if (s > 2 * bound + 0.5) die("RETRY_EXC_ERR came late");
    return 0;
  }

  Pending pending[kDepth];
  uint64_t posted = 0;
  uint64_t completed = 0;
  Totals t{};
  uint64_t written_key[kSlots] = {};
  uint32_t written_len[kSlots] = {};
  uint64_t read_back_of[kSlots] = {};  // the slot's latest READ-back, plus one
  uint64_t counts[6] = {};
  const auto t0 = std::chrono::steady_clock::now();

  auto post = [&](uint64_t i) {
    const uint64_t r = mix(seed ^ (i * 0x100000001b3ull));
    uint8_t* buf = local.data() + (i % kDepth) * kSlotBytes;
    Pending& p = pending[i % kDepth];
    p = {};
    p.index = i;
    ibv_sge sge{reinterpret_cast<uint64_t>(buf), 0, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = i;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const uint32_t pick = static_cast<uint32_t>(r % 100);
    const uint32_t slot = static_cast<uint32_t>((r >> 8) % kSlots);
    p.op = pick < 30 ? Op::kSend : pick < 50 ? Op::kWrite : pick < 62 ? Op::kRead : pick < 70 ? Op::kReadBack
                                : pick < 88 ? Op::kFetchAdd : Op::kCmpSwap;
    if (p.op == Op::kReadBack && written_len[slot] == 0) p.op = Op::kWrite;
    ++counts[static_cast<int>(p.op)];
    switch (p.op) {
      case Op::kSend: {
        p.length = 8 + static_cast<uint32_t>((r >> 16) % (kMaxSend - 8));
        const uint32_t head[2] = {static_cast<uint32_t>(t.sends), p.length};
        std::memcpy(buf, head, 8);
        fill(buf + 8, p.length - 8, 0x10000000 + t.sends);
        ++t.sends;
        wr.opcode = IBV_WR_SEND;
        break;
      }
      case Op::kWrite:
        p.length = 1 + static_cast<uint32_t>((r >> 16) % kSlotBytes);
        p.key = 0x20000000 + i;
        fill(buf, p.length, p.key);
        written_key[slot] = p.key;
        written_len[slot] = p.length;
        if (read_back_of[slot] > completed) wr.send_flags |= IBV_SEND_FENCE;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = peer.addr + kSlotsOff + size_t{slot} * kSlotBytes;
        wr.wr.rdma.rkey = peer.rkey;
        break;
      case Op::kRead: {
        p.length = 1 + static_cast<uint32_t>((r >> 16) % kSlotBytes);
        const uint32_t off = static_cast<uint32_t>((r >> 32) % (kPatternBytes - p.length));
        // The pattern area's bytes from `off`: checked against a copy made here.
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = peer.addr + kPatternOff + off;
        wr.wr.rdma.rkey = peer.rkey;
        p.key = off;  // kRead: the offset
        break;
      }
      case Op::kReadBack:
        p.length = written_len[slot];
        p.key = written_key[slot];
        read_back_of[slot] = i + 1;
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = peer.addr + kSlotsOff + size_t{slot} * kSlotBytes;
        wr.wr.rdma.rkey = peer.rkey;
        break;
      case Op::kFetchAdd:
        p.length = 8;
        p.expected = t.fetch_adds++;
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = peer.addr + kCounterOff;
        wr.wr.atomic.rkey = peer.rkey;
        wr.wr.atomic.compare_add = 1;
        break;
      case Op::kCmpSwap:
        p.length = 8;
        p.expected = t.cas_value;
        wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        wr.wr.atomic.remote_addr = peer.addr + kCasOff;
        wr.wr.atomic.rkey = peer.rkey;
        wr.wr.atomic.compare_add = t.cas_value;
        wr.wr.atomic.swap = i + 1;
        t.cas_value = i + 1;
        break;
    }
    sge.length = p.length;
    if (p.op == Op::kRead || p.op == Op::kReadBack || p.op == Op::kFetchAdd || p.op == Op::kCmpSwap)
      std::memset(buf, 0xee, p.length);
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(v.qp, &wr, &bad) != 0) die("post_send #%llu: %s", static_cast<unsigned long long>(i), std::strerror(errno));
  };

  std::vector<uint8_t> pattern(kPatternBytes);
  fill(pattern.data(), kPatternBytes, 0x5eed);
  auto check = [&](const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS)
      die("WR #%llu failed: %s (vendor_err %u)", static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status),
          wc.vendor_err);
    if (wc.wr_id != completed)
      die("completion of WR #%llu where #%llu was due", static_cast<unsigned long long>(wc.wr_id),
          static_cast<unsigned long long>(completed));
    const Pending& p = pending[completed % kDepth];
    const uint8_t* buf = local.data() + (completed % kDepth) * kSlotBytes;
    size_t bad = 0;
    uint64_t got = 0;
    switch (p.op) {
      case Op::kRead:
        if (std::memcmp(buf, pattern.data() + p.key, p.length) != 0) die("READ #%llu: wrong data", static_cast<unsigned long long>(p.index));
        break;
      case Op::kReadBack:
        if (!matches(buf, p.length, p.key, &bad))
          die("READ-back #%llu: byte %zu is not what the WRITE before it left", static_cast<unsigned long long>(p.index), bad);
        break;
      case Op::kFetchAdd:
      case Op::kCmpSwap:
        std::memcpy(&got, buf, 8);
        if (got != p.expected)
          die("%s #%llu returned %llu, expected %llu (executed twice, or out of order?)",
              p.op == Op::kFetchAdd ? "FETCH_ADD" : "CMP_SWAP", static_cast<unsigned long long>(p.index),
              static_cast<unsigned long long>(got), static_cast<unsigned long long>(p.expected));
        break;
      default:
        break;
    }
    ++completed;
  };

  while (completed < ops) {
    while (posted < ops && posted - completed < kDepth) post(posted++);
    check(v.poll_one(120));
  }
  // The totals, in a last SEND the server checks them against.
  uint8_t* buf = local.data();
  const uint32_t head[2] = {0, kDoneMagic};
  std::memcpy(buf, head, 8);
  std::memcpy(buf + 8, &t, sizeof t);
  ibv_sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(8 + sizeof t), mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = completed;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  pending[completed % kDepth] = {};
  if (ibv_post_send(v.qp, &wr, &bad) != 0) die("post_send done");
  check(v.poll_one(120));
  char ok = 0;
  if (!read_all(tcp, &ok, 1) || ok != 'k') die("the server found something wrong");
  write_all(tcp, &ok, 1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("client: %llu operations verified in %.2f s: %llu SEND, %llu WRITE, %llu READ, %llu READ-back, "
              "%llu FETCH_ADD, %llu CMP_SWAP\n",
              static_cast<unsigned long long>(ops), s, static_cast<unsigned long long>(counts[0]),
              static_cast<unsigned long long>(counts[1]), static_cast<unsigned long long>(counts[2]),
              static_cast<unsigned long long>(counts[3]), static_cast<unsigned long long>(counts[4]),
              static_cast<unsigned long long>(counts[5]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rc_stress: mixed RC operations, every one verified"};
  bool server = false;
  bool dead_peer = false;
  std::string host;
  uint16_t port = 18515;
  uint64_t ops = 10000;
  uint64_t seed = 1;
  unsigned timeout = 12;
  app.add_flag("--server", server, "wait for a client");
  app.add_option("--connect", host, "the server's address");
  app.add_option("--port", port, "TCP port for the exchange of QP numbers");
  app.add_option("--ops", ops, "operations to run");
  app.add_option("--seed", seed, "which operations, of what sizes");
  app.add_option("--timeout", timeout, "local ACK timeout exponent (4.096 us * 2^T)")->check(CLI::Range(1, 31));
  app.add_flag("--dead-peer", dead_peer, "the server leaves after connecting; expect RETRY_EXC_ERR");
  CLI11_PARSE(app, argc, argv);
  if (server == !host.empty()) {
    std::fprintf(stderr, "rc_stress: give either --server or --connect\n");
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return server ? run_server(port) : run_client(host, port, ops, seed, static_cast<uint8_t>(timeout), dead_peer);
}
