#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "pattern.h"

namespace softverbs::integration {
namespace {

std::string gid_text(const uint8_t gid[16]) {
  char text[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET6, gid, text, sizeof text);
  return text;
}

std::string hex(uint64_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << v;
  return out.str();
}

uint32_t next_psn() {
  static uint32_t counter = 0;
  ++counter;
  return (static_cast<uint32_t>(::getpid()) * 2654435761u + counter * 40503u) & 0xFFFFFF;
}

}  // namespace

// ---- names ------------------------------------------------------------------

std::string status_name(int status) {
  switch (status) {
#define SV_CASE(x) \
  case x:          \
    return #x;
    SV_CASE(IBV_WC_SUCCESS)
    SV_CASE(IBV_WC_LOC_LEN_ERR)
    SV_CASE(IBV_WC_LOC_QP_OP_ERR)
    SV_CASE(IBV_WC_LOC_EEC_OP_ERR)
    SV_CASE(IBV_WC_LOC_PROT_ERR)
    SV_CASE(IBV_WC_WR_FLUSH_ERR)
    SV_CASE(IBV_WC_MW_BIND_ERR)
    SV_CASE(IBV_WC_BAD_RESP_ERR)
    SV_CASE(IBV_WC_LOC_ACCESS_ERR)
    SV_CASE(IBV_WC_REM_INV_REQ_ERR)
    SV_CASE(IBV_WC_REM_ACCESS_ERR)
    SV_CASE(IBV_WC_REM_OP_ERR)
    SV_CASE(IBV_WC_RETRY_EXC_ERR)
    SV_CASE(IBV_WC_RNR_RETRY_EXC_ERR)
    SV_CASE(IBV_WC_LOC_RDD_VIOL_ERR)
    SV_CASE(IBV_WC_REM_INV_RD_REQ_ERR)
    SV_CASE(IBV_WC_REM_ABORT_ERR)
    SV_CASE(IBV_WC_INV_EECN_ERR)
    SV_CASE(IBV_WC_INV_EEC_STATE_ERR)
    SV_CASE(IBV_WC_FATAL_ERR)
    SV_CASE(IBV_WC_RESP_TIMEOUT_ERR)
    SV_CASE(IBV_WC_GENERAL_ERR)
    default:
      return "status " + std::to_string(status);
  }
}

std::string wc_opcode_name(int opcode) {
  switch (opcode) {
    SV_CASE(IBV_WC_SEND)
    SV_CASE(IBV_WC_RDMA_WRITE)
    SV_CASE(IBV_WC_RDMA_READ)
    SV_CASE(IBV_WC_COMP_SWAP)
    SV_CASE(IBV_WC_FETCH_ADD)
    SV_CASE(IBV_WC_BIND_MW)
    SV_CASE(IBV_WC_LOCAL_INV)
    SV_CASE(IBV_WC_ATOMIC_WRITE)
    SV_CASE(IBV_WC_RECV)
    SV_CASE(IBV_WC_RECV_RDMA_WITH_IMM)
    default:
      return "opcode " + std::to_string(opcode);
  }
}

std::string qp_state_name(int state) {
  switch (state) {
    SV_CASE(IBV_QPS_RESET)
    SV_CASE(IBV_QPS_INIT)
    SV_CASE(IBV_QPS_RTR)
    SV_CASE(IBV_QPS_RTS)
    SV_CASE(IBV_QPS_SQD)
    SV_CASE(IBV_QPS_SQE)
    SV_CASE(IBV_QPS_ERR)
    SV_CASE(IBV_QPS_UNKNOWN)
#undef SV_CASE
    default:
      return "state " + std::to_string(state);
  }
}

std::string describe(const ibv_wc& wc) {
  std::ostringstream out;
  out << "{wr_id=" << wc.wr_id << " status=" << status_name(wc.status)
      << " opcode=" << wc_opcode_name(wc.opcode) << " byte_len=" << wc.byte_len
      << " qp_num=" << wc.qp_num << " src_qp=" << wc.src_qp << " wc_flags=" << hex(wc.wc_flags)
      << " imm_data(be)=" << hex(ntohl(wc.imm_data)) << " vendor_err=" << wc.vendor_err << "}";
  return out.str();
}

std::string errno_name(int err) {
  const char* name = nullptr;
  switch (err) {
    case 0: name = "0"; break;
    case EINVAL: name = "EINVAL"; break;
    case ENOMEM: name = "ENOMEM"; break;
    case EBUSY: name = "EBUSY"; break;
    case EPERM: name = "EPERM"; break;
    case EACCES: name = "EACCES"; break;
    case EFAULT: name = "EFAULT"; break;
    case ENOSYS: name = "ENOSYS"; break;
    case EOPNOTSUPP: name = "EOPNOTSUPP"; break;
    case ENODEV: name = "ENODEV"; break;
    case ENOENT: name = "ENOENT"; break;
    case EAGAIN: name = "EAGAIN"; break;
    case EBADF: name = "EBADF"; break;
    case ENOSPC: name = "ENOSPC"; break;
    case ERANGE: name = "ERANGE"; break;
    default: break;
  }
  std::string out = name != nullptr ? name : "errno " + std::to_string(err);
  if (err != 0) out += std::string(" (") + std::strerror(err) + ")";
  return out;
}

double rnr_timer_us(uint8_t code) {
  static constexpr double kTable[32] = {
      655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
      480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
      20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return kTable[code & 31];
}

double ack_timeout_us(uint8_t timeout) { return 4.096 * static_cast<double>(1ull << (timeout & 31)); }

// ---- RAII -------------------------------------------------------------------

void CloseDevice::operator()(ibv_context* p) const {
  if (p != nullptr) {
    EXPECT_EQ(0, ibv_close_device(p)) << "ibv_close_device";
  }
}
void DeallocPd::operator()(ibv_pd* p) const {
  if (p != nullptr) {
    EXPECT_EQ(0, ibv_dealloc_pd(p)) << "ibv_dealloc_pd (a resource still uses it?)";
  }
}
void DestroyCq::operator()(ibv_cq* p) const {
  if (p != nullptr) {
    EXPECT_EQ(0, ibv_destroy_cq(p)) << "ibv_destroy_cq";
  }
}
void DestroyQp::operator()(ibv_qp* p) const {
  if (p != nullptr) {
    EXPECT_EQ(0, ibv_destroy_qp(p)) << "ibv_destroy_qp";
  }
}
void DeregMr::operator()(ibv_mr* p) const {
  if (p != nullptr) {
    EXPECT_EQ(0, ibv_dereg_mr(p)) << "ibv_dereg_mr";
  }
}
void DestroyChannel::operator()(ibv_comp_channel* p) const {
  if (p != nullptr) {
    EXPECT_EQ(0, ibv_destroy_comp_channel(p)) << "ibv_destroy_comp_channel";
  }
}

const char* device_name() {
  const char* roce = std::getenv("SOFTVERBS_ROCE_ADDR");
  return roce != nullptr && *roce != '\0' ? "softverbs_roce0" : "softverbs0";
}

ContextPtr open_device() {
  int num = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (list == nullptr) {
    ADD_FAILURE() << "no " << device_name() << " device: ibv_get_device_list failed with "
                  << errno_name(errno);
    return nullptr;
  }
  ibv_device* found = nullptr;
  std::string names;
  for (int i = 0; i < num && list[i] != nullptr; ++i) {
    const char* name = ibv_get_device_name(list[i]);
    names += std::string(names.empty() ? "" : ", ") + (name != nullptr ? name : "(null)");
    if (name != nullptr && std::strcmp(name, device_name()) == 0) found = list[i];
  }
  ContextPtr ctx;
  if (found == nullptr) {
    ADD_FAILURE() << "no " << device_name() << " device among " << num << " ("
                  << (names.empty() ? "none" : names) << ")";
  } else {
    errno = 0;
    ctx.reset(ibv_open_device(found));
    if (!ctx) {
      ADD_FAILURE() << "ibv_open_device(" << device_name() << "): " << errno_name(errno);
    }
  }
  ibv_free_device_list(list);
  return ctx;
}

int drain_async_events(ibv_context* ctx) {
  const int flags = ::fcntl(ctx->async_fd, F_GETFL);
  if (flags < 0) return 0;
  if ((flags & O_NONBLOCK) == 0) ::fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
  int n = 0;
  ibv_async_event ev{};
  while (ibv_get_async_event(ctx, &ev) == 0) {
    note("acking async event %d before a destroy", static_cast<int>(ev.event_type));
    ibv_ack_async_event(&ev);
    ++n;
  }
  if ((flags & O_NONBLOCK) == 0) ::fcntl(ctx->async_fd, F_SETFL, flags);
  return n;
}

CqPtr create_cq(ibv_context* ctx, int cqe, ibv_comp_channel* channel, void* cq_context) {
  errno = 0;
  CqPtr cq(ibv_create_cq(ctx, cqe, cq_context, channel, 0));
  if (!cq) {
    ADD_FAILURE() << "ibv_create_cq(" << cqe << "): " << errno_name(errno);
  }
  return cq;
}

bool query_port_info(ibv_context* ctx, PortInfo* out) {
  int rc = ibv_query_port(ctx, kPort, &out->attr);
  if (rc != 0) {
    ADD_FAILURE() << "ibv_query_port: " << errno_name(rc);
    return false;
  }
  rc = ibv_query_gid(ctx, kPort, 0, &out->gid);
  if (rc != 0) {
    ADD_FAILURE() << "ibv_query_gid(0): " << errno_name(rc < 0 ? errno : rc);
    return false;
  }
  return true;
}

bool is_local_gid(ibv_context* ctx, const PortInfo& port, const uint8_t gid[16]) {
  for (int i = 0; i < port.attr.gid_tbl_len; ++i) {
    ibv_gid mine{};
    const int rc = ibv_query_gid(ctx, kPort, i, &mine);
    if (rc != 0) {
      if (i > 0) break;  // a table shorter than gid_tbl_len ends here
      ADD_FAILURE() << "ibv_query_gid(0): " << errno_name(rc < 0 ? errno : rc);
      return true;
    }
    if (std::memcmp(mine.raw, gid, 16) == 0) return true;
  }
  return false;
}

// ---- memory -----------------------------------------------------------------

void Buffer::Free::operator()(uint8_t* p) const { std::free(p); }

Buffer::Buffer(size_t size) : size_(size) {
  const size_t bytes = round_up(std::max<size_t>(size, 1), 4096);
  data_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)));
  if (data_) std::memset(data_.get(), 0, bytes);
}

