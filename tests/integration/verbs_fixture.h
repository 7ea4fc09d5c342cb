// verbs_fixture.h — verbs objects and data-path helpers for the integration
// suites, written against the standard API only (<infiniband/verbs.h>).
//
// Contract
//  1. Only children of run_procs() use these (see harness.h). Every helper
//     reports problems with gtest (ADD_FAILURE/EXPECT, with errno text and the
//     work completion spelled out) and returns false or nullptr; callers wrap
//     them in ASSERT_TRUE / ASSERT_NE(nullptr, ...).
//  2. Objects are RAII: the deleters EXPECT the destroy verb to return 0, so a
//     leaked reference (EBUSY) is a test failure. Declare objects so that they
//     are destroyed QPs first, then MRs, CQs, PDs, the context last.
//  3. Every wait is bounded (poll_n and friends take a timeout); nothing spins
//     forever. Polling backs off (sched_yield, then short sleeps) so that two
//     to five processes share two cores.
//  4. QpConfig describes one side of a connection: the requester attributes
//     (timeout, retry_cnt, rnr_retry, max_rd_atomic) and the responder ones
//     (min_rnr_timer, max_dest_rd_atomic, access) of *this* QP. qp_type
//     selects the RESET→INIT→RTR→RTS attribute sets (RC and UC now; UD and an
//     SRQ slot in through the same fields).
//  5. On an Ethernet (RoCE) port every address vector is global: GID index
//     0, the peer's GID (QpInfo::gid), no LID. connect_over() checks that the
//     peer's GID is none of this port's, so that the connection takes the UDP
//     fabric (a destination GID of this host would keep the host fabric).
//
// Thread-safety: objects are used by one thread at a time, like the verbs
// they wrap; the events suite documents its own threads.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness.h"

namespace softverbs::integration {

// The device this process opens: softverbs_roce0 when SOFTVERBS_ROCE_ADDR is
// set in its environment (as host_env() sets it), else softverbs0.
const char* device_name();
inline constexpr uint8_t kPort = 1;
inline constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// ---- names (independent of the library's own *_str functions) -------------
std::string status_name(int status);
std::string wc_opcode_name(int opcode);
std::string qp_state_name(int state);
std::string describe(const ibv_wc& wc);
std::string errno_name(int err);  // "EINVAL (Invalid argument)"

// IBA 9.7.5.2.8 Table 45: the RNR NAK timer encoding, in microseconds.
double rnr_timer_us(uint8_t code);
// IBA 9.7.6.1.3: local ACK timeout 4.096 us * 2^timeout (0 = infinite).
double ack_timeout_us(uint8_t timeout);

// ---- RAII -------------------------------------------------------------------
struct CloseDevice { void operator()(ibv_context* p) const; };
struct DeallocPd { void operator()(ibv_pd* p) const; };
struct DestroyCq { void operator()(ibv_cq* p) const; };
struct DestroyQp { void operator()(ibv_qp* p) const; };
struct DeregMr { void operator()(ibv_mr* p) const; };
struct DestroyChannel { void operator()(ibv_comp_channel* p) const; };
using ContextPtr = std::unique_ptr<ibv_context, CloseDevice>;
using PdPtr = std::unique_ptr<ibv_pd, DeallocPd>;
using CqPtr = std::unique_ptr<ibv_cq, DestroyCq>;
using QpPtr = std::unique_ptr<ibv_qp, DestroyQp>;
using MrPtr = std::unique_ptr<ibv_mr, DeregMr>;
using ChannelPtr = std::unique_ptr<ibv_comp_channel, DestroyChannel>;

// Opens device_name(); ADD_FAILURE (listing the devices found) and nullptr if absent.
ContextPtr open_device();
CqPtr create_cq(ibv_context* ctx, int cqe, ibv_comp_channel* channel = nullptr,
                void* cq_context = nullptr);

// Gets and acks every pending asynchronous event of `ctx` without blocking;
// returns how many. ibv_destroy_qp/cq wait until the object's affiliated
// events are acked (ibv_get_async_event(3)), so TestQp calls this before it
// destroys its QP.
int drain_async_events(ibv_context* ctx);

struct PortInfo {
  ibv_port_attr attr{};
  ibv_gid gid{};  // index 0
  bool roce() const { return attr.link_layer == IBV_LINK_LAYER_ETHERNET; }
};
[[nodiscard]] bool query_port_info(ibv_context* ctx, PortInfo* out);
// Whether `gid` is one of the GIDs of `ctx`'s port (ibv_query_gid over the
// table); ADD_FAILURE and true if the table cannot be read.
bool is_local_gid(ibv_context* ctx, const PortInfo& port, const uint8_t gid[16]);

// ---- memory -----------------------------------------------------------------
// Page-aligned, zero-filled memory (at least one page is allocated, so a
// zero-length buffer still has a valid address).
class Buffer {
 public:
  explicit Buffer(size_t size);
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free { void operator()(uint8_t* p) const; };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_;
};

// Where a peer may RDMA: sent over a Link.
struct RemoteBuf {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
  uint64_t len = 0;
  RemoteBuf at(uint64_t offset) const { return {addr + offset, rkey, 0, len - offset}; }
};

// A Buffer registered as one MR.
class Region {
 public:
  // Registers `size` bytes with `access`; the buffer is filled with kGuardByte.
  static std::unique_ptr<Region> create(ibv_pd* pd, size_t size, int access = kAllAccess);
  uint8_t* data() const { return buf_.data(); }
  size_t size() const { return buf_.size(); }
  ibv_mr* mr() const { return mr_.get(); }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  uint64_t addr(size_t offset = 0) const;
  ibv_sge sge(size_t offset, size_t len) const;
  RemoteBuf remote(size_t offset = 0) const;
  // Drops the MR now (e.g. to test a stale rkey); the buffer stays.
  [[nodiscard]] bool deregister();

