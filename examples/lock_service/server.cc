// lock_service server: owns the lock word, the occupancy word and the counter
// in its one registered page, connects one QP per client, and once every
// client has reported, reads the verdict off its own memory.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exchange.h"
#include "node.h"
#include "roles.h"

namespace lock_service {
namespace {

uint64_t load(const uint8_t* page, uint64_t offset) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(page + offset), __ATOMIC_ACQUIRE);
}

uint64_t median(std::vector<uint64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Verdict {
  bool pass = false;
  std::string why;
};

Verdict judge_rc(const Options& o, const std::vector<Report>& reports, uint64_t counter, uint64_t holders,
                 uint64_t lock) {
  uint64_t rounds = 0, violations = 0;
  for (const Report& r : reports) {
    rounds += r.rounds;
    violations += r.violations;
  }
  const uint64_t expected = static_cast<uint64_t>(o.clients) * o.iterations;
  if (rounds != expected) return {false, "only " + std::to_string(rounds) + " of " + std::to_string(expected) +
                                             " critical sections ran"};
  if (counter != rounds) return {false, "lost updates: counter " + std::to_string(counter) + " after " +
                                            std::to_string(rounds) + " critical sections"};
  if (violations != 0) return {false, std::to_string(violations) + " occupancy checks saw another holder"};
  if (holders != 0 || lock != 0) return {false, "the lock was left held"};
  return {true, "mutual exclusion held"};
}

Verdict judge_uc(const std::vector<Report>& reports, uint64_t lock) {
  for (const Report& r : reports) {
    if (r.uc_post_rc != EINVAL || r.uc_bad_wr_is_atomic == 0)
      return {false, std::string("ibv_post_send of an atomic on a UC QP returned ") +
                         (r.uc_post_rc == 0 ? "0 (accepted)" : std::strerror(r.uc_post_rc)) +
                         (r.uc_bad_wr_is_atomic ? "" : ", bad_wr not the atomic WR")};
  }
  if (lock != 0) return {false, "an atomic posted on UC changed the lock word"};
  return {true, "a UC QP refuses atomics: ibv_post_send returns EINVAL, bad_wr = the atomic WR"};
}

}  // namespace

int run_server(const Options& o, const std::vector<int>& fds) {
  const int timeout_ms = o.timeout_s * 1000;
  std::string error;
  std::unique_ptr<Node> node = Node::open(device_name(o), &error);
  // Every QP is connected before any client hears back, so that the clients
  // start their loops together and contend from the first round.
  std::vector<Welcome> welcomes(fds.size());
  for (size_t i = 0; i < fds.size() && error.empty(); ++i) {
    Hello hello;
    if (!recv_msg(fds[i], &hello, timeout_ms)) {
      error = "no hello from client " + std::to_string(i + 1) + ": " + std::strerror(errno);
      break;
    }
    ibv_qp* qp = node->create_qp(o.uc ? IBV_QPT_UC : IBV_QPT_RC, &error);
    if (qp == nullptr || !node->connect(qp, hello.qp, &error)) break;
    welcomes[i].qp = node->address(qp);
    welcomes[i].addr = reinterpret_cast<uintptr_t>(node->page());
    welcomes[i].rkey = node->rkey();
  }
  for (size_t i = 0; i < fds.size() && error.empty(); ++i)
    if (!send_msg(fds[i], welcomes[i])) error = std::string("welcome: ") + std::strerror(errno);
  if (!error.empty()) {
    std::printf("lock_service server: %s\nverdict: FAIL %s\n", error.c_str(), error.c_str());
    return 1;
  }

  // The clients stop at the time limit and report then: wait a little longer
  // (the launcher kills everyone 10 s after it).
  std::vector<Report> reports(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!recv_msg(fds[i], &reports[i], timeout_ms + 5000)) {
      std::printf("verdict: FAIL no report from client %zu: %s\n", i + 1, std::strerror(errno));
      return 1;
    }
  }
  // Every client's last operation has completed: the page is final.
  const uint8_t* page = node->page();
  const uint64_t counter = load(page, kCounterOffset);
  const uint64_t holders = load(page, kHoldersOffset);
  const uint64_t lock = load(page, kLockOffset);
  for (int fd : fds) send_msg(fd, Bye{});

  uint64_t retries = 0, p99 = 0;
  std::vector<uint64_t> medians;
  std::string client_errors;
  for (size_t i = 0; i < reports.size(); ++i) {
    retries += reports[i].cas_retries;
    p99 = std::max(p99, reports[i].p99_ns);
    if (reports[i].rounds != 0) medians.push_back(reports[i].median_ns);
    if (reports[i].error[0] != '\0') client_errors += "; client " + std::to_string(i + 1) + ": " + reports[i].error;
  }
  Verdict v = o.uc ? judge_uc(reports, lock) : judge_rc(o, reports, counter, holders, lock);
  if (!client_errors.empty()) v = {false, v.why + client_errors};

  const std::string device = device_name(o);
  if (o.uc) {
    std::printf("lock_service: %d clients, UC QPs on %s\n", o.clients, device.c_str());
  } else {
    std::printf("lock_service: %d clients x %llu critical sections on %s, release %s IBV_SEND_FENCE\n", o.clients,
                static_cast<unsigned long long>(o.iterations), device.c_str(), o.fence ? "with" : "without");
    std::printf("  counter %llu (expected %llu), holders %llu, lock word %llu, CAS retries %llu\n",
                static_cast<unsigned long long>(counter),
                static_cast<unsigned long long>(static_cast<uint64_t>(o.clients) * o.iterations),
                static_cast<unsigned long long>(holders), static_cast<unsigned long long>(lock),
                static_cast<unsigned long long>(retries));
    std::printf("  lock/unlock round: median %llu ns (median of the clients' medians), p99 %llu ns (worst client)\n",
                static_cast<unsigned long long>(median(medians)), static_cast<unsigned long long>(p99));
  }
  std::printf("verdict: %s %s\n", v.pass ? "PASS" : "FAIL", v.why.c_str());

  if (!o.json.empty()) {
    nlohmann::json j = {{"device", device},          {"qp_type", o.uc ? "UC" : "RC"},
                        {"fence", o.fence},          {"clients", o.clients},
                        {"iterations", o.iterations}, {"counter", counter},
                        {"cas_retries", retries},    {"median_round_ns", median(medians)},
                        {"p99_round_ns", p99},       {"pass", v.pass},
                        {"verdict", v.why}};
    std::ofstream out(o.json);
    out << j.dump(2) << "\n";
    if (!out) std::fprintf(stderr, "lock_service: could not write %s\n", o.json.c_str());
  }
  std::fflush(stdout);
  return v.pass ? 0 : 1;
}

}  // namespace lock_service
