// Datagram rsockets (SOCK_DGRAM): rdma-core's ds_* design over UD QPs,
// speaking its datagram wire format (cm/rsocket_dgram_proto.h).
//
// An rsocket owns a kernel UDP socket (made with raw_socket, past
// librspreload), whose fd is its index and whose address is its address,
// and one UD QP per local address it sends from (DsQp, bound through the
// RDMA CM to that address and the UDP port). A destination (DsDest) is a
// peer address with the QP that reaches it and, once the peer told us its
// QPN, an address handle; until then data goes over UDP, and the peer's
// answer (a control message with its QPN) makes the handle.
//
// Thread-safety: all of it is guarded by the owning Rsocket's `mu`, every
// function here REQUIRES it held. rdma-core answers the UDP socket from a
// service thread; here the calls do (cm/rsocket.h: no thread of its own):
// every wait polls the UDP socket too and reads it once poll(2) says so,
// and any call reads it when nobody has for kUdpCheckUs (so a program that
// only spins on non-blocking calls hears first datagrams too, without a
// system call per call).
//
// Invariants:
//   1. Every send slot (kSlot bytes of `sbuf`, registered with every QP's
//      PD) is on the free list or in exactly one posted send; sqe_avail
//      counts the free ones. A send never waits on the peer: a UD send
//      completes once it left.
//   2. Every QP keeps rq_size receives posted, each into its own kSlot of
//      the QP's `rbuf` (and the shared GRH area behind it); a completed
//      receive is either queued in `dmsg` (rqe_avail counts the room left
//      there, rq_size in all) or posted again at once.
//   3. A datagram's payload plus the longer of its two headers (the UDP
//      one) fits one slot and one packet of the port's MTU, so it arrives
//      whole whichever way it goes, also at rdma-core, whose UDP receive
//      buffer is one slot; larger sends fail with EMSGSIZE (rdma-core
//      copies them past the slot). We take UDP datagrams of up to a slot of
//      payload.
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <map>
#include <memory>
#include <array>
#include <vector>

#include "cm/rsocket.h"
#include "cm/rsocket_dgram_proto.h"