std::unique_ptr<Region> Region::create(ibv_pd* pd, size_t size, int access) {
  std::unique_ptr<Region> r(new Region(size));
  if (r->data() == nullptr) {
    ADD_FAILURE() << "out of memory for a " << size << "-byte buffer";
    return nullptr;
  }
  std::memset(r->data(), kGuardByte, size);
  errno = 0;
  r->mr_.reset(ibv_reg_mr(pd, r->data(), size, access));
  if (!r->mr_) {
    ADD_FAILURE() << "ibv_reg_mr(" << size << " bytes, access " << hex(access)
                  << "): " << errno_name(errno);
    return nullptr;
  }
  return r;
}

uint64_t Region::addr(size_t offset) const { return reinterpret_cast<uintptr_t>(data()) + offset; }

ibv_sge Region::sge(size_t offset, size_t len) const {
  return ibv_sge{addr(offset), static_cast<uint32_t>(len), mr_ ? mr_->lkey : 0};
}

RemoteBuf Region::remote(size_t offset) const {
  return RemoteBuf{addr(offset), mr_ ? mr_->rkey : 0, 0, size() - offset};
}

bool Region::deregister() {
  ibv_mr* mr = mr_.release();
  const int rc = ibv_dereg_mr(mr);
  EXPECT_EQ(0, rc) << "ibv_dereg_mr: " << errno_name(rc);
  return rc == 0;
}

