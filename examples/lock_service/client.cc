// lock_service client: connects one QP to the server and runs its critical
// sections (README.md: the round, and why the release carries the fence).
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "exchange.h"
#include "node.h"
#include "roles.h"

namespace lock_service {
namespace {

// Where the client's own page receives what the operations return, and
// holds what the WRITE sends.
constexpr uint64_t kAcquireResult = 0;
constexpr uint64_t kEnterResult = 8;
constexpr uint64_t kCounterRead = 16;
constexpr uint64_t kCounterNext = 24;
constexpr uint64_t kExitResult = 32;
constexpr uint64_t kReleaseResult = 40;

enum WrId : uint64_t { kAcquire = 1, kEnter, kRead, kWrite, kExit, kRelease, kUcAtomic };

uint64_t load(const uint8_t* page, uint64_t offset) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(page + offset), __ATOMIC_ACQUIRE);
}

// One WR with one 8-byte SGE in the client's page, aimed at `remote` on the
// server's page. The WRs are built once; the round only posts them.
struct Wr {
  ibv_sge sge = {};
  ibv_send_wr wr = {};

  void init(const Node& node, WrId id, ibv_wr_opcode op, uint64_t local, const Welcome& server, uint64_t remote,
            unsigned flags) {
    sge = {reinterpret_cast<uintptr_t>(node.page() + local), 8, node.lkey()};
    wr.wr_id = id;
    wr.opcode = op;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = flags;
    if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = server.addr + remote;
      wr.wr.atomic.rkey = server.rkey;
    } else {
      wr.wr.rdma.remote_addr = server.addr + remote;
      wr.wr.rdma.rkey = server.rkey;
    }
  }
};

class Client {
 public:
  Client(const Options& o, uint32_t id, Node* node, ibv_qp* qp, const Welcome& server)
      : o_(o), id_(id), node_(node), qp_(qp) {
    acquire_.init(*node, kAcquire, IBV_WR_ATOMIC_CMP_AND_SWP, kAcquireResult, server, kLockOffset, IBV_SEND_SIGNALED);
    acquire_.wr.wr.atomic.compare_add = 0;
    acquire_.wr.wr.atomic.swap = id;
    // Entry: count ourselves in, then read the counter.
    enter_.init(*node, kEnter, IBV_WR_ATOMIC_FETCH_AND_ADD, kEnterResult, server, kHoldersOffset, IBV_SEND_SIGNALED);
    enter_.wr.wr.atomic.compare_add = 1;
    read_.init(*node, kRead, IBV_WR_RDMA_READ, kCounterRead, server, kCounterOffset, IBV_SEND_SIGNALED);
    enter_.wr.next = &read_.wr;
    // Exit: write the counter, count ourselves out, release.
    write_.init(*node, kWrite, IBV_WR_RDMA_WRITE, kCounterNext, server, kCounterOffset, 0);
    exit_.init(*node, kExit, IBV_WR_ATOMIC_FETCH_AND_ADD, kExitResult, server, kHoldersOffset, IBV_SEND_SIGNALED);
    exit_.wr.wr.atomic.compare_add = ~uint64_t{0};  // -1
    release_.init(*node, kRelease, IBV_WR_ATOMIC_CMP_AND_SWP, kReleaseResult, server, kLockOffset,
                  IBV_SEND_SIGNALED | (o.fence ? IBV_SEND_FENCE : 0));
    release_.wr.wr.atomic.compare_add = id;
    release_.wr.wr.atomic.swap = 0;
    write_.wr.next = &exit_.wr;
    exit_.wr.next = &release_.wr;
  }

