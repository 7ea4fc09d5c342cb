// rsockets: a socket API over RC QPs that the RDMA CM connects, speaking
// rdma-core's rsocket protocol (cm/rsocket_proto.h), for librdmacm.so.1's
// rsocket ... riowrite (src/abi/rdmacm/rsockets.cc); datagram rsockets
// (SOCK_DGRAM, over UD QPs) keep their own state in cm/rsocket_dgram.h.
//
// Thread-safety: each Rsocket has one mutex, `mu`, held by every call on
// it except while it sleeps in poll(2); two threads may use one rsocket (one
// sending, one receiving) and each makes progress for both. The table from
// index to Rsocket is lock-free to read.
//
// Invariants:
//   1. An rsocket's index is the fd of its own CM event channel (an eventfd)
//      for a stream rsocket, and of its UDP socket for a datagram one, as in
//      rdma-core: a real fd, so rsocket indexes never collide with the
//      process's other fds and rpoll/rselect can mix both (librspreload
//      keeps such an index behind each of its placeholder fds).
//   2. Nothing waits in the kernel without a bound: blocking calls sleep in
//      poll(2) on the CQs' completion channels and the CM channel (a
//      datagram rsocket: its UDP socket), all O_NONBLOCK, at most kWakeMs at
//      a time, and look again.
//   3. The protocol state below `mu` follows rdma-core's rsocket.c field for
//      field (credits as 16-bit sequence numbers, a two-entry target SGL, the
//      receive buffer given out in halves), so the two interoperate.
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "cm/rsocket_proto.h"

namespace softverbs::cm {

class EventChannel;
struct RsDgram;

// rdma-core's rsocket states: bits, so "connected" survives half-shutdowns.
enum RsState : uint32_t {
  kRsInit = 0,
  kRsBound = 0x1,
  kRsListening = 0x2,
  kRsOpening = 0x4,
  kRsResolvingAddr = kRsOpening | 0x10,
  kRsResolvingRoute = kRsOpening | 0x20,
  kRsConnecting = kRsOpening | 0x40,
  kRsAccepting = kRsOpening | 0x80,
  kRsConnected = 0x100,
  kRsWritable = 0x200,
  kRsReadable = 0x400,
  kRsConnectRdwr = kRsConnected | kRsWritable | kRsReadable,
  kRsConnectError = 0x800,
  kRsDisconnected = 0x1000,
  kRsError = 0x2000,
};

// One iomap window this side registered (riomap), or one the peer told us.
struct RsIomapMr {
  uint64_t offset = 0;
  ibv_mr* mr = nullptr;
  int index = -1;  // slot in the peer's table; -1 for a local-only map
  bool pending = false;  // not yet written to the peer
};

struct Rsocket {
  // Constant after rsocket()/raccept().
  int index = -1;
  int domain = AF_INET;
  EventChannel* ch = nullptr;  // stream rsockets only
  rdma_cm_id* id = nullptr;    // stream rsockets only
  RsDgram* dg = nullptr;       // datagram rsockets only (cm/rsocket_dgram.h)

  std::mutex mu;
  uint32_t state = kRsInit;
  int err = 0;            // SO_ERROR
  int fs_flags = 0;       // O_NONBLOCK
  int fd_flags = 0;       // FD_CLOEXEC

  // Options (rsetsockopt); sizes apply when the connection is made.
  uint32_t sbuf_size = 1 << 17;
  uint32_t rbuf_size = 1 << 17;
  uint16_t sq_size = 384;
  uint16_t rq_size = 384;
  uint32_t sq_inline = 64;
  uint32_t target_iomap_size = 0;
  uint64_t so_opts = 0;   // bit per SOL_SOCKET option set (SO_REUSEADDR, SO_KEEPALIVE, ...)
  uint64_t tcp_opts = 0;  // bit per IPPROTO_TCP option set
  int keepidle_s = 7200;
  linger linger_opt{};
  uint64_t last_activity_us = 0;

  // The connection's resources (rs_create_ep).
  ibv_comp_channel* cq_ch = nullptr;
  ibv_cq* cq = nullptr;
  unsigned unacked_cq_events = 0;
  bool cq_armed = false;
  ibv_mr* smr = nullptr;
  ibv_mr* rmr = nullptr;
  ibv_mr* target_mr = nullptr;
  uint8_t* sbuf = nullptr;
  uint8_t* rbuf = nullptr;
  uint8_t* target_buf = nullptr;
  volatile rsproto::Sge* target_sgl = nullptr;  // written by the peer
  volatile rsproto::Iomap* target_iomap = nullptr;  // written by the peer

  // Protocol state, as rdma-core names it.
  bool swap_sgl = false;
  rsproto::Sge remote_sgl{};
  rsproto::Sge remote_iomap{};
  int remote_sge = 0;
  int target_sge = 0;
  uint32_t ctrl_seqno = 0;
  uint32_t ctrl_max_seqno = 4;  // RS_QP_CTRL_SIZE
  uint16_t sseq_no = 0;
  uint16_t sseq_comp = 0;
  uint16_t rseq_no = 0;
  uint16_t rseq_comp = 0;
  int rbuf_bytes_avail = 0;
  int rbuf_free_offset = 0;
  int rbuf_offset = 0;
  int sbuf_bytes_avail = 0;
  ibv_sge ssgl[2]{};
  int sqe_avail = 0;
  struct Rmsg {
    uint32_t op;
    uint32_t data;
  };
  Rmsg* rmsg = nullptr;  // rq_size + 1 entries
  int rmsg_head = 0;
  int rmsg_tail = 0;