// ---- TestQp -----------------------------------------------------------------

std::unique_ptr<TestQp> TestQp::create(ibv_context* ctx, ibv_pd* pd, const PortInfo& port,
                                       const QpConfig& config, ibv_cq* send_cq,
                                       ibv_cq* recv_cq) {
  std::unique_ptr<TestQp> q(new TestQp());
  q->config_ = config;
  q->port_ = port;
  q->psn_ = config.psn.value_or(next_psn()) & 0xFFFFFF;
  if (send_cq == nullptr) {
    q->own_send_cq_ = create_cq(ctx, config.cq_depth);
    if (!q->own_send_cq_) return nullptr;
    send_cq = q->own_send_cq_.get();
  }
  if (recv_cq == nullptr) {
    q->own_recv_cq_ = create_cq(ctx, config.cq_depth);
    if (!q->own_recv_cq_) return nullptr;
    recv_cq = q->own_recv_cq_.get();
  }
  q->send_cq_ = send_cq;
  q->recv_cq_ = recv_cq;

  ibv_qp_init_attr init{};
  init.qp_context = q.get();
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.srq = config.srq;
  init.cap.max_send_wr = config.max_send_wr;
  init.cap.max_recv_wr = config.max_recv_wr;
  init.cap.max_send_sge = config.max_send_sge;
  init.cap.max_recv_sge = config.max_recv_sge;
  init.cap.max_inline_data = config.max_inline_data;
  init.qp_type = config.qp_type;
  init.sq_sig_all = config.sq_sig_all ? 1 : 0;
  errno = 0;
  if (config.send_ops_flags != 0) {
    ibv_qp_init_attr_ex ex{};
    ex.qp_context = init.qp_context;
    ex.send_cq = init.send_cq;
    ex.recv_cq = init.recv_cq;
    ex.srq = init.srq;
    ex.cap = init.cap;
    ex.qp_type = init.qp_type;
    ex.sq_sig_all = init.sq_sig_all;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ex.pd = pd;
    ex.send_ops_flags = config.send_ops_flags;
    q->qp_.reset(ibv_create_qp_ex(ctx, &ex));
    init.cap = ex.cap;
  } else {
    q->qp_.reset(ibv_create_qp(pd, &init));
  }
  if (!q->qp_) {
    ADD_FAILURE() << "ibv_create_qp(send_wr " << config.max_send_wr << ", recv_wr "
                  << config.max_recv_wr << ", sge " << config.max_send_sge << "/"
                  << config.max_recv_sge << ", inline " << config.max_inline_data
                  << "): " << errno_name(errno);
    return nullptr;
  }
  // ibv_create_qp(3): cap is updated with the actual values, >= the request.
  q->cap_ = init.cap;
  EXPECT_GE(q->cap_.max_send_wr, config.max_send_wr);
  EXPECT_GE(q->cap_.max_recv_wr, config.srq != nullptr ? 0 : config.max_recv_wr);
  EXPECT_GE(q->cap_.max_send_sge, config.max_send_sge);
  EXPECT_GE(q->cap_.max_inline_data, config.max_inline_data);
  return q;
}