  // The critical sections; fills `r` (and r.error on failure).
  void run(Clock::time_point deadline, Report* r) {
    std::vector<uint64_t> rounds;
    rounds.reserve(o_.iterations);
    std::string error;
    uint8_t* page = node_->page();
    for (uint64_t i = 0; i < o_.iterations && error.empty(); ++i) {
      const Clock::time_point start = Clock::now();
      // Acquire: 0 -> our id, until the CAS finds the lock free.
      for (;;) {
        if (!post(&acquire_.wr, &error) || !node_->wait(1, deadline, &error)) break;
        if (load(page, kAcquireResult) == 0) break;
        ++r->cas_retries;
        if (Clock::now() > deadline) {
          error = "the time limit ran out while taking the lock";
          break;
        }
        sched_yield();  // the holder may be waiting for this core
      }
      if (!error.empty()) break;
      if (!post(&enter_.wr, &error) || !node_->wait(2, deadline, &error)) break;
      if (load(page, kEnterResult) != 0) ++r->violations;  // someone else is inside
      *reinterpret_cast<uint64_t*>(page + kCounterNext) = load(page, kCounterRead) + 1;
      if (!post(&write_.wr, &error) || !node_->wait(2, deadline, &error)) break;
      if (load(page, kExitResult) != 1) ++r->violations;     // someone came in with us
      if (load(page, kReleaseResult) != id_) ++r->violations; // the lock was not ours
      const Clock::time_point end = Clock::now();
      rounds.push_back(
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count()));
      if (end > deadline) error = "the time limit ran out after " + std::to_string(rounds.size()) + " rounds";
    }
    r->rounds = rounds.size();
    if (!rounds.empty()) {
      std::sort(rounds.begin(), rounds.end());
      r->median_ns = rounds[rounds.size() / 2];
      r->p99_ns = rounds[std::min(rounds.size() - 1, rounds.size() * 99 / 100)];
    }
    if (!error.empty()) std::snprintf(r->error, sizeof r->error, "%s", error.c_str());
  }

  // --uc: an atomic on a UC QP must be refused when posted (IBA Table 37: UC
  // carries no atomics), with EINVAL and bad_wr naming it.
  void refuse_on_uc(Report* r) {
    for (Wr* w : {&acquire_, &exit_}) {
      ibv_send_wr* bad = nullptr;
      ibv_send_wr one = w->wr;
      one.next = nullptr;
      const int rc = ibv_post_send(qp_, &one, &bad);
      if (w == &acquire_) {
        r->uc_post_rc = rc;
        r->uc_bad_wr_is_atomic = bad == &one;
      } else if (rc != r->uc_post_rc || bad != &one) {
        r->uc_bad_wr_is_atomic = 0;
      }
    }
  }

 private:
  bool post(ibv_send_wr* wr, std::string* error) {
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_, wr, &bad); rc != 0) {
      *error = "ibv_post_send(WR " + std::to_string(bad != nullptr ? bad->wr_id : 0) + "): " + std::strerror(rc);
      return false;
    }
    return true;
  }

  const Options& o_;
  const uint32_t id_;
  Node* node_;
  ibv_qp* qp_;
  Wr acquire_, enter_, read_, write_, exit_, release_;
};

}  // namespace

int run_client(const Options& o, uint32_t id, int fd) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
  const int timeout_ms = o.timeout_s * 1000;
  Report report;
  std::string error;
  std::unique_ptr<Node> node = Node::open(device_name(o), &error);
  ibv_qp* qp = node != nullptr ? node->create_qp(o.uc ? IBV_QPT_UC : IBV_QPT_RC, &error) : nullptr;
  Welcome server;
  if (qp != nullptr) {
    Hello hello;
    hello.qp = node->address(qp);
    hello.client_id = id;
    if (!send_msg(fd, hello) || !recv_msg(fd, &server, timeout_ms))
      error = std::string("exchange with the server: ") + std::strerror(errno);
    else if (!node->connect(qp, server.qp, &error))
      qp = nullptr;
  }
  if (!error.empty()) {
    std::snprintf(report.error, sizeof report.error, "%s", error.c_str());
  } else {
    Client client(o, id, node.get(), qp, server);
    if (o.uc)
      client.refuse_on_uc(&report);
    else
      client.run(deadline, &report);
  }
  if (report.error[0] != '\0') std::fprintf(stderr, "lock_service client %u: %s\n", id, report.error);
  // The server reads the verdict off the memory only when every client is
  // done; the QP must live until it says so.
  Bye bye;
  const bool told = send_msg(fd, report) && recv_msg(fd, &bye, timeout_ms);
  if (!told) std::fprintf(stderr, "lock_service client %u: no verdict from the server: %s\n", id, std::strerror(errno));
  return told && report.error[0] == '\0' ? 0 : 1;
}

}  // namespace lock_service
