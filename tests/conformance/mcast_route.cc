// Multicast between the topology's CAs through the switches' multicast
// forwarding tables (topology_tools.sh mcast-route; src/mad/data_route.h
// route_multicast). Three commands:
//   mft LID MLID PORT...  sets MLID's entry in the switch at LID to those
//                         ports (a LID-routed SubnGet, then SubnSet, of its
//                         MulticastForwardingTable block, from softverbs0)
//   join DEV SM_LID MGID  joins DEV's port to the group ff12::MGID as a
//                         full member by an SA MCMemberRecord Set sent from
//                         softverbs0 (a proxy join: the other CAs open no
//                         MAD port); prints the MLID the SA gave
//   send FROM MLID COUNT DEV...
//                         a UD QP of device FROM sends COUNT datagrams to
//                         MLID; a UD QP of each DEV (FROM may be one of
//                         them), attached to the group, counts what it
//                         receives within a second: a line "DEV COUNT" each.
#include <infiniband/umad.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kMad = 256;
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kMulticastQpn = 0xffffff;
constexpr int kMsg = 32;

int fail(const char* what) {
  std::fprintf(stderr, "mcast_route: %s\n", what);
  return 1;
}

// One LID-routed SMP of MulticastForwardingTable (IBA 14.2.5.12) and its answer.
bool mft_smp(int fd, int agent, uint16_t lid, uint8_t method, uint32_t modifier, uint8_t* data) {
  std::vector<uint8_t> req(umad_size() + kMad), resp(umad_size() + kMad);
  auto* m = static_cast<uint8_t*>(umad_get_mad(req.data()));
  m[0] = 1;     // base version
  m[1] = 0x01;  // SubnMgmt, LID routed
  m[2] = 1;
  m[3] = method;
  m[15] = 7;  // TID
  m[16] = 0x00;
  m[17] = 0x1b;
  for (int i = 0; i < 4; ++i) m[20 + i] = static_cast<uint8_t>(modifier >> (24 - 8 * i));
  std::memcpy(m + 64, data, 64);
  umad_set_addr(req.data(), lid, 0, 0, 0);
  if (umad_send(fd, agent, req.data(), kMad, 1000, 2) != 0) return false;
  int len = kMad;
  if (umad_recv(fd, resp.data(), &len, 5000) != agent) return false;
  const auto* a = static_cast<const uint8_t*>(umad_get_mad(resp.data()));
  if (umad_status(resp.data()) != 0 || (a[4] & 0x7f) != 0 || a[5] != 0) return false;
  std::memcpy(data, a + 64, 64);
  return true;
}

int set_mft(uint16_t lid, uint16_t mlid, const std::vector<unsigned>& ports) {
  if (umad_init() != 0) return fail("umad_init");
  const int fd = umad_open_port(nullptr, 0);
  if (fd < 0) return fail("umad_open_port");
  const int agent = umad_register(fd, 0x01, 1, 0, nullptr);
  if (agent < 0) return fail("umad_register");
  const unsigned entry = mlid - 0xc000u;
  uint8_t block[64] = {};
  // Position 0 (ports 0-15) of the block of 32 MLIDs that holds the entry.
  if (!mft_smp(fd, agent, lid, 0x01, entry / 32, block)) return fail("Get(MulticastForwardingTable)");
  uint16_t mask = 0;
  for (unsigned p : ports) mask = static_cast<uint16_t>(mask | 1u << p);
  block[2 * (entry % 32)] = static_cast<uint8_t>(mask >> 8);
  block[2 * (entry % 32) + 1] = static_cast<uint8_t>(mask);
  if (!mft_smp(fd, agent, lid, 0x02, entry / 32, block)) return fail("Set(MulticastForwardingTable)");
  umad_close_port(fd);
  return 0;
}