 private:
  explicit Region(size_t size) : buf_(size) {}
  Buffer buf_;
  MrPtr mr_;
};

// ---- queue pairs --------------------------------------------------------------
struct QpConfig {
  ibv_qp_type qp_type = IBV_QPT_RC;
  uint32_t max_send_wr = 64;
  uint32_t max_recv_wr = 64;
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 4;
  uint32_t max_inline_data = 0;
  int cq_depth = 512;  // for the QP's own CQs
  bool sq_sig_all = true;
  ibv_srq* srq = nullptr;  // later: SRQ suites
  // Nonzero: created with ibv_create_qp_ex and these IBV_QP_EX_WITH_* builders
  // (ibv_qp_to_qp_ex(get()) then posts with ibv_wr_*).
  uint64_t send_ops_flags = 0;
  // Attributes of this QP (see the contract).
  ibv_mtu path_mtu = IBV_MTU_4096;
  uint8_t timeout = 14;       // 67 ms local ACK timeout
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;      // 7 = retry forever
  uint8_t min_rnr_timer = 12; // 0.64 ms
  uint8_t max_rd_atomic = 4;  // clamped to the device by Endpoint::add_qp
  uint8_t max_dest_rd_atomic = 4;
  int access = kAllAccess & ~IBV_ACCESS_LOCAL_WRITE;  // qp_access_flags
  bool use_grh = false;
  uint32_t qkey = 0x11111111;  // UD
  std::optional<uint32_t> psn;  // our send PSN; pseudo-random if unset
};

// What the peer needs to connect to a QP; sent over a Link.
struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t port = 0;
  uint8_t reserved = 0;
  uint8_t gid[16] = {};
};

class TestQp {
 public:
  // Creates the QP with its own send and receive CQs unless CQs are given.
  static std::unique_ptr<TestQp> create(ibv_context* ctx, ibv_pd* pd, const PortInfo& port,
                                        const QpConfig& config, ibv_cq* send_cq = nullptr,
                                        ibv_cq* recv_cq = nullptr);
  ibv_qp* get() const { return qp_.get(); }
  uint32_t qpn() const { return qp_->qp_num; }
  ibv_cq* send_cq() const { return send_cq_; }
  ibv_cq* recv_cq() const { return recv_cq_; }
  const ibv_qp_cap& cap() const { return cap_; }  // as ibv_create_qp returned it
  const QpConfig& config() const { return config_; }
  const PortInfo& port() const { return port_; }
  uint32_t psn() const { return psn_; }
  QpInfo info() const;