  // iomap (riomap/riowrite): windows of ours the peer may write, one per
  // slot of its iomap table (remote_iomap.length), and local-only ones.
  RsIomapMr* iomaps = nullptr;
  std::vector<RsIomapMr> local_iomaps;
  int iomap_pending = 0;
};

// Lookup by index; nullptr if `index` is no rsocket.
Rsocket* rs_lookup(int index);

// One per librdmacm call; each returns what the r* function returns, with
// errno set on failure.
int rs_socket(int domain, int type, int protocol);
int rs_bind(int s, const sockaddr* addr, socklen_t len);
int rs_listen(int s, int backlog);
int rs_accept(int s, sockaddr* addr, socklen_t* len);
int rs_connect(int s, const sockaddr* addr, socklen_t len);
int rs_shutdown(int s, int how);
int rs_close(int s);
ssize_t rs_recv(int s, void* buf, size_t len, int flags);
ssize_t rs_recvv(int s, const iovec* iov, int iovcnt, int flags);
ssize_t rs_send(int s, const void* buf, size_t len, int flags);
ssize_t rs_sendv(int s, const iovec* iov, int iovcnt, int flags);
// rrecvfrom/rsendto/rrecvmsg/rsendmsg: the address is the datagram's for a
// datagram rsocket, the peer's (recv) or ignored (send) for a stream one.
ssize_t rs_recvfrom(int s, const iovec* iov, int iovcnt, int flags, sockaddr* from, socklen_t* fromlen);
ssize_t rs_sendto(int s, const iovec* iov, int iovcnt, int flags, const sockaddr* to, socklen_t tolen);
int rs_poll(pollfd* fds, nfds_t nfds, int timeout_ms);
int rs_select(int nfds, fd_set* r, fd_set* w, fd_set* e, timeval* timeout);
int rs_getpeername(int s, sockaddr* addr, socklen_t* len);
int rs_getsockname(int s, sockaddr* addr, socklen_t* len);
int rs_setsockopt(int s, int level, int name, const void* val, socklen_t len);
int rs_getsockopt(int s, int level, int name, void* val, socklen_t* len);
int rs_fcntl(int s, int cmd, long arg);
off_t rs_iomap(int s, void* buf, size_t len, int prot, int flags, off_t offset);
int rs_iounmap(int s, void* buf, size_t len);
size_t rs_iowrite(int s, const void* buf, size_t count, off_t offset, int flags);

// Internal to the rs_* files.
namespace rsimpl {

inline constexpr int kWakeMs = 100;
inline constexpr uint32_t kSndLowat = 2048;    // RS_SNDLOWAT
inline constexpr uint32_t kOlapStart = 2048;   // RS_OLAP_START_SIZE
inline constexpr uint32_t kMaxTransfer = 65536;  // RS_MAX_TRANSFER
inline constexpr uint32_t kCtrlSize = 4;       // RS_QP_CTRL_SIZE
inline constexpr uint64_t kRecvFlag = uint64_t(1) << 63;

int fail(int err);
uint64_t now_us();
bool insert(Rsocket* rs);
void remove(Rsocket* rs);

// Everything that needs no waiting: completions, CM events, credits.
void progress(Rsocket* rs);
void process_cm_events(Rsocket* rs);
// Waits, with `mu` held on entry and exit, until test(rs) or the socket
// fails; -1 EWOULDBLOCK at once when `nonblock`.
int wait_for(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock, bool (*test)(Rsocket*));
// Drives a connect or accept in progress; 0 once connected, -1 EINPROGRESS
// while it goes on, -1 with the error when it failed.
int do_connect(Rsocket* rs);
void arm_cq(Rsocket* rs);
void drain_cq_events(Rsocket* rs);
// Takes every event the non-blocking channel `ch` has for `cq`: the CQ is no
// longer armed; events are acknowledged 256 at a time (`unacked` counts).
void drain_cq_channel(ibv_comp_channel* ch, ibv_cq* cq, bool* armed, unsigned* unacked);

// Buffers of whole pages of their own, so that registration can move them
// onto a memfd that a peer on the host fabric maps (docs/DESIGN.md,
// registered memory); nullptr when out of memory.
uint8_t* alloc_pages(size_t len);
void free_pages(uint8_t* p, size_t len);

int create_ep(Rsocket* rs);
void free_ep(Rsocket* rs);
// The parameters of our REQ or REP: our connection data, encoded into
// `wire` (which must outlive the connect or accept), and the flow control
// and retry counts rsockets always ask for.
rdma_conn_param conn_param(const Rsocket* rs, uint8_t (&wire)[rsproto::kConnDataLen]);
bool save_conn_data(Rsocket* rs, const void* data, size_t len);

// Datapath (rsocket_data.cc).
void poll_cq(Rsocket* rs);
void update_credits(Rsocket* rs);
int post_ctrl(Rsocket* rs, uint32_t msg);
int post_keepalive(Rsocket* rs);
bool can_send(const Rsocket* rs);
bool ctrl_avail(const Rsocket* rs);
bool have_rdata(const Rsocket* rs);
bool all_sends_done(const Rsocket* rs);
int send_iomaps(Rsocket* rs);

}  // namespace rsimpl
}  // namespace softverbs::cm
