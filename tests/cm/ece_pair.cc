// Both sides of an ECE exchange (rdma_set_local_ece(3)'s flow, QPs made
// outside the CM) between two hosts, for tests/roce/cm.sh: the client
// offers vendor ID 0x0002c9 with options 0x80000007 in its REQ, the server
// must read exactly that and accepts 0x80000005, which the client must read
// from the REP. Each side prints what it read and exits 0 only if it is
// what the other side sent.
// Usage: ece_pair server ADDR PORT | ece_pair client ADDR PORT
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr uint32_t kVendor = 0x0002c9;
constexpr uint32_t kOffered = 0x80000007;
constexpr uint32_t kAccepted = 0x80000005;

rdma_cm_event* next_event(rdma_event_channel* ch, rdma_cm_event_type want) {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) return nullptr;
  if (ev->event == want && ev->status == 0) return ev;
  std::fprintf(stderr, "event %s, status %d (want %s)\n", rdma_event_str(ev->event), ev->status,
               rdma_event_str(want));
  rdma_ack_cm_event(ev);
  return nullptr;
}

bool expect(rdma_event_channel* ch, rdma_cm_event_type want) {
  rdma_cm_event* ev = next_event(ch, want);
  if (ev != nullptr) rdma_ack_cm_event(ev);
  return ev != nullptr;
}

// A QP the CM does not manage, left in RESET: only its number travels.
ibv_qp* external_qp(rdma_cm_id* id) {
  ibv_cq* cq = ibv_create_cq(id->verbs, 4, nullptr, nullptr, 0);
  if (cq == nullptr) return nullptr;
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.qp_type = IBV_QPT_RC;
  return ibv_create_qp(id->pd, &qa);
}

bool read_remote(rdma_cm_id* id, uint32_t want_options) {
  ibv_ece ece{};
  if (rdma_get_remote_ece(id, &ece) != 0) {
    std::perror("rdma_get_remote_ece");
    return false;
  }
  std::printf("remote ece: vendor 0x%06x options 0x%08x\n", ece.vendor_id, ece.options);
  return ece.vendor_id == kVendor && ece.options == want_options;
}

int server(rdma_event_channel* ch, rdma_cm_id* listener, sockaddr* addr) {
  if (rdma_bind_addr(listener, addr) != 0 || rdma_listen(listener, 1) != 0) return 1;
  std::printf("listening\n");
  std::fflush(stdout);
  rdma_cm_event* ev = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  if (ev == nullptr) return 1;
  rdma_cm_id* id = ev->id;
  rdma_ack_cm_event(ev);
  if (!read_remote(id, kOffered)) return 1;
  ibv_qp* qp = external_qp(id);
  ibv_ece mine{kVendor, kAccepted, 0};
  if (qp == nullptr || rdma_set_local_ece(id, &mine) != 0) return 1;
  rdma_conn_param p{};
  p.qp_num = qp->qp_num;
  if (rdma_accept(id, &p) != 0 || !expect(ch, RDMA_CM_EVENT_ESTABLISHED)) return 1;
  if (!expect(ch, RDMA_CM_EVENT_DISCONNECTED)) return 1;
  std::printf("server: ece negotiated\n");
  return 0;
}

int client(rdma_event_channel* ch, rdma_cm_id* id, sockaddr* dst) {
  if (rdma_resolve_addr(id, nullptr, dst, 2000) != 0 || !expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED)) return 1;
  if (rdma_resolve_route(id, 2000) != 0 || !expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) return 1;
  ibv_qp* qp = external_qp(id);
  ibv_ece mine{kVendor, kOffered, 0};
  if (qp == nullptr || rdma_set_local_ece(id, &mine) != 0) return 1;
  rdma_conn_param p{};
  p.qp_num = qp->qp_num;
  if (rdma_connect(id, &p) != 0) return 1;
  rdma_cm_event* ev = next_event(ch, RDMA_CM_EVENT_CONNECT_RESPONSE);
  if (ev == nullptr) return 1;
  rdma_ack_cm_event(ev);
  if (!read_remote(id, kAccepted)) return 1;
  if (rdma_establish(id) != 0 || rdma_disconnect(id) != 0 || !expect(ch, RDMA_CM_EVENT_DISCONNECTED)) return 1;
  std::printf("client: ece negotiated\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::strcmp(argv[1], "server") != 0 && std::strcmp(argv[1], "client") != 0)) {
    std::fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
    return 2;
  }
  alarm(30);  // bounded, whatever the peer does
  sockaddr_storage ss{};
  const auto port = htons(static_cast<uint16_t>(std::atoi(argv[3])));
  auto* in4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, argv[2], &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = port;
  } else if (inet_pton(AF_INET6, argv[2], &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = port;
  } else {
    return 2;
  }
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  if (ch == nullptr || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) return 1;
  auto* addr = reinterpret_cast<sockaddr*>(&ss);
  return argv[1][0] == 's' ? server(ch, id, addr) : client(ch, id, addr);
}
