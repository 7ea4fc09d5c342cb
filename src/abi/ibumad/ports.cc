// Open ports, agents, and MADs to and from them.
//
// An open port is a SOCK_SEQPACKET socket pair: the fd umad_open_port
// returns is one end, so poll/epoll/read on it behave as on the kernel's
// umad device: readable while MADs are queued, a blocking read returns one
// whole ib_user_mad. (A pipe would do the same, but a write after the
// program closed its end would raise SIGPIPE; send() can refuse quietly.)
// umad_send answers a MAD for this port's own agents at once, in the
// caller's thread (mad/agent.h). A request for a class no agent in the
// device answers (the SA above all), or an SMInfo, goes to the process that
// registered an agent for it (user_agents.h), with the sending agent named
// in the TID's upper 32 bits; the answer comes back by them and ends the
// request's wait. A MAD that gets no answer (another port, a directed route
// out of the port, a class nobody registered, a path off the topology's
// fabric, an SMP that VL15's buffer had no room for, a registrant that
// died) comes back after timeout_ms x (retries + 1) with status ETIMEDOUT,
// queued by one timer thread per process. An SA multicast leave whose
// JoinState bits other processes of the port still hold is answered here
// (sa_joins.h).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "abi/ibumad/open_port.h"
#include "abi/ibumad/sa_joins.h"
#include "abi/ibumad/timeouts.h"
#include "abi/ibumad/umad_abi.h"
#include "abi/ibumad/user_agents.h"
#include "mad/agent.h"
#include "mad/mad_layout.h"
#include "mad/notice.h"
#include "mad/rmpp.h"
#include "mad/sa_mcmember.h"
#include "mad/user_agent.h"
#include "shm/port_pkeys.h"
#include "verbs/device_attrs.h"