QpInfo TestQp::info() const {
  QpInfo info;
  info.qpn = qpn();
  info.psn = psn_;
  info.lid = port_.attr.lid;
  info.port = kPort;
  std::memcpy(info.gid, port_.gid.raw, sizeof info.gid);
  return info;
}

bool TestQp::to_init() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = kPort;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (config_.qp_type == IBV_QPT_UD) {
    attr.qkey = config_.qkey;
    mask |= IBV_QP_QKEY;
  } else {
    attr.qp_access_flags = static_cast<unsigned>(config_.access);
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  const int rc = ibv_modify_qp(get(), &attr, mask);
  EXPECT_EQ(0, rc) << "RESET->INIT: " << errno_name(rc);
  return rc == 0;
}

bool TestQp::to_rtr(const QpInfo& remote) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  int mask = IBV_QP_STATE;
  if (config_.qp_type != IBV_QPT_UD) {
    attr.path_mtu = config_.path_mtu;
    attr.dest_qp_num = remote.qpn;
    attr.rq_psn = remote.psn;
    attr.ah_attr.dlid = port_.roce() ? 0 : remote.lid;
    attr.ah_attr.sl = 0;
    attr.ah_attr.src_path_bits = 0;
    attr.ah_attr.port_num = kPort;
    if (config_.use_grh || port_.roce()) {
      attr.ah_attr.is_global = 1;
      std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof remote.gid);
      attr.ah_attr.grh.sgid_index = 0;
      attr.ah_attr.grh.hop_limit = 1;
    }
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  }
  if (config_.qp_type == IBV_QPT_RC) {
    attr.max_dest_rd_atomic = config_.max_dest_rd_atomic;
    attr.min_rnr_timer = config_.min_rnr_timer;
    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  const int rc = ibv_modify_qp(get(), &attr, mask);
  EXPECT_EQ(0, rc) << "INIT->RTR: " << errno_name(rc);
  return rc == 0;
}