// An SA MCMemberRecord Set (IBA 15.2.5.17) from softverbs0's port joining
// device DEV's port (its GID 0: a proxy join) to the group MGID ff12::MGID
// as a full member; prints the MLID the SA gave it.
int join(const std::string& dev_name, uint16_t sm_lid, uint16_t mgid_low) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n; ++i)
    if (dev_name == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
  ibv_gid port_gid{};
  if (ctx == nullptr || ibv_query_gid(ctx, 1, 0, &port_gid) != 0) return fail("cannot read the device's GID");
  if (umad_init() != 0) return fail("umad_init");
  const int fd = umad_open_port(nullptr, 0);
  if (fd < 0) return fail("umad_open_port");
  const int agent = umad_register(fd, 0x03, 2, 0, nullptr);
  if (agent < 0) return fail("umad_register");
  std::vector<uint8_t> req(umad_size() + kMad), resp(umad_size() + kMad);
  auto* m = static_cast<uint8_t*>(umad_get_mad(req.data()));
  m[0] = 1;
  m[1] = 0x03;
  m[2] = 2;
  m[3] = 0x02;  // Set: join
  m[15] = 9;
  m[16] = 0x00;
  m[17] = 0x38;
  // ComponentMask: MGID, PortGID, Q_Key, TClass, P_Key, SL, FlowLabel, Scope, JoinState.
  const uint64_t mask = 1u << 0 | 1u << 1 | 1u << 2 | 1u << 6 | 1u << 7 | 1u << 12 | 1u << 13 | 1u << 15 | 1u << 16;
  for (int i = 0; i < 8; ++i) m[48 + i] = static_cast<uint8_t>(mask >> (56 - 8 * i));
  uint8_t* r = m + 56;
  r[0] = 0xff;
  r[1] = 0x12;
  r[14] = static_cast<uint8_t>(mgid_low >> 8);
  r[15] = static_cast<uint8_t>(mgid_low);
  std::memcpy(r + 16, port_gid.raw, 16);
  r[32] = 0x11, r[33] = 0x11, r[34] = 0x11, r[35] = 0x11;  // Q_Key
  r[40] = 0xff, r[41] = 0xff;                              // P_Key
  r[48] = 0x21;                                            // Scope 2 (link local), JoinState FullMember
  umad_set_addr(req.data(), sm_lid, 1, 0, 0x80010000);
  if (umad_send(fd, agent, req.data(), kMad, 2000, 2) != 0) return fail("umad_send");
  int len = kMad;
  if (umad_recv(fd, resp.data(), &len, 10000) != agent) return fail("no answer from the SA");
  const auto* a = static_cast<const uint8_t*>(umad_get_mad(resp.data()));
  if (umad_status(resp.data()) != 0 || a[4] != 0 || a[5] != 0) {
    std::fprintf(stderr, "mcast_route: the SA answered status 0x%02x%02x\n", a[4], a[5]);
    return 1;
  }
  std::printf("0x%04x\n", a[56 + 36] << 8 | a[56 + 37]);
  umad_close_port(fd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}

struct Ud {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<char> buf = std::vector<char>(64 * (kMsg + 40));
};

bool open_ud(ibv_device* dev, int recvs, Ud* u) {
  u->ctx = ibv_open_device(dev);
  if (u->ctx == nullptr) return false;
  u->pd = ibv_alloc_pd(u->ctx);
  u->cq = ibv_create_cq(u->ctx, 128, nullptr, nullptr, 0);
  if (u->pd == nullptr || u->cq == nullptr) return false;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = u->cq;
  init.qp_type = IBV_QPT_UD;
  init.cap = {64, 64, 1, 1, 0};
  u->qp = ibv_create_qp(u->pd, &init);
  u->mr = ibv_reg_mr(u->pd, u->buf.data(), u->buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (u->qp == nullptr || u->mr == nullptr) return false;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = kQkey;
  if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0) return false;
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE) != 0) return false;
  a.qp_state = IBV_QPS_RTS;
  if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) return false;
  for (int i = 0; i < recvs; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(u->buf.data()) + static_cast<uintptr_t>(i) * (kMsg + 40), kMsg + 40,
                u->mr->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_recv(u->qp, &wr, &bad) != 0) return false;
  }
  return true;
}

int send(const std::string& from, uint16_t mlid, int count, const std::vector<std::string>& members) {
  if (count < 1 || count > 60) return fail("COUNT must be 1..60");
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  const auto find = [&](const std::string& name) -> ibv_device* {
    for (int i = 0; i < n; ++i)
      if (name == ibv_get_device_name(list[i])) return list[i];
    return nullptr;
  };
  ibv_gid mgid{};
  mgid.raw[0] = 0xff;
  mgid.raw[1] = 0x12;
  mgid.raw[14] = static_cast<uint8_t>(mlid >> 8);
  mgid.raw[15] = static_cast<uint8_t>(mlid);
  std::vector<Ud> rx(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    ibv_device* d = find(members[i]);
    if (d == nullptr || !open_ud(d, count, &rx[i])) return fail(("cannot open a QP on " + members[i]).c_str());
    if (ibv_attach_mcast(rx[i].qp, &mgid, mlid) != 0) return fail("ibv_attach_mcast");
  }
  Ud tx;
  ibv_device* d = find(from);
  if (d == nullptr || !open_ud(d, 0, &tx)) return fail(("cannot open a QP on " + from).c_str());
  ibv_ah_attr ah_attr{};
  ah_attr.dlid = mlid;
  ah_attr.port_num = 1;
  ibv_ah* ah = ibv_create_ah(tx.pd, &ah_attr);
  if (ah == nullptr) return fail("ibv_create_ah");
  for (int i = 0; i < count; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(tx.buf.data()), kMsg, tx.mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = kMulticastQpn;
    wr.wr.ud.remote_qkey = kQkey;
    if (ibv_post_send(tx.qp, &wr, &bad) != 0) return fail("ibv_post_send");
    ibv_wc wc{};
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int got = 0;
    while ((got = ibv_poll_cq(tx.cq, 1, &wc)) == 0 && std::chrono::steady_clock::now() < until) {
    }
    if (got != 1 || wc.status != IBV_WC_SUCCESS) return fail("the send did not complete");
  }
  std::vector<int> received(members.size(), 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < until) {
    for (size_t i = 0; i < rx.size(); ++i) {
      ibv_wc wc{};
      while (ibv_poll_cq(rx[i].cq, 1, &wc) == 1)
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV) ++received[i];
    }
  }
  for (size_t i = 0; i < members.size(); ++i) std::printf("%s %d\n", members[i].c_str(), received[i]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "mft" && argc >= 4) {
    std::vector<unsigned> ports;
    for (int i = 4; i < argc; ++i) ports.push_back(static_cast<unsigned>(std::strtoul(argv[i], nullptr, 0)) & 15);
    return set_mft(static_cast<uint16_t>(std::strtoul(argv[2], nullptr, 0)),
                   static_cast<uint16_t>(std::strtoul(argv[3], nullptr, 0)), ports);
  }
  if (cmd == "join" && argc == 5)
    return join(argv[2], static_cast<uint16_t>(std::strtoul(argv[3], nullptr, 0)),
                static_cast<uint16_t>(std::strtoul(argv[4], nullptr, 0)));
  if (cmd == "send" && argc >= 6) {
    std::vector<std::string> members(argv + 5, argv + argc);
    return send(argv[2], static_cast<uint16_t>(std::strtoul(argv[3], nullptr, 0)), std::atoi(argv[4]), members);
  }
  std::fprintf(stderr, "usage: %s mft LID MLID PORT... | send FROM MLID COUNT DEV...\n", argv[0]);
  return 2;
}