namespace softverbs::umad {
namespace {

// MADs a port holds before it drops more, as a full receive queue would
// (the kernel caps it at net.core.wmem_max).
constexpr int kQueueBytes = 1 << 20;

std::chrono::steady_clock::time_point due(int timeout_ms, int retries) {
  return std::chrono::steady_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(timeout_ms) * (std::max(retries, 0) + 1));
}

// Whether a LID-routed MAD's destination is this port.
bool for_this_port(const ib_mad_addr_t& addr) {
  const shm::Segment* seg = segment();
  if (seg == nullptr) return false;
  ibv_port_attr a;
  verbs::fill_port_attr(*seg, &a);
  const uint16_t dlid = be16toh(addr.lid);
  if (dlid == mad::kPermissiveLid) return true;
  // An Ethernet port has no LID: a GMP for LID 0 (what perfquery resolves
  // the local port to) is for its own agents, as a RoCE NIC answers its PMA.
  if (a.link_layer == IBV_LINK_LAYER_ETHERNET) return dlid == 0;
  const uint32_t span = 1u << a.lmc;
  return a.lid != 0 && dlid >= a.lid && dlid < a.lid + span;
}

// Whether a request reaches this port's agents: a directed route of no
// hops, or a LID of the port.
bool reaches_this_port(const ib_mad_addr_t& addr, const uint8_t* mad) {
  if (mad::MgmtClass::get(mad) == static_cast<uint8_t>(mad::MgmtClassId::kSubnDirectedRoute))
    return mad::DrHopCount::get(mad) == 0;
  return for_this_port(addr);
}

// The header a MAD arrives with from another agent of this port: the
// source is the port itself (QP1, or QP0 for an SMP).
void fill_arrival(ib_user_mad* u, const ib_mad_addr_t& sent, const uint8_t* mad) {
  const uint8_t klass = mad::MgmtClass::get(mad);
  const bool smp = klass == static_cast<uint8_t>(mad::MgmtClassId::kSubnLidRouted) ||
                   klass == static_cast<uint8_t>(mad::MgmtClassId::kSubnDirectedRoute);
  const bool directed = klass == static_cast<uint8_t>(mad::MgmtClassId::kSubnDirectedRoute);
  std::memset(u, 0, kUmadHeader);
  u->addr.qpn = htobe32(smp ? 0 : 1);
  u->addr.qkey = smp ? 0 : htobe32(kQp1QKey);
  ibv_port_attr a{};
  if (const shm::Segment* seg = segment()) verbs::fill_port_attr(*seg, &a);
  u->addr.lid = htobe16(directed ? mad::kPermissiveLid : a.lid);
  u->addr.sl = sent.sl;
  u->addr.pkey_index = sent.pkey_index;
}

// A leave whose bits other processes of the port still hold changes
// nothing at the SA (sa_joins.h): the DeleteResp comes from here, with the
// record as sent and status 0, as the kernel's multicast module answers a
// member that is not the group's last.
void answer_leave_here(OpenPort& port, int agentid, const ib_user_mad& sent, const uint8_t* mad_bytes) {
  uint8_t record[kRecordBytes] = {};
  auto* u = reinterpret_cast<ib_user_mad*>(record);
  fill_arrival(u, sent.addr, mad_bytes);
  uint8_t* out = record + kUmadHeader;
  std::memcpy(out, mad_bytes, mad::kMadBytes);
  mad::ResponseBit::set(out, 1);
  mad::Status::set(out, 0);
  u->agent_id = static_cast<uint32_t>(agentid);
  u->length = kRecordBytes;
  deliver(port, record, kRecordBytes);
}

// A trap a node of the subnet raised (mad/notice.h), as this port's QP0
// receives it: from the issuer's LID, to the agent that registered for
// SubnTrap (the SM). With none, nobody hears it, as on a fabric.
void send_trap(const mad::Trap& trap) {
  uint8_t record[kRecordBytes] = {};
  auto* u = reinterpret_cast<ib_user_mad*>(record);
  u->addr.lid = htobe16(trap.slid);
  u->addr.sl = trap.sl;
  uint8_t* mad_bytes = record + kUmadHeader;
  std::memcpy(mad_bytes, trap.mad, mad::kMadBytes);
  softverbs::umad::AgentAddress to;
  mad::AgentRegistration reg;
  if (!find_agent(mad_bytes, &to, &reg)) return;
  (void)post_request(to, record, mad::prepare_send(mad_bytes, mad::kMadBytes, 0));
}

// IBA 9.6.1.1: this port's QP1 takes a GMP whose P_Key matches a valid
// entry of its table. The sender is this port too, so the key is the entry
// at the umad's pkey_index of the same table: one past the table, invalid,
// or the lone limited member of its partition fails. The GMP is dropped,
// counted in PortInfo:P_KeyViolations and reported to the SM in trap 257
// (IBA 14.2.5.1: Bad P_Key); the sender times out.
bool gsi_refuses_pkey(const shm::Segment& seg, const ib_mad_addr_t& addr) {
  shm::SegmentHeader& h = seg.header();
  const uint16_t pkey = shm::pkey_at(h, addr.pkey_index);
  if (shm::pkey_index_matching(h, pkey) >= 0) return false;
  shm::count_pkey_violation(h);
  ibv_port_attr a;
  verbs::fill_port_attr(seg, &a);
  if (a.sm_lid != 0) {
    static std::atomic<uint32_t> tid{0};
    const mad::BadPKey bad{.lid1 = a.lid, .lid2 = a.lid, .pkey = pkey, .sl = addr.sl, .qp1 = 1, .qp2 = 1};
    send_trap(mad::bad_pkey_trap(a.lid, a.sm_lid, a.sm_sl, bad, tid.fetch_add(1, std::memory_order_relaxed) + 1));
  }
  return true;
}

// No answer will come. A send that waits for one learns so after its
// timeouts, with the MAD it sent (as the kernel returns it).
int answer_never_comes(const std::shared_ptr<OpenPort>& port, int agentid, const ib_user_mad* in_umad,
                       const uint8_t* in, int timeout_ms, int retries) {
  if (timeout_ms <= 0) return 0;
  std::vector<uint8_t> record(kUmadHeader + mad::kMadBytes);
  std::memcpy(record.data(), in_umad, kUmadHeader);
  std::memcpy(record.data() + kUmadHeader, in, mad::kMadBytes);
  auto* out_umad = reinterpret_cast<ib_user_mad*>(record.data());
  out_umad->agent_id = static_cast<uint32_t>(agentid);
  out_umad->status = ETIMEDOUT;
  out_umad->length = static_cast<uint32_t>(record.size());
  add_pending({due(timeout_ms, retries), port, std::move(record)});
  return 0;
}

}  // namespace