  [[nodiscard]] bool to_init();
  [[nodiscard]] bool to_rtr(const QpInfo& remote);
  [[nodiscard]] bool to_rts();
  [[nodiscard]] bool connect(const QpInfo& remote);  // INIT, RTR, RTS
  [[nodiscard]] bool to_state(ibv_qp_state state);   // ERR, RESET (no attributes)
  // IBV_QPS_UNKNOWN (and ADD_FAILURE) if ibv_query_qp fails.
  ibv_qp_state state() const;
  // Waits until ibv_query_qp reports `want` (transitions to ERR are asynchronous).
  [[nodiscard]] bool wait_state(ibv_qp_state want, Millis timeout = scaled(kOpTimeout)) const;
  // Destroys the QP now (its CQs stay).
  void destroy();
  ~TestQp();
  // ibv_destroy_qp's return, without first draining the context's async
  // events (what destroy() does for every other test).
  int destroy_undrained() { return ibv_destroy_qp(qp_.release()); }

 private:
  TestQp() = default;
  QpConfig config_;
  PortInfo port_;
  CqPtr own_send_cq_;
  CqPtr own_recv_cq_;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp_cap cap_{};
  uint32_t psn_ = 0;
  QpPtr qp_;  // last: destroyed before the CQs
};

// A process's view of the device: context, port, device attributes, one PD
// and the QPs made with add_qp().
struct Endpoint {
  ContextPtr ctx;
  PortInfo port;
  ibv_device_attr dev{};
  PdPtr pd;
  std::vector<std::unique_ptr<TestQp>> qps;

  static std::unique_ptr<Endpoint> open();
  // Creates a QP (rd_atomic values clamped to the device); nullptr on failure.
  TestQp* add_qp(QpConfig config, ibv_cq* send_cq = nullptr, ibv_cq* recv_cq = nullptr);
  TestQp& qp(size_t i = 0) { return *qps.at(i); }
};

// Both sides call this with their QPs (same count on both sides): exchanges
// QpInfo over `link` and moves every QP to RTS; both sides are in RTS when it
// returns.
[[nodiscard]] bool connect_over(Link& link, const std::vector<TestQp*>& qps);
// Both sides call this: creates `count` QPs with `config` (this side's),
// exchanges QpInfo over `link`, and moves every QP to RTS.
[[nodiscard]] bool connect_qps(Link& link, Endpoint& ep, const QpConfig& config, int count = 1);
// open() + connect_qps(); nullptr on failure.
std::unique_ptr<Endpoint> connected_endpoint(Link& link, const QpConfig& config = {},
                                             int count = 1);
// Connects two QPs of this process to each other.
[[nodiscard]] bool connect_local(TestQp& a, TestQp& b);
// Sends ours, receives theirs.
[[nodiscard]] bool exchange(Link& link, const RemoteBuf& mine, RemoteBuf* theirs);
[[nodiscard]] bool exchange(Link& link, const std::vector<RemoteBuf>& mine,
                            std::vector<RemoteBuf>* theirs);

// ---- work requests ------------------------------------------------------------
// An ibv_send_wr with its own gather list; get() fixes sg_list/num_sge.
struct Wr {
  ibv_send_wr wr{};
  std::vector<ibv_sge> sges;
  ibv_send_wr* get();
};
Wr wr_send(uint64_t id, std::vector<ibv_sge> sges, unsigned flags = IBV_SEND_SIGNALED);
Wr wr_send_imm(uint64_t id, std::vector<ibv_sge> sges, uint32_t imm_host,
               unsigned flags = IBV_SEND_SIGNALED);
Wr wr_write(uint64_t id, std::vector<ibv_sge> sges, const RemoteBuf& dst,
            unsigned flags = IBV_SEND_SIGNALED);