bool TestQp::to_rts() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn_;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (config_.qp_type == IBV_QPT_RC) {
    attr.timeout = config_.timeout;
    attr.retry_cnt = config_.retry_cnt;
    attr.rnr_retry = config_.rnr_retry;
    attr.max_rd_atomic = config_.max_rd_atomic;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  const int rc = ibv_modify_qp(get(), &attr, mask);
  EXPECT_EQ(0, rc) << "RTR->RTS: " << errno_name(rc);
  return rc == 0;
}

bool TestQp::connect(const QpInfo& remote) { return to_init() && to_rtr(remote) && to_rts(); }

bool TestQp::to_state(ibv_qp_state state) {
  ibv_qp_attr attr{};
  attr.qp_state = state;
  const int rc = ibv_modify_qp(get(), &attr, IBV_QP_STATE);
  EXPECT_EQ(0, rc) << "modify to " << qp_state_name(state) << ": " << errno_name(rc);
  return rc == 0;
}

ibv_qp_state TestQp::state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  const int rc = ibv_query_qp(get(), &attr, IBV_QP_STATE, &init);
  if (rc != 0) {
    ADD_FAILURE() << "ibv_query_qp: " << errno_name(rc);
    return IBV_QPS_UNKNOWN;
  }
  return attr.qp_state;
}

bool TestQp::wait_state(ibv_qp_state want, Millis timeout) const {
  const Deadline deadline(timeout);
  ibv_qp_state got;
  while ((got = state()) != want) {
    if (got == IBV_QPS_UNKNOWN || deadline.expired()) {
      ADD_FAILURE() << "QP " << qpn() << " is in " << qp_state_name(got) << ", expected "
                    << qp_state_name(want) << " within " << timeout.count() << " ms";
      return false;
    }
    ::usleep(1000);
  }
  return true;
}

void TestQp::destroy() {
  if (qp_) drain_async_events(qp_->context);
  qp_.reset();
}

TestQp::~TestQp() { destroy(); }

// ---- Endpoint and connections ---------------------------------------------------

std::unique_ptr<Endpoint> Endpoint::open() {
  auto ep = std::make_unique<Endpoint>();
  ep->ctx = open_device();
  if (!ep->ctx) return nullptr;
  const int rc = ibv_query_device(ep->ctx.get(), &ep->dev);
  if (rc != 0) {
    ADD_FAILURE() << "ibv_query_device: " << errno_name(rc);
    return nullptr;
  }
  if (!query_port_info(ep->ctx.get(), &ep->port)) return nullptr;
  errno = 0;
  ep->pd.reset(ibv_alloc_pd(ep->ctx.get()));
  if (!ep->pd) {
    ADD_FAILURE() << "ibv_alloc_pd: " << errno_name(errno);
    return nullptr;
  }
  return ep;
}

TestQp* Endpoint::add_qp(QpConfig config, ibv_cq* send_cq, ibv_cq* recv_cq) {
  config.max_rd_atomic = static_cast<uint8_t>(
      std::min<int>(config.max_rd_atomic, std::max(dev.max_qp_init_rd_atom, 1)));
  config.max_dest_rd_atomic = static_cast<uint8_t>(
      std::min<int>(config.max_dest_rd_atomic, std::max(dev.max_qp_rd_atom, 1)));
  auto qp = TestQp::create(ctx.get(), pd.get(), port, config, send_cq, recv_cq);
  if (!qp) return nullptr;
  qps.push_back(std::move(qp));
  return qps.back().get();
}

bool connect_over(Link& link, const std::vector<TestQp*>& qps) {
  std::vector<QpInfo> mine;
  for (TestQp* qp : qps) mine.push_back(qp->info());
  std::vector<QpInfo> theirs;
  if (!link.send_vector(mine) || !link.recv_vector(&theirs, Deadline::op(), "the peer's QpInfo"))
    return false;
  if (theirs.size() != mine.size()) {
    ADD_FAILURE() << "peer offers " << theirs.size() << " QPs, we have " << mine.size();
    return false;
  }
  for (size_t i = 0; i < qps.size(); ++i) {
    const PortInfo& port = qps[i]->port();
    if (port.roce() && is_local_gid(qps[i]->get()->context, port, theirs[i].gid)) {
      ADD_FAILURE() << "the peer's GID " << gid_text(theirs[i].gid)
                    << " is one of this port's: its QP would take the host fabric, not UDP"
                       " (are both processes on one SOFTVERBS_ROCE_ADDR?)";
      return false;
    }
    if (!qps[i]->connect(theirs[i])) return false;
  }
  // Both sides must be in RTR before either sends: meet once more.
  return link.signal("connected") && link.wait("connected");
}