void deliver_request(int port_fd, uint64_t port_serial, uint32_t agent, uint8_t* record, const mad::RmppSend& send) {
  std::shared_ptr<OpenPort> port = port_of(port_fd);
  if (port == nullptr || port->serial != port_serial || agent >= UMAD_CA_MAX_AGENTS) return;
  bool rmpp;
  {
    std::lock_guard<std::mutex> lock(port->mu);
    const Agent& a = port->agents[agent];
    // Unregistered since, or the method taken away: nobody takes it.
    if (!a.used || !mad::wants(a.reg, record + kUmadHeader)) return;
    rmpp = a.reg.rmpp_version != 0;
  }
  const size_t len = mad::received_length(send, rmpp);
  if (len == 0) return;
  auto* u = reinterpret_cast<ib_user_mad*>(record);
  u->agent_id = agent;
  u->length = static_cast<uint32_t>(kUmadHeader + len);
  deliver(*port, record, kUmadHeader + std::max(len, mad::kMadBytes));
}

void deliver_response(uint32_t hi, uint8_t* record, const mad::RmppSend& send) {
  std::shared_ptr<OpenPort> port;
  uint32_t agent;
  if (!agent_of_tag(hi, &port, &agent)) return;
  const uint8_t* mad_bytes = record + kUmadHeader;
  if (!claim_answer(port.get(), agent, mad::TransactionId::get(mad_bytes), mad::MgmtClass::get(mad_bytes)))
    return;
  bool rmpp;
  {
    std::lock_guard<std::mutex> lock(port->mu);
    if (!port->agents[agent].used) return;
    rmpp = port->agents[agent].reg.rmpp_version != 0;
  }
  const size_t len = mad::received_length(send, rmpp);
  if (len == 0) return;
  auto* u = reinterpret_cast<ib_user_mad*>(record);
  u->agent_id = agent;
  u->length = static_cast<uint32_t>(kUmadHeader + len);
  deliver(*port, record, kUmadHeader + std::max(len, mad::kMadBytes));
}

}  // namespace softverbs::umad

using namespace softverbs::umad;
namespace mad = softverbs::mad;

SV_UMAD_EXPORT int umad_open_port(const char* ca_name, int portnum) {
  // A topology's other CAs (softverbs1…) are described, but their ports
  // send no MADs of their own: the subnet is managed from the device's port.
  if (listed_ca(ca_name) > 0) return -EOPNOTSUPP;
  if (resolve_ca(ca_name) == nullptr) return -ENODEV;
  // A topology file that cannot be used is refused here, where a tool
  // starts, not later as MADs that time out (the reason is logged).
  if (mad::topology_failed()) return -EINVAL;
  if (resolve_port(portnum) < 0) return -EINVAL;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return -errno;
  shutdown(fds[0], SHUT_WR);  // the program's end only reads
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &kQueueBytes, sizeof kQueueBytes);  // best effort
  add_port(fds[0], fds[1]);
  return fds[0];
}

SV_UMAD_EXPORT int umad_close_port(int portid) {
  std::shared_ptr<OpenPort> port = remove_port(portid);
  if (port == nullptr) return -EINVAL;
  withdraw_agents(portid, port->serial, -1);
  {
    std::lock_guard<std::mutex> lock(port->mu);
    port->closed = true;
    for (const Agent& a : port->agents)
      if (a.used) release_slot(a.slot);
  }
  close(portid);
  return 0;
}

SV_UMAD_EXPORT int umad_get_fd(int portid) { return port_of(portid) ? portid : -EINVAL; }

