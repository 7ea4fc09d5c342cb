// qp_scale <qps> [idle_seconds]: many RC QPs on one device, written against
// <infiniband/verbs.h> and run through our libibverbs.so.1.
//
// Creates <qps> RC QPs in one process, connected in pairs to each other
// through the device (QP 2k <-> 2k+1), and prints, as `metric` lines
// bench/run.py parses:
//   setup_us_per_qp     create + INIT + RTR + RTS, per QP
//   bytes_per_qp        device memory (the segment file's allocated blocks)
//                       plus this process's resident memory, per QP
//   write_lat_us        median post -> completion of an 8-byte RDMA WRITE,
//                       on QPs spread over the whole set, round robin
//   idle_cpu_percent    with idle_seconds > 0: the CPU time this process
//                       (service thread included) spends while every QP
//                       stays open and nothing is posted, as a share of
//                       one CPU over that wall time
#include <infiniband/verbs.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/rc_connect.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const char* what) { svbench::die_errno("qp_scale", what); }

long resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr || std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  if (f != nullptr) std::fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

long segment_bytes() {
  const char* p = std::getenv("SOFTVERBS_DEVICE_PATH");
  struct stat st {};
  if (p == nullptr || stat(p, &st) != 0) return 0;
  return static_cast<long>(st.st_blocks) * 512;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const auto sec = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// The device's periodic work (the dead-process sweep) must fall inside the
// window for the figure to mean anything, so callers pass more than its period.
double idle_cpu_percent(double seconds) {
  const double cpu0 = cpu_seconds(), wall0 = now_us();
  usleep(static_cast<useconds_t>(seconds * 1e6));
  return 100.0 * (cpu_seconds() - cpu0) / ((now_us() - wall0) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: qp_scale <qps> [idle_seconds]\n");
    return 2;
  }
  const int n = std::max(2, std::atoi(argv[1])) & ~1;
  const double idle_seconds = argc > 2 ? std::atof(argv[2]) : 0.0;
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr || count == 0) die("no device");
  ibv_context* ctx = ibv_open_device(list[0]);
  if (ctx == nullptr) die("ibv_open_device");
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port) != 0) die("ibv_query_port");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 4096, nullptr, nullptr, 0);
  if (pd == nullptr || cq == nullptr) die("pd/cq");
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) die("ibv_reg_mr");

  const long seg0 = segment_bytes();
  const long rss0 = resident_bytes();
  std::vector<ibv_qp*> qps(n);
  const double t0 = now_us();
  for (int i = 0; i < n; ++i) {
    qps[i] = svbench::create_rc_or_die("qp_scale", pd, cq);
    svbench::to_init("qp_scale", qps[i]);
  }
  for (int i = 0; i < n; ++i) svbench::to_rts("qp_scale", qps[i], qps[i ^ 1]->qp_num, port, ctx);
  const double setup_us = now_us() - t0;
  const long seg1 = segment_bytes();
  const long rss1 = resident_bytes();

  // Latency with every QP present: 8-byte WRITEs, round robin over the set.
  const int iters = 20000;
  std::vector<double> lat;
  lat.reserve(iters);
  ibv_sge sge{reinterpret_cast<uint64_t>(buf.data()), 8, mr->lkey};
  for (int k = 0; k < iters; ++k) {
    ibv_send_wr wr{};
    wr.wr_id = k;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(buf.data()) + 2048;
    wr.wr.rdma.rkey = mr->rkey;
    ibv_send_wr* bad = nullptr;
    const double s = now_us();
    if (ibv_post_send(qps[(k * 7919) % n], &wr, &bad) != 0) die("ibv_post_send");
    ibv_wc wc{};
    int got = 0;
    while ((got = ibv_poll_cq(cq, 1, &wc)) == 0) {
    }
    if (got < 0 || wc.status != IBV_WC_SUCCESS) {
      std::fprintf(stderr, "qp_scale: WRITE failed: %s\n", ibv_wc_status_str(wc.status));
      return 1;
    }
    if (k >= iters / 10) lat.push_back(now_us() - s);  // the first tenth warms up
  }
  std::sort(lat.begin(), lat.end());
  std::printf("metric qps %d\n", n);
  std::printf("metric setup_us_per_qp %.3f\n", setup_us / n);
  std::printf("metric bytes_per_qp %.0f\n", double(seg1 - seg0 + rss1 - rss0) / n);
  std::printf("metric write_lat_us %.3f\n", lat[lat.size() / 2]);
  if (idle_seconds > 0) std::printf("metric idle_cpu_percent %.3f\n", idle_cpu_percent(idle_seconds));
  for (ibv_qp* q : qps) ibv_destroy_qp(q);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