bool connect_qps(Link& link, Endpoint& ep, const QpConfig& config, int count) {
  std::vector<TestQp*> added;
  for (int i = 0; i < count; ++i) {
    TestQp* qp = ep.add_qp(config);
    if (qp == nullptr) return false;
    added.push_back(qp);
  }
  return connect_over(link, added);
}

std::unique_ptr<Endpoint> connected_endpoint(Link& link, const QpConfig& config, int count) {
  auto ep = Endpoint::open();
  if (!ep || !connect_qps(link, *ep, config, count)) return nullptr;
  return ep;
}

bool connect_local(TestQp& a, TestQp& b) { return a.connect(b.info()) && b.connect(a.info()); }

bool exchange(Link& link, const RemoteBuf& mine, RemoteBuf* theirs) {
  return link.send(mine) && link.recv(theirs, Deadline::op(), "the peer's RemoteBuf");
}

bool exchange(Link& link, const std::vector<RemoteBuf>& mine, std::vector<RemoteBuf>* theirs) {
  return link.send_vector(mine) && link.recv_vector(theirs, Deadline::op(), "the peer's RemoteBufs");
}

// ---- work requests ------------------------------------------------------------

ibv_send_wr* Wr::get() {
  wr.sg_list = sges.empty() ? nullptr : sges.data();
  wr.num_sge = static_cast<int>(sges.size());
  return &wr;
}

namespace {
Wr make_wr(uint64_t id, ibv_wr_opcode op, std::vector<ibv_sge> sges, unsigned flags) {
  Wr w;
  w.sges = std::move(sges);
  w.wr.wr_id = id;
  w.wr.opcode = op;
  w.wr.send_flags = flags;
  w.get();
  return w;
}
}  // namespace

Wr wr_send(uint64_t id, std::vector<ibv_sge> sges, unsigned flags) {
  return make_wr(id, IBV_WR_SEND, std::move(sges), flags);
}

Wr wr_send_imm(uint64_t id, std::vector<ibv_sge> sges, uint32_t imm_host, unsigned flags) {
  Wr w = make_wr(id, IBV_WR_SEND_WITH_IMM, std::move(sges), flags);
  w.wr.imm_data = htonl(imm_host);
  return w;
}

Wr wr_write(uint64_t id, std::vector<ibv_sge> sges, const RemoteBuf& dst, unsigned flags) {
  Wr w = make_wr(id, IBV_WR_RDMA_WRITE, std::move(sges), flags);
  w.wr.wr.rdma.remote_addr = dst.addr;
  w.wr.wr.rdma.rkey = dst.rkey;
  return w;
}

Wr wr_write_imm(uint64_t id, std::vector<ibv_sge> sges, const RemoteBuf& dst, uint32_t imm_host,
                unsigned flags) {
  Wr w = wr_write(id, std::move(sges), dst, flags);
  w.wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w.wr.imm_data = htonl(imm_host);
  return w;
}

Wr wr_read(uint64_t id, std::vector<ibv_sge> sges, const RemoteBuf& src, unsigned flags) {
  Wr w = make_wr(id, IBV_WR_RDMA_READ, std::move(sges), flags);
  w.wr.wr.rdma.remote_addr = src.addr;
  w.wr.wr.rdma.rkey = src.rkey;
  return w;
}

Wr wr_cas(uint64_t id, ibv_sge local8, const RemoteBuf& dst, uint64_t compare, uint64_t swap,
          unsigned flags) {
  Wr w = make_wr(id, IBV_WR_ATOMIC_CMP_AND_SWP, {local8}, flags);
  w.wr.wr.atomic.remote_addr = dst.addr;
  w.wr.wr.atomic.rkey = dst.rkey;
  w.wr.wr.atomic.compare_add = compare;
  w.wr.wr.atomic.swap = swap;
  return w;
}

