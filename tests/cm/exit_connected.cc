// Connects to ADDR:PORT through the RDMA CM and exits while connected,
// without rdma_disconnect: the peer must learn it from the CM (the DREQ the
// library sends at exit), as from the kernel's CM. For tests/roce/cm.sh.
// Usage: exit_connected ADDR PORT; exit status 0 once ESTABLISHED.
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <cstdio>
#include <cstdlib>

namespace {

bool next_event(rdma_event_channel* ch, rdma_cm_event_type want) {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) return false;
  const bool ok = ev->event == want && ev->status == 0;
  if (!ok) std::fprintf(stderr, "event %s, status %d\n", rdma_event_str(ev->event), ev->status);
  rdma_ack_cm_event(ev);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
    return 2;
  }
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  if (ch == nullptr || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) return 1;
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
  if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1) return 2;
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0 ||
      !next_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED))
    return 1;
  if (rdma_resolve_route(id, 2000) != 0 || !next_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) return 1;
  ibv_qp_init_attr qa{};
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.qp_type = IBV_QPT_RC;
  if (rdma_create_qp(id, nullptr, &qa) != 0) return 1;
  rdma_conn_param p{};
  p.responder_resources = p.initiator_depth = 1;
  p.retry_count = 7;
  if (rdma_connect(id, &p) != 0 || !next_event(ch, RDMA_CM_EVENT_ESTABLISHED)) return 1;
  std::printf("connected; exiting without a disconnect\n");
  return 0;
}