namespace softverbs::cm {

struct DsQp;

// What identifies a destination: family, port and address (and scope), in
// a fixed array so that looking one up allocates nothing.
using DsAddrKey = std::array<uint8_t, 24>;

struct DsDest {
  sockaddr_storage addr{};
  DsQp* qp = nullptr;
  ibv_ah* ah = nullptr;  // null until the peer's QPN is known
  uint32_t qpn = 0;
};

struct DsQp {
  rdma_cm_id* id = nullptr;  // synchronous, bound to the local address
  ibv_comp_channel* cq_ch = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* smr = nullptr;  // the rsocket's sbuf, in this QP's PD
  ibv_mr* rmr = nullptr;
  uint8_t* rbuf = nullptr;  // rq_size slots, then the GRH area
  uint32_t grh_offset = 0;  // where the GRH area starts in rbuf
  uint8_t hdr[dsproto::kMaxHdrLen]{};
  uint8_t hdr_len = 0;
  uint32_t max_payload = 0;  // invariant 3
  DsDest self;  // ourselves: the UDP data we pass on to our own QP
  bool cq_armed = false;
  unsigned unacked_cq_events = 0;
};

struct DsRmsg {
  DsQp* qp;
  uint32_t offset;
  uint32_t length;  // GRH excluded, DsHeader included
};

struct RsDgram {
  int udp_sock = -1;
  std::vector<std::unique_ptr<DsQp>> qps;
  size_t next_poll = 0;  // round robin over the QPs' CQs, as rdma-core
  std::map<DsAddrKey, std::unique_ptr<DsDest>> dests;
  DsDest* peer = nullptr;       // rconnect's: where rsend sends
  DsDest* conn_dest = nullptr;  // the last rsendto's, looked at first
  uint8_t* sbuf = nullptr;  // sq_size slots
  std::vector<uint32_t> smsg_free;  // free slot offsets (invariant 1)
  DsRmsg* dmsg = nullptr;  // rq_size + 1 entries, a ring
  int rmsg_head = 0;
  int rmsg_tail = 0;
  int rqe_avail = 0;
  int sqe_avail = 0;
  bool ep = false;  // ds_init_ep done: buffers sized and allocated
  uint64_t last_udp_check_us = 0;
  bool udp_ready = false;  // poll(2) saw the UDP socket readable
};

namespace rsimpl {

inline constexpr uint32_t kDsSlot = 2048;         // RS_SNDLOWAT: one datagram's slot
inline constexpr uint64_t kUdpCheckUs = 2000;  // the UDP socket is read at least this often while busy

// rsocket_dgram.cc: the control path.
int ds_socket(int domain, int type);
int ds_bind(Rsocket* rs, const sockaddr* addr, socklen_t len);
int ds_connect(Rsocket* rs, const sockaddr* addr, socklen_t len);
int ds_close(Rsocket* rs);
// The destination for `addr`, made (with a QP for the local address that
// reaches it) if new; nullptr with errno on failure.
DsDest* ds_get_dest(Rsocket* rs, const sockaddr* addr, socklen_t len);
// Reads every datagram waiting on the UDP socket (udp_svc_process_rs).
void ds_service_udp(Rsocket* rs);
int ds_init_ep(Rsocket* rs);
int ds_setsockopt(Rsocket* rs, int level, int name, const void* val, socklen_t len);
int ds_getsockopt(Rsocket* rs, int level, int name, void* val, socklen_t* len);

// rsocket_dgram_data.cc: the datapath.
void ds_poll_cqs(Rsocket* rs);
void ds_post_recv(DsQp* qp, uint32_t offset);
// Posts one datagram (header + payload, gathered) from `qp` to `dest`;
// REQUIRES a free slot.
int ds_post(Rsocket* rs, DsQp* qp, const DsDest& dest, const uint8_t* hdr, uint8_t hdr_len, const iovec* iov,
            int iovcnt, size_t len);
// Sends `len` bytes of `iov` as one datagram to `dest`: over UD once its
// QPN is known, else over UDP.
ssize_t ds_send(Rsocket* rs, std::unique_lock<std::mutex>& lk, DsDest* dest, const iovec* iov, int iovcnt,
                size_t len, int flags);
ssize_t ds_recv(Rsocket* rs, std::unique_lock<std::mutex>& lk, const iovec* iov, int iovcnt, int flags,
                sockaddr* from, socklen_t* fromlen);
// UDP datagram of op `op` (payload `iov`) from dest's QP to dest's address.
ssize_t ds_send_udp(Rsocket* rs, const DsDest& dest, const iovec* iov, int iovcnt, uint8_t op, int flags);
// CQs, then the UDP socket if poll(2) saw it readable or kUdpCheckUs passed.
void ds_progress(Rsocket* rs);
// Waits (mu released while asleep) until test(rs); -1 EWOULDBLOCK when
// `nonblock` and it is false now.
int ds_wait_for(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock, bool (*test)(Rsocket*));
bool ds_can_send(Rsocket* rs);
bool ds_have_rdata(Rsocket* rs);
bool ds_all_sends_done(Rsocket* rs);
// rpoll: the fds to sleep on, and what to do once one fired.
void ds_arm(Rsocket* rs, std::vector<pollfd>* fds);
// The same into `fds` (room for `max`); returns how many. Past `max`, QPs
// are left out: the wait is bounded (kWakeMs), so they are looked at anyway.
size_t ds_arm(Rsocket* rs, pollfd* fds, size_t max);
// After poll(2) returned `p`, one of ds_arm's fds.
void ds_after_poll(Rsocket* rs, const pollfd& p);
short ds_poll_events(Rsocket* rs, short events);

}  // namespace rsimpl
}  // namespace softverbs::cm