namespace {

// The kernel's checks (mad/user_agent.h), a slot for the agent's TID tag,
// then, for an agent with methods, the registry other processes search.
int register_agent(int portid, mad::AgentRegistration reg, uint32_t* agent_id) {
  if (const int e = mad::check_registration(reg); e != 0) return -e;
  std::shared_ptr<OpenPort> port = port_of(portid);
  if (port == nullptr) return -EINVAL;
  uint32_t id = UMAD_CA_MAX_AGENTS;
  {
    std::lock_guard<std::mutex> lock(port->mu);
    for (uint32_t i = 0; i < UMAD_CA_MAX_AGENTS && id == UMAD_CA_MAX_AGENTS; ++i)
      if (!port->agents[i].used) id = i;
    if (id == UMAD_CA_MAX_AGENTS) return -ENOMEM;
    port->agents[id].used = true;  // reserved while the rest is set up
  }
  const uint32_t slot = claim_slot(port, id);
  const int rc = slot == kSlots ? ENOMEM : publish_agent({getpid(), portid, port->serial, id}, reg);
  std::lock_guard<std::mutex> lock(port->mu);
  if (rc != 0) {
    port->agents[id] = {};
    release_slot(slot);
    return -rc;
  }
  port->agents[id].reg = reg;
  port->agents[id].slot = slot;
  *agent_id = id;
  return 0;
}

mad::AgentRegistration registration(int mgmt_class, int mgmt_version, uint8_t rmpp_version, uint32_t oui,
                                    const long* method_mask) {
  mad::AgentRegistration r;
  r.mgmt_class = static_cast<uint8_t>(mgmt_class);
  r.class_version = static_cast<uint8_t>(mgmt_version);
  r.rmpp_version = rmpp_version;
  r.oui = oui;
  // The kernel reads the mask as a bitmap of 128 bits in longs.
  if (method_mask != nullptr) std::memcpy(r.method_mask, method_mask, sizeof r.method_mask);
  return r;
}

}  // namespace

SV_UMAD_EXPORT int umad_register(int portid, int mgmt_class, int mgmt_version, uint8_t rmpp_version,
                                 long method_mask[16 / sizeof(long)]) {
  uint32_t id;
  // rdma-core's umad_register names OpenIB's OUI, so a vendor range 2 class
  // (ibping's 0x32) registers without umad_register_oui, as the kernel
  // requires an OUI for it.
  constexpr uint32_t kOpenIbOui = 0x001405;
  const int rc =
      register_agent(portid, registration(mgmt_class, mgmt_version, rmpp_version, kOpenIbOui, method_mask), &id);
  return rc < 0 ? rc : static_cast<int>(id);
}

SV_UMAD_EXPORT int umad_register_oui(int portid, int mgmt_class, uint8_t rmpp_version, uint8_t oui[3],
                                     long method_mask[16 / sizeof(long)]) {
  // IBA 13.4.9: OUI-qualified vendor classes are 0x30..0x4f.
  if (mgmt_class < 0x30 || mgmt_class > 0x4f || oui == nullptr) return -EINVAL;
  const uint32_t o = uint32_t{oui[0]} << 16 | uint32_t{oui[1]} << 8 | oui[2];
  uint32_t id;
  // libibumad registers OUI classes as version 1.
  const int rc = register_agent(portid, registration(mgmt_class, 1, rmpp_version, o, method_mask), &id);
  return rc < 0 ? rc : static_cast<int>(id);
}

SV_UMAD_EXPORT int umad_register2(int port_fd, struct umad_reg_attr* attr, uint32_t* agent_id) {
  if (attr == nullptr || agent_id == nullptr) return EINVAL;
  // User RMPP (the program segments and acknowledges itself) is not offered:
  // between the processes of one port nothing is segmented.
  if (attr->flags != 0) return EINVAL;
  mad::AgentRegistration r = registration(attr->mgmt_class, attr->mgmt_class_version, attr->rmpp_version,
                                          attr->oui, nullptr);
  static_assert(sizeof attr->method_mask == sizeof r.method_mask);
  std::memcpy(r.method_mask, attr->method_mask, sizeof r.method_mask);
  const int rc = register_agent(port_fd, r, agent_id);
  return rc < 0 ? -rc : 0;
}

SV_UMAD_EXPORT int umad_unregister(int portid, int agentid) {
  std::shared_ptr<OpenPort> port = port_of(portid);
  if (port == nullptr || agentid < 0 || agentid >= UMAD_CA_MAX_AGENTS) return -EINVAL;
  uint32_t slot;
  {
    std::lock_guard<std::mutex> lock(port->mu);
    if (!port->agents[agentid].used) return -EINVAL;
    slot = port->agents[agentid].slot;
    port->agents[agentid] = {};
  }
  release_slot(slot);
  withdraw_agents(portid, port->serial, agentid);
  return 0;
}