Wr wr_write_imm(uint64_t id, std::vector<ibv_sge> sges, const RemoteBuf& dst, uint32_t imm_host,
                unsigned flags = IBV_SEND_SIGNALED);
Wr wr_read(uint64_t id, std::vector<ibv_sge> sges, const RemoteBuf& src,
           unsigned flags = IBV_SEND_SIGNALED);
Wr wr_cas(uint64_t id, ibv_sge local8, const RemoteBuf& dst, uint64_t compare, uint64_t swap,
          unsigned flags = IBV_SEND_SIGNALED);
Wr wr_faa(uint64_t id, ibv_sge local8, const RemoteBuf& dst, uint64_t add,
          unsigned flags = IBV_SEND_SIGNALED);
// IBA 1.5 ATOMIC WRITE: the eight bytes `data8` names, stored at `dst` as one
// (the remote address and key in wr.rdma, as rdma-core's rxe takes them).
Wr wr_atomic_write(uint64_t id, ibv_sge data8, const RemoteBuf& dst, unsigned flags = IBV_SEND_SIGNALED);

// The completion opcode a successful send-queue WR of `op` reports.
ibv_wc_opcode send_wc_opcode(ibv_wr_opcode op);

// Chains `wrs` in order and posts them; on failure reports the rc and which WR
// bad_wr named.
[[nodiscard]] bool post(TestQp& qp, const std::vector<Wr*>& wrs);
[[nodiscard]] bool post(TestQp& qp, Wr& wr);
[[nodiscard]] bool post_recv(TestQp& qp, uint64_t id, std::vector<ibv_sge> sges);

// ---- completions --------------------------------------------------------------
// Collects exactly n completions (appended to *out) within `timeout`.
[[nodiscard]] bool poll_n(ibv_cq* cq, size_t n, std::vector<ibv_wc>* out,
                          Millis timeout = scaled(kOpTimeout), std::string_view what = "");
[[nodiscard]] bool poll_one(ibv_cq* cq, ibv_wc* out, Millis timeout = scaled(kOpTimeout),
                            std::string_view what = "");
// Fails if any completion arrives within `quiet`.
[[nodiscard]] bool expect_no_completion(ibv_cq* cq, Millis quiet, std::string_view what);

struct WcExpect {
  uint64_t wr_id = 0;
  ibv_wc_status status = IBV_WC_SUCCESS;
  std::optional<ibv_wc_opcode> opcode;
  std::optional<uint32_t> byte_len;
  std::optional<uint32_t> qp_num;
  std::optional<uint32_t> imm;  // host order: IBV_WC_WITH_IMM set, imm_data == htonl(imm)
  bool no_imm = false;          // IBV_WC_WITH_IMM clear
  std::optional<uint32_t> src_qp;  // UD only (ibv_poll_cq(3): src_qp valid only for UD)
};
// EXPECTs every given field; returns true if all matched. Fields other than
// wr_id, status and qp_num are only checked on successful completions
// (ibv_poll_cq(3)).
[[nodiscard]] bool check_wc(const ibv_wc& wc, const WcExpect& want);

// Posts `wr` (signalled) and waits for its successful completion on the send
// CQ, checking wr_id, opcode and qp_num.
[[nodiscard]] bool run_wr(TestQp& qp, Wr& wr, Millis timeout = scaled(kOpTimeout));
// Posts `wr` and waits for its completion, expecting `status`.
[[nodiscard]] bool run_wr_expect(TestQp& qp, Wr& wr, ibv_wc_status status,
                                 Millis timeout = scaled(kOpTimeout), ibv_wc* out = nullptr);

// After an error: a new WR posted to the send queue (and one to the receive
// queue) is accepted and completes with IBV_WC_WR_FLUSH_ERR (IBA 10.3.1, QP
// states: in Error, posted WRs are completed with "flushed" status).
[[nodiscard]] bool expect_flushes_new_work(TestQp& qp, ibv_sge send_sge, ibv_sge recv_sge);

}  // namespace softverbs::integration