Wr wr_faa(uint64_t id, ibv_sge local8, const RemoteBuf& dst, uint64_t add, unsigned flags) {
  Wr w = make_wr(id, IBV_WR_ATOMIC_FETCH_AND_ADD, {local8}, flags);
  w.wr.wr.atomic.remote_addr = dst.addr;
  w.wr.wr.atomic.rkey = dst.rkey;
  w.wr.wr.atomic.compare_add = add;
  return w;
}

Wr wr_atomic_write(uint64_t id, ibv_sge data8, const RemoteBuf& dst, unsigned flags) {
  Wr w = make_wr(id, IBV_WR_ATOMIC_WRITE, {data8}, flags);
  w.wr.wr.rdma.remote_addr = dst.addr;
  w.wr.wr.rdma.rkey = dst.rkey;
  return w;
}

ibv_wc_opcode send_wc_opcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_ATOMIC_WRITE:
      return IBV_WC_ATOMIC_WRITE;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return IBV_WC_FETCH_ADD;
    case IBV_WR_BIND_MW:
      return IBV_WC_BIND_MW;
    case IBV_WR_LOCAL_INV:
      return IBV_WC_LOCAL_INV;
    default:
      return IBV_WC_SEND;
  }
}

bool post(TestQp& qp, const std::vector<Wr*>& wrs) {
  if (wrs.empty()) return true;
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i]->get()->next = i + 1 < wrs.size() ? wrs[i + 1]->get() : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp.get(), wrs[0]->get(), &bad);
  for (Wr* w : wrs) w->wr.next = nullptr;
  if (rc != 0) {
    size_t index = wrs.size();
    for (size_t i = 0; i < wrs.size(); ++i)
      if (bad == &wrs[i]->wr) index = i;
    ADD_FAILURE() << "ibv_post_send on QP " << qp.qpn() << ": " << errno_name(rc)
                  << "; bad_wr is WR #" << index << " of " << wrs.size();
    return false;
  }
  return true;
}

bool post(TestQp& qp, Wr& wr) { return post(qp, std::vector<Wr*>{&wr}); }

bool post_recv(TestQp& qp, uint64_t id, std::vector<ibv_sge> sges) {
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = sges.empty() ? nullptr : sges.data();
  wr.num_sge = static_cast<int>(sges.size());
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(qp.get(), &wr, &bad);
  EXPECT_EQ(0, rc) << "ibv_post_recv on QP " << qp.qpn() << ": " << errno_name(rc);
  return rc == 0;
}

// ---- completions --------------------------------------------------------------

bool poll_n(ibv_cq* cq, size_t n, std::vector<ibv_wc>* out, Millis timeout, std::string_view what) {
  const Deadline deadline(timeout);
  size_t got = 0;
  int idle = 0;
  ibv_wc batch[16];
  while (got < n) {
    const int want = static_cast<int>(std::min<size_t>(n - got, 16));
    const int r = ibv_poll_cq(cq, want, batch);
    if (r < 0) {
      ADD_FAILURE() << "ibv_poll_cq returned " << r << " " << what;
      return false;
    }
    if (r > 0) {
      out->insert(out->end(), batch, batch + r);
      got += static_cast<size_t>(r);
      idle = 0;
      continue;
    }
    if (deadline.expired()) {
      ADD_FAILURE() << "timed out after " << timeout.count() << " ms with " << got << " of " << n
                    << " completions " << what
                    << (got > 0 ? "; last: " + describe(out->back()) : std::string());
      return false;
    }
    if (++idle < 200) {
      sched_yield();
    } else {
      ::usleep(idle < 2000 ? 20 : 200);
    }
  }
  return true;
}

bool poll_one(ibv_cq* cq, ibv_wc* out, Millis timeout, std::string_view what) {
  std::vector<ibv_wc> wcs;
  if (!poll_n(cq, 1, &wcs, timeout, what)) return false;
  *out = wcs[0];
  return true;
}

bool expect_no_completion(ibv_cq* cq, Millis quiet, std::string_view what) {
  const Deadline deadline(quiet);
  ibv_wc wc{};
  do {
    const int r = ibv_poll_cq(cq, 1, &wc);
    if (r < 0) {
      ADD_FAILURE() << "ibv_poll_cq returned " << r << " " << what;
      return false;
    }
    if (r > 0) {
      ADD_FAILURE() << "unexpected completion " << what << ": " << describe(wc);
      return false;
    }
    ::usleep(500);
  } while (!deadline.expired());
  return true;
}