SV_UMAD_EXPORT int umad_send(int portid, int agentid, void* umad, int length, int timeout_ms, int retries) {
  std::shared_ptr<OpenPort> port = port_of(portid);
  if (port == nullptr || umad == nullptr || agentid < 0 || agentid >= UMAD_CA_MAX_AGENTS) return -EINVAL;
  mad::AgentRegistration sender;
  uint32_t slot;
  {
    std::lock_guard<std::mutex> lock(port->mu);
    if (!port->agents[agentid].used) return -EINVAL;
    sender = port->agents[agentid].reg;
    slot = port->agents[agentid].slot;
  }
  if (length < 0 || static_cast<size_t>(length) > kMaxMessageBytes) return -EINVAL;
  auto* in_umad = static_cast<ib_user_mad*>(umad);
  // The record as another agent would read it: header, then the message
  // (at least one whole MAD, zero past what was sent).
  std::vector<uint8_t> message(kUmadHeader + std::max(static_cast<size_t>(length), mad::kMadBytes));
  uint8_t* in = message.data() + kUmadHeader;
  std::memcpy(in, in_umad->data, static_cast<size_t>(length));
  const mad::RmppSend rmpp = mad::prepare_send(in, static_cast<size_t>(length), sender.rmpp_version);
  if (rmpp.error != 0) return -rmpp.error;

  const uint8_t klass = mad::MgmtClass::get(in);
  const bool directed = klass == static_cast<uint8_t>(mad::MgmtClassId::kSubnDirectedRoute);
  const bool smp = klass == static_cast<uint8_t>(mad::MgmtClassId::kSubnLidRouted) || directed;
  const softverbs::shm::Segment* seg = segment();
  if (mad::is_smp_trap_repress(in) && !reaches_this_port(in_umad->addr, in)) {
    // For the SMA of the node that raised the trap, which takes it and
    // answers nothing (mad/notice.h: it repeats no trap).
    return 0;
  }
  // SMPs go to QP0, which checks no P_Key; requests to this port's GMP agents
  // (its own or a process's) pass QP1's check first.
  if (!smp && !mad::is_response(in) && seg != nullptr && reaches_this_port(in_umad->addr, in) &&
      gsi_refuses_pkey(*seg, in_umad->addr))
    return answer_never_comes(port, agentid, in_umad, in, timeout_ms, retries);
  if (mad::is_response(in)) {
    // Back to the agent that asked, by the tag in its TID; dropped if that
    // process is gone (its request times out there).
    fill_arrival(reinterpret_cast<ib_user_mad*>(message.data()), in_umad->addr, in);
    const uint32_t hi = mad::tid_agent(mad::TransactionId::get(in));
    (void)post_response(pid_of_tag(hi), hi, message.data(), rmpp);
  } else if (mad::for_user_agent(in) && reaches_this_port(in_umad->addr, in)) {
    const mad::McmChange change = mad::mcmember_change(in);
    if (change == mad::McmChange::kLeave) {
      const uint8_t bits = sa_leave_bits(in);
      if (bits == 0) {
        answer_leave_here(*port, agentid, *in_umad, in);
        return 0;
      }
      mad::McmJoinState::set(in, bits);  // only what the port as a whole gives up
    }
    softverbs::umad::AgentAddress to;
    mad::AgentRegistration reg;
    if (find_agent(in, &to, &reg)) {
      if (change == mad::McmChange::kJoin) note_sa_join(in);
      // user_mad.c: a request's TID names its agent in the upper 32 bits.
      mad::TransactionId::set(in, mad::tid_for_agent(mad::TransactionId::get(in), tag_of_slot(slot)));
      fill_arrival(reinterpret_cast<ib_user_mad*>(message.data()), in_umad->addr, in);
      // The answer may come before this thread goes on: wait for it first.
      if (timeout_ms > 0 && ensure_inbox()) {
        std::vector<uint8_t> record(kUmadHeader + std::max(rmpp.length, mad::kMadBytes));
        std::memcpy(record.data(), in_umad, kUmadHeader);
        std::memcpy(record.data() + kUmadHeader, in, record.size() - kUmadHeader);
        auto* out = reinterpret_cast<ib_user_mad*>(record.data());
        out->agent_id = static_cast<uint32_t>(agentid);
        out->status = ETIMEDOUT;
        out->length = static_cast<uint32_t>(record.size());
        add_pending({due(timeout_ms, retries), port, std::move(record), true, static_cast<uint32_t>(agentid),
                     mad::TransactionId::get(in), klass});
      }
      (void)post_request(to, message.data(), rmpp);
      return 0;
    }
  }
  if (!mad::is_response(in)) {
    uint8_t record[kRecordBytes] = {};
    auto* out_umad = reinterpret_cast<ib_user_mad*>(record);
    const uint16_t dlid = be16toh(in_umad->addr.lid);
    // SMPs for other LIDs go into the subnet, if the device has one, and so
    // do GMPs for the subnet's PMAs (mad/agent.h).
    const bool ours = seg != nullptr && (smp || for_this_port(in_umad->addr));
    mad::RaisedTraps traps;
    const bool answered = seg != nullptr &&
                          (ours ? mad::answer_mad(*seg, in, mad::kMadBytes, dlid, out_umad->data, &traps)
                                : mad::answer_remote_gmp(*seg, in, mad::kMadBytes, dlid, out_umad->data)) ==
                              mad::Disposition::kRespond;
    // The Set's answer and the traps it raised travel apart, as they do on
    // a fabric; the traps leave first, so the SM hears of the change by
    // the time the tool reads its answer.
    for (unsigned i = 0; i < traps.count; ++i) send_trap(traps.traps[i]);
    if (answered) {
      out_umad->agent_id = static_cast<uint32_t>(agentid);
      out_umad->length = kRecordBytes;
      out_umad->addr.qpn = htobe32(smp ? 0 : 1);
      out_umad->addr.qkey = smp ? 0 : htobe32(kQp1QKey);
      ibv_port_attr a;
      softverbs::verbs::fill_port_attr(*seg, &a);
      out_umad->addr.lid = htobe16(directed ? mad::kPermissiveLid : for_this_port(in_umad->addr) ? a.lid : dlid);
      out_umad->addr.sl = in_umad->addr.sl;
      out_umad->addr.pkey_index = in_umad->addr.pkey_index;
      deliver(*port, record, kRecordBytes);
      return 0;
    }
  }
  return answer_never_comes(port, agentid, in_umad, in, timeout_ms, retries);
}

