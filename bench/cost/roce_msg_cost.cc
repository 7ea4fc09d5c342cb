// roce_msg_cost: the post -> completion path of RDMA WRITEs on the RoCE
// device (softverbs_roce0), requester and responder in two processes, for
// counting instructions under callgrind, one callgrind per process.
//
//   roce_msg_cost responder <addr> <tcp-port>
//   roce_msg_cost requester <addr> <tcp-port> <messages> [bytes]
//
// Each process is a RoCE host of its own (SOFTVERBS_ROCE_ADDR, a segment of
// its own), as the roce-* integration tests run on 127.0.0.<n>. The
// responder listens on <addr>:<tcp-port> (its RoCE address) for the
// requester, which sends its QPN and GID and gets the responder's, plus the
// target buffer. The requester then posts one signalled WRITE at a time and
// waits for its completion through a completion channel, asleep: a polling
// loop would add instructions for every empty poll, as many as the wait is
// long, and the figure would depend on the machine's speed. So the figure is
// that of an event-driven requester: it includes the CQ event (arming, the
// receive thread's notification, the wake-up's read) besides the path a
// polling one takes. It then tells
// the responder it is done (the responder sleeps in read until then), and
// both tear down. bench/run.py runs the pair twice with different message
// counts and divides each process's difference in instructions by the
// difference in messages, which cancels setup and teardown.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "../common/rc_connect.h"

namespace {

constexpr const char* kTool = "roce_msg_cost";

[[noreturn]] void die(const char* what) { svbench::die_errno(kTool, what); }

// What each end tells the other before the QPs leave INIT.
struct Hello {
  uint32_t qpn;
  ibv_gid gid;
  uint64_t addr;  // responder: where the WRITEs go
  uint32_t rkey;
};

void write_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = write(fd, b, n);
    if (k <= 0) die("write to the peer");
    b += k;
    n -= size_t(k);
  }
}

void read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = read(fd, b, n);
    if (k <= 0) die("read from the peer");
    b += k;
    n -= size_t(k);
  }
}

sockaddr_in address(const char* addr, const char* port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(std::atoi(port)));
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
    std::fprintf(stderr, "%s: not an IPv4 address: %s\n", kTool, addr);
    std::exit(2);
  }
  return sa;
}

int accept_one(const sockaddr_in& sa) {
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) die("bind");
  if (listen(ls, 1) != 0) die("listen");
  const int fd = accept(ls, nullptr, nullptr);
  if (fd < 0) die("accept");
  close(ls);
  return fd;
}

int connect_retrying(const sockaddr_in& sa) {
  for (int attempt = 0;; ++attempt) {  // the responder may not listen yet
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) return fd;
    close(fd);
    if (attempt == 3000) die("connect");  // 30 s: the responder may run under callgrind
    usleep(10000);
  }
}

// Waits asleep for the one completion of `cq` that the caller asked to be
// told of (ibv_req_notify_cq before the post, so that the event cannot be
// missed and no poll finds the CQ empty: an empty poll on this device tries
// to receive, as many times as the wait is long), and checks it.
void wait_one(ibv_comp_channel* channel, ibv_cq* cq) {
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) != 0) die("ibv_get_cq_event");
  ibv_ack_cq_events(ev_cq, 1);
  ibv_wc wc{};
  const int got = ibv_poll_cq(cq, 1, &wc);
  if (got != 1) {
    std::fprintf(stderr, "%s: an event but no completion (ibv_poll_cq: %d)\n", kTool, got);
    std::exit(1);
  }
  if (wc.status != IBV_WC_SUCCESS) {
    std::fprintf(stderr, "%s: completion failed: %s\n", kTool, ibv_wc_status_str(wc.status));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool requester = argc >= 5 && std::string_view(argv[1]) == "requester";
  if (!requester && !(argc == 4 && std::string_view(argv[1]) == "responder")) {
    std::fprintf(stderr,
                 "usage: %s responder <addr> <tcp-port>\n"
                 "       %s requester <addr> <tcp-port> <messages> [bytes]\n",
                 kTool, kTool);
    return 2;
  }
  const sockaddr_in sa = address(argv[2], argv[3]);
  const long messages = requester ? std::atol(argv[4]) : 0;
  const size_t bytes = requester && argc > 5 ? std::strtoull(argv[5], nullptr, 0) : 4096;
  if (bytes == 0 || bytes > (1u << 20)) {
    std::fprintf(stderr, "%s: bytes must be 1 .. 1048576\n", kTool);
    return 2;
  }

  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  ibv_device* dev = nullptr;
  for (int i = 0; i < count; ++i)
    if (std::string_view(ibv_get_device_name(list[i])) == "softverbs_roce0") dev = list[i];
  if (dev == nullptr) {
    std::fprintf(stderr, "%s: no softverbs_roce0 (set SOFTVERBS_ROCE_ADDR)\n", kTool);
    return 1;
  }
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) die("ibv_open_device");
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port) != 0) die("ibv_query_port");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_comp_channel* channel = ibv_create_comp_channel(ctx);
  if (pd == nullptr || channel == nullptr) die("pd/channel");
  ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, channel, 0);
  if (cq == nullptr) die("ibv_create_cq");
  std::vector<uint8_t> buf(bytes, 0x5a);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) die("ibv_reg_mr");
  ibv_qp* qp = svbench::create_rc_or_die(kTool, pd, cq);
  svbench::to_init(kTool, qp);

  Hello mine{qp->qp_num, {}, reinterpret_cast<uint64_t>(buf.data()), mr->rkey};
  if (ibv_query_gid(ctx, 1, 0, &mine.gid) != 0) die("ibv_query_gid");
  const int peer = requester ? connect_retrying(sa) : accept_one(sa);
  Hello theirs{};
  write_all(peer, &mine, sizeof mine);
  read_all(peer, &theirs, sizeof theirs);
  svbench::to_rts(kTool, qp, theirs.qpn, port, ctx, &theirs.gid);
  // Both ends are at RTS before the first WRITE leaves.
  char ready = 1;
  write_all(peer, &ready, 1);
  read_all(peer, &ready, 1);

  if (requester) {
    ibv_sge sge{reinterpret_cast<uint64_t>(buf.data()), uint32_t(bytes), mr->lkey};
    for (long k = 0; k < messages; ++k) {
      ibv_send_wr wr{};
      wr.wr_id = uint64_t(k);
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = theirs.addr;
      wr.wr.rdma.rkey = theirs.rkey;
      ibv_send_wr* bad = nullptr;
      if (ibv_req_notify_cq(cq, 0) != 0) die("ibv_req_notify_cq");
      if (ibv_post_send(qp, &wr, &bad) != 0) die("ibv_post_send");
      wait_one(channel, cq);
    }
    std::printf("metric messages %ld\n", messages);
  }
  char done = 1;
  write_all(peer, &done, 1);  // the responder's last read returns
  read_all(peer, &done, 1);
  close(peer);
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_destroy_comp_channel(channel);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
