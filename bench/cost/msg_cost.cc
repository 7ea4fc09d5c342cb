// msg_cost <write|send> <messages>: the post -> completion path of 64-byte
// messages on the host device, for counting instructions under callgrind.
//
// Two RC QPs in one process, connected to each other. On the host fabric the
// responder runs inside the poster's transmit, so one process executes the
// whole path: ibv_post_send, the responder's placement (and, for SEND, the
// receive WQE and its completion), the ACK, and ibv_poll_cq. bench/run.py
// runs this twice with different message counts and divides the difference in
// instructions by the difference in messages, which cancels setup and teardown
// and leaves a figure that does not depend on the machine's load.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "../common/rc_connect.h"

namespace {

[[noreturn]] void die(const char* what) { svbench::die_errno("msg_cost", what); }

// Polls until `want` successful completions have arrived.
void reap(ibv_cq* cq, int want) {
  ibv_wc wc[2];
  while (want > 0) {
    const int got = ibv_poll_cq(cq, want, wc);
    if (got < 0) die("ibv_poll_cq");
    for (int i = 0; i < got; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "msg_cost: completion failed: %s\n", ibv_wc_status_str(wc[i].status));
        std::exit(1);
      }
    }
    want -= got;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: msg_cost <write|send> <messages>\n");
    return 2;
  }
  const std::string_view op = argv[1];
  if (op != "write" && op != "send") {
    std::fprintf(stderr, "msg_cost: unknown operation '%s'\n", argv[1]);
    return 2;
  }
  const long messages = std::atol(argv[2]);
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr || count == 0) die("no device");
  ibv_context* ctx = ibv_open_device(list[0]);
  if (ctx == nullptr) die("ibv_open_device");
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port) != 0) die("ibv_query_port");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  if (pd == nullptr || cq == nullptr) die("pd/cq");
  static uint8_t buf[4096];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) die("ibv_reg_mr");

  ibv_qp* qp[2];
  for (ibv_qp*& q : qp) {
    q = svbench::create_rc_or_die("msg_cost", pd, cq);
    svbench::to_init("msg_cost", q);
  }
  svbench::to_rts("msg_cost", qp[0], qp[1]->qp_num, port, ctx);
  svbench::to_rts("msg_cost", qp[1], qp[0]->qp_num, port, ctx);

  ibv_sge src{reinterpret_cast<uint64_t>(buf), 64, mr->lkey};
  ibv_sge dst{reinterpret_cast<uint64_t>(buf) + 2048, 64, mr->lkey};
  for (long k = 0; k < messages; ++k) {
    if (op == "send") {
      ibv_recv_wr rwr{};
      rwr.wr_id = k;
      rwr.sg_list = &dst;
      rwr.num_sge = 1;
      ibv_recv_wr* bad_recv = nullptr;
      if (ibv_post_recv(qp[1], &rwr, &bad_recv) != 0) die("ibv_post_recv");
    }
    ibv_send_wr wr{};
    wr.wr_id = k;
    wr.opcode = op == "send" ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &src;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = dst.addr;
    wr.wr.rdma.rkey = mr->rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp[0], &wr, &bad) != 0) die("ibv_post_send");
    reap(cq, op == "send" ? 2 : 1);
  }
  std::printf("metric messages %ld\n", messages);
  for (ibv_qp* q : qp) ibv_destroy_qp(q);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