SV_UMAD_EXPORT int umad_poll(int portid, int timeout_ms) {
  pollfd p{portid, POLLIN, 0};
  const int n = poll(&p, 1, timeout_ms);
  if (n < 0) return -errno;
  if (n == 0) return -ETIMEDOUT;
  return (p.revents & POLLIN) != 0 ? 0 : -EIO;
}

SV_UMAD_EXPORT int umad_recv(int portid, void* umad, int* length, int timeout_ms) {
  if (umad == nullptr || length == nullptr || *length < 0) return -EINVAL;
  if (port_of(portid) == nullptr) return -EINVAL;
  const int rc = umad_poll(portid, timeout_ms);
  if (rc < 0) return rc;
  // The header says how long the MAD is (user_mad.c: header + message); a
  // buffer too small for it leaves it queued and says how much is needed,
  // with errno ENOSPC as libibumad sets it.
  ib_user_mad head;
  const ssize_t peeked = recv(portid, &head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
  if (peeked < 0) return -errno;
  if (static_cast<size_t>(peeked) != sizeof head || head.length < kUmadHeader) return -EIO;
  const size_t mad_len = head.length - kUmadHeader;
  if (static_cast<size_t>(*length) < mad_len) {
    *length = static_cast<int>(mad_len);
    errno = ENOSPC;
    return -ENOSPC;
  }
  const size_t want = kUmadHeader + std::max(mad_len, mad::kMadBytes);
  // A record carries at least one whole MAD; a shorter message's padding
  // past the caller's buffer is not the caller's to receive.
  std::vector<uint8_t> bounce;
  void* into = umad;
  if (want > kUmadHeader + static_cast<size_t>(*length)) {
    bounce.resize(want);
    into = bounce.data();
  }
  const ssize_t n = read(portid, into, want);
  if (n < 0) return -errno;
  if (static_cast<size_t>(n) != want) return -EIO;
  if (into != umad) std::memcpy(umad, into, kUmadHeader + static_cast<size_t>(*length));
  auto* got = static_cast<ib_user_mad*>(umad);
  *length = static_cast<int>(mad_len);
  return static_cast<int>(got->agent_id);
}