bool check_wc(const ibv_wc& wc, const WcExpect& want) {
  const std::string wc_text = describe(wc);
  bool ok = true;
  auto check = [&](bool cond, const char* field) {
    EXPECT_TRUE(cond) << field << " wrong in " << wc_text;
    ok = ok && cond;
  };
  if (wc.status != want.status) {
    ADD_FAILURE() << "status " << status_name(wc.status) << ", expected "
                  << status_name(want.status) << " in " << wc_text;
    ok = false;
  }
  check(wc.wr_id == want.wr_id, "wr_id");
  if (want.qp_num) check(wc.qp_num == *want.qp_num, "qp_num");
  if (wc.status != IBV_WC_SUCCESS || want.status != IBV_WC_SUCCESS) return ok;
  if (want.opcode) {
    if (wc.opcode != *want.opcode) {
      ADD_FAILURE() << "opcode " << wc_opcode_name(wc.opcode) << ", expected "
                    << wc_opcode_name(*want.opcode) << " in " << wc_text;
      ok = false;
    }
  }
  if (want.byte_len) check(wc.byte_len == *want.byte_len, "byte_len");
  if (want.imm) {
    check((wc.wc_flags & IBV_WC_WITH_IMM) != 0, "IBV_WC_WITH_IMM");
    check(wc.imm_data == htonl(*want.imm), "imm_data (network order as posted)");
  }
  if (want.no_imm) check((wc.wc_flags & IBV_WC_WITH_IMM) == 0, "IBV_WC_WITH_IMM (set, no imm sent)");
  if (want.src_qp) check(wc.src_qp == *want.src_qp, "src_qp");
  return ok;
}

bool run_wr(TestQp& qp, Wr& wr, Millis timeout) {
  wr.wr.send_flags |= IBV_SEND_SIGNALED;
  if (!post(qp, wr)) return false;
  ibv_wc wc{};
  if (!poll_one(qp.send_cq(), &wc, timeout, "for a send-queue WR")) return false;
  WcExpect want;
  want.wr_id = wr.wr.wr_id;
  want.opcode = send_wc_opcode(wr.wr.opcode);
  want.qp_num = qp.qpn();
  return check_wc(wc, want);
}

bool run_wr_expect(TestQp& qp, Wr& wr, ibv_wc_status status, Millis timeout, ibv_wc* out) {
  wr.wr.send_flags |= IBV_SEND_SIGNALED;
  if (!post(qp, wr)) return false;
  ibv_wc wc{};
  if (!poll_one(qp.send_cq(), &wc, timeout, "for a send-queue WR")) return false;
  if (out != nullptr) *out = wc;
  WcExpect want;
  want.wr_id = wr.wr.wr_id;
  want.status = status;
  want.qp_num = qp.qpn();
  if (status == IBV_WC_SUCCESS) want.opcode = send_wc_opcode(wr.wr.opcode);
  return check_wc(wc, want);
}

bool expect_flushes_new_work(TestQp& qp, ibv_sge send_sge, ibv_sge recv_sge) {
  constexpr uint64_t kRecvId = 0xF1F1;
  constexpr uint64_t kSendId = 0xF2F2;
  if (!post_recv(qp, kRecvId, {recv_sge})) return false;
  Wr send = wr_send(kSendId, {send_sge});
  if (!post(qp, send)) return false;
  // Older work may still sit in the CQs, flushed as well: look for ours.
  auto find_flushed = [&](ibv_cq* cq, uint64_t id, const char* what) {
    const Deadline deadline(scaled(kOpTimeout));
    for (;;) {
      ibv_wc wc{};
      if (!poll_one(cq, &wc, Millis(deadline.poll_ms()), what)) return false;
      EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status) << what << ": " << describe(wc);
      if (wc.status != IBV_WC_WR_FLUSH_ERR) return false;
      if (wc.wr_id == id) {
        EXPECT_EQ(qp.qpn(), wc.qp_num) << describe(wc);
        return wc.qp_num == qp.qpn();
      }
    }
  };
  const bool recv_ok = find_flushed(qp.recv_cq(), kRecvId, "a receive posted in the Error state");
  const bool send_ok = find_flushed(qp.send_cq(), kSendId, "a send posted in the Error state");
  return recv_ok && send_ok;
}

}  // namespace softverbs::integration
