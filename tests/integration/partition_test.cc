// Partitions (issue 19): Debian's opensm, given a partitions.conf, programs
// the port's P_Key table with Set(P_KeyTable) through our libibumad; every
// reader (ibv_query_pkey, ibv_get_pkey_index, the sysfs tree, smpquery,
// ibv_devinfo) shows the same table, the open context gets PKEY_CHANGE, and
// the data path enforces it: two RC QPs of one partition talk, QPs of
// different partitions, or two limited members of one, do not (the
// requester ends in IBV_WC_RETRY_EXC_ERR), and the port counts each dropped
// request in PortInfo:P_KeyViolations (ibv_port_attr.bad_pkey_cntr). A later
// Set(P_KeyTable) (softverbs_set_pkey) reaches a pair already connected.
// Runs as the integration.partition entry (SOFTVERBS_SM=none); elsewhere, or
// without opensm and infiniband-diags, it skips.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "debian_tools.h"
#include "harness.h"
#include "port_events_wait.h"
#include "sysfs_files.h"
#include "verbs_fixture.h"

extern "C" const char* ibv_get_sysfs_path(void);

namespace softverbs::integration {
namespace {

// The default partition, two more with full members, and one whose members
// are all limited.
constexpr const char* kPartitions =
    "Default=0x7fff : ALL=full;\n"
    "Red=0x0001 : ALL=full;\n"
    "Blue=0x0002 : ALL=full;\n"
    "Limited=0x0003 : ALL=limited;\n";

bool modify(ibv_qp* qp, ibv_qp_attr& a, int mask) {
  const int rc = ibv_modify_qp(qp, &a, mask);
  EXPECT_EQ(0, rc) << "modify to state " << a.qp_state << ": " << errno_name(rc);
  return rc == 0;
}

// Two RC QPs, the first on P_Key index `from_index` sending to the second on
// `to_index`, both at `lid`, with short timers (4.096 us * 2^8 = 1 ms, one
// retry); connected once, for as many sends as succeed.
class RcPair {
 public:
  RcPair(ibv_context* ctx, uint16_t lid, uint16_t from_index, uint16_t to_index) {
    pd_ = ibv_alloc_pd(ctx);
    cq_ = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap = {4, 4, 1, 1, 0};
    qp_[0] = ibv_create_qp(pd_, &init);
    qp_[1] = ibv_create_qp(pd_, &init);
    mr_ = ibv_reg_mr(pd_, buf_, sizeof buf_, IBV_ACCESS_LOCAL_WRITE);
    ready_ = qp_[0] != nullptr && qp_[1] != nullptr && mr_ != nullptr;
    if (!ready_) ADD_FAILURE() << "QPs or MR: " << errno_name(errno);
    const uint16_t index[2] = {from_index, to_index};
    for (int i = 0; ready_ && i < 2; ++i) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_INIT;
      a.pkey_index = index[i];
      a.port_num = 1;
      ready_ = modify(qp_[i], a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      a = {};
      a.qp_state = IBV_QPS_RTR;
      a.path_mtu = IBV_MTU_1024;
      a.dest_qp_num = qp_[1 - i]->qp_num;
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 1;
      a.ah_attr.dlid = lid;
      a.ah_attr.port_num = 1;
      ready_ = ready_ && modify(qp_[i], a,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      a = {};
      a.qp_state = IBV_QPS_RTS;
      a.timeout = 8;
      a.retry_cnt = 1;
      a.rnr_retry = 1;
      a.max_rd_atomic = 1;
      ready_ = ready_ && modify(qp_[i], a,
                                IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                    IBV_QP_MAX_QP_RD_ATOMIC);
    }
  }
  ~RcPair() {
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    for (ibv_qp* q : qp_)
      if (q != nullptr) ibv_destroy_qp(q);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  }
  RcPair(const RcPair&) = delete;
  RcPair& operator=(const RcPair&) = delete;

  // One SEND from the first QP to the second; its completion's status.
  ibv_wc_status send() {
    if (!ready_) return IBV_WC_GENERAL_ERR;
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_), 16, mr_->lkey};
    ibv_recv_wr rwr{};
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    EXPECT_EQ(0, ibv_post_recv(qp_[1], &rwr, &bad_r));
    ibv_send_wr wr{};
    wr.wr_id = ++sends_;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(0, ibv_post_send(qp_[0], &wr, &bad));
    Deadline d = Deadline::op();
    while (true) {
      ibv_wc wc[2];
      const int n = ibv_poll_cq(cq_, 2, wc);
      for (int i = 0; i < n; ++i)
        if (wc[i].wr_id == sends_) return wc[i].status;
      if (d.expired()) {
        ADD_FAILURE() << "no completion for the send";
        return IBV_WC_GENERAL_ERR;
      }
    }
  }

 private:
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_[2] = {nullptr, nullptr};
  ibv_mr* mr_ = nullptr;
  char buf_[64] = {};
  bool ready_ = false;
  uint64_t sends_ = 0;
};

// A fresh pair's one SEND.
ibv_wc_status send_between(ibv_context* ctx, uint16_t lid, uint16_t from_index, uint16_t to_index) {
  RcPair pair(ctx, lid, from_index, to_index);
  return pair.send();
}

uint16_t pkey_at(ibv_context* ctx, int index) {
  __be16 pkey = 0;
  EXPECT_EQ(0, ibv_query_pkey(ctx, 1, index, &pkey)) << "index " << index;
  return ntohs(pkey);
}

uint32_t bad_pkey_counter(ibv_context* ctx) {
  ibv_port_attr port{};
  EXPECT_EQ(0, ibv_query_port(ctx, 1, &port));
  return port.bad_pkey_cntr;
}

TEST(Partition, OpensmProgramsTheTableAndTheDataPathEnforcesIt) {
  run_solo("solo", [](Proc&) {
    tools_use_our_libraries();
    if (!installed("opensm smpquery ibportstate ibv_devinfo")) GTEST_SKIP() << "opensm or infiniband-diags is not installed";
    ContextPtr ctx = open_device();
    ASSERT_NE(nullptr, ctx);
    ibv_port_attr port{};
    ASSERT_EQ(0, ibv_query_port(ctx.get(), 1, &port));
    if (port.state == IBV_PORT_ACTIVE) GTEST_SKIP() << "the port is ACTIVE: not the SOFTVERBS_SM=none entry";
    ASSERT_EQ(32, port.pkey_tbl_len);
    ibv_device_attr dev{};
    ASSERT_EQ(0, ibv_query_device(ctx.get(), &dev));
    EXPECT_EQ(port.pkey_tbl_len, dev.max_pkeys);
    // The boot table: the default P_Key alone.
    EXPECT_EQ(0xffff, pkey_at(ctx.get(), 0));
    EXPECT_EQ(0, pkey_at(ctx.get(), 1));
    __be16 none;
    EXPECT_NE(0, ibv_query_pkey(ctx.get(), 1, port.pkey_tbl_len, &none)) << "index past the table";
    EXPECT_EQ(-1, ibv_get_pkey_index(ctx.get(), 1, htons(0x8001)));

    char dir_template[] = "/tmp/sv-partition-XXXXXX";
    const char* dir = mkdtemp(dir_template);
    ASSERT_NE(nullptr, dir);
    const std::string work = dir;
    // Removed however the test ends (an ASSERT returns early).
    struct RemoveDir {
      std::string path;
      ~RemoveDir() { tool("rm -rf " + path); }
    } remove_work{work};
    std::ofstream(work + "/partitions.conf") << kPartitions;
    std::string out;
    const int rc = tool("env OSM_CACHE_DIR=" + work + " opensm -o -P " + work + "/partitions.conf -f " + work +
                            "/opensm.log",
                        &out, 60);
    std::string log;
    tool("tail -40 " + work + "/opensm.log", &log);
    ASSERT_EQ(0, rc) << out << log;
    EXPECT_EQ(0, tool("grep -q 'SUBNET UP' " + work + "/opensm.log")) << log;
    EXPECT_TRUE(port_events(ctx.get(), {IBV_EVENT_PKEY_CHANGE}).count(IBV_EVENT_PKEY_CHANGE)) << "no PKEY_CHANGE";

    // opensm picks the indexes; every reader agrees on them.
    const int red = ibv_get_pkey_index(ctx.get(), 1, htons(0x8001));
    const int blue = ibv_get_pkey_index(ctx.get(), 1, htons(0x8002));
    const int limited = ibv_get_pkey_index(ctx.get(), 1, htons(0x0003));
    ASSERT_GT(red, 0) << log;
    ASSERT_GT(blue, 0);
    ASSERT_GT(limited, 0);
    EXPECT_EQ(0x8001, pkey_at(ctx.get(), red));
    EXPECT_EQ(0, ibv_get_pkey_index(ctx.get(), 1, htons(0xffff)));
    const std::string sysfs = std::string(ibv_get_sysfs_path()) + "/class/infiniband/" +
                              ibv_get_device_name(ctx->device) + "/ports/1/pkeys/";
    EXPECT_EQ("0x8001", read_line(sysfs + std::to_string(red)));
    EXPECT_EQ("0x0003", read_line(sysfs + std::to_string(limited)));
    out.clear();
    ASSERT_EQ(0, tool("smpquery -D pkeys 0", &out)) << out;
    for (const char* key : {"0xffff", "0x8001", "0x8002", "0x0003"})
      EXPECT_NE(std::string::npos, out.find(key)) << key << " not in smpquery pkeys:\n" << out;
    out.clear();
    ASSERT_EQ(0, tool("ibv_devinfo -v", &out)) << out;
    EXPECT_NE(std::string::npos, out.find("max_pkeys:\t\t\t32")) << out;
    EXPECT_NE(std::string::npos, out.find("pkey_tbl_len:\t\t32")) << out;

    // opensm gave the port its LID but arms only ports it found a neighbour
    // behind; the default device's port has none, so the SM's last steps are
    // ibportstate's.
    out.clear();
    ASSERT_EQ(0, tool("ibportstate -D 0 1 arm", &out)) << out;
    ASSERT_EQ(0, tool("ibportstate -D 0 1 active", &out)) << out;
    ASSERT_EQ(0, ibv_query_port(ctx.get(), 1, &port));
    ASSERT_EQ(IBV_PORT_ACTIVE, port.state);
    const uint16_t lid = port.lid;
    // One partition: they talk, on the default one as on Red.
    const uint32_t before = bad_pkey_counter(ctx.get());
    EXPECT_EQ(IBV_WC_SUCCESS, send_between(ctx.get(), lid, 0, 0));
    EXPECT_EQ(IBV_WC_SUCCESS, send_between(ctx.get(), lid, static_cast<uint16_t>(red), static_cast<uint16_t>(red)));
    EXPECT_EQ(before, bad_pkey_counter(ctx.get()));
    // Red to Blue: each try (the send and its retry) is dropped and counted.
    EXPECT_EQ(IBV_WC_RETRY_EXC_ERR,
              send_between(ctx.get(), lid, static_cast<uint16_t>(red), static_cast<uint16_t>(blue)));
    const uint32_t after_blue = bad_pkey_counter(ctx.get());
    EXPECT_GE(after_blue, before + 2);
    // Two limited members of one partition never talk.
    EXPECT_EQ(IBV_WC_RETRY_EXC_ERR,
              send_between(ctx.get(), lid, static_cast<uint16_t>(limited), static_cast<uint16_t>(limited)));
    EXPECT_GE(bad_pkey_counter(ctx.get()), after_blue + 2);
    // The SM sees the same count in PortInfo.
    out.clear();
    ASSERT_EQ(0, tool("smpquery -D portinfo 0", &out)) << out;
    const size_t at = out.find("PkeyViolations:");
    ASSERT_NE(std::string::npos, at) << out;
    EXPECT_EQ(bad_pkey_counter(ctx.get()),
              std::strtoul(out.c_str() + out.find_first_of("0123456789", at), nullptr, 10))
        << out;

    // The QP holds its index (IBA 10.9.3): a table change reaches a pair
    // already connected. On Red they talk; once an SM makes Red's entry a
    // limited member's (0x0001), both ends hold that key and the next send is
    // dropped; with Red back, a new pair on it talks again.
    const std::string lib = SOFTVERBS_ITEST_EXPECTED_LIBIBVERBS;
    const std::string set_pkey = lib.substr(0, lib.rfind('/')) + "/../bin/softverbs_set_pkey ";
    {
      RcPair pair(ctx.get(), lid, static_cast<uint16_t>(red), static_cast<uint16_t>(red));
      EXPECT_EQ(IBV_WC_SUCCESS, pair.send());
      out.clear();
      ASSERT_EQ(0, tool(set_pkey + std::to_string(red) + " 0001", &out)) << out;
      EXPECT_EQ(0x0001, pkey_at(ctx.get(), red));
      const uint32_t before_change = bad_pkey_counter(ctx.get());
      EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, pair.send()) << "the pair kept Red's old key";
      EXPECT_GE(bad_pkey_counter(ctx.get()), before_change + 2);
    }
    out.clear();
    ASSERT_EQ(0, tool(set_pkey + std::to_string(red) + " 8001", &out)) << out;
    EXPECT_EQ(IBV_WC_SUCCESS, send_between(ctx.get(), lid, static_cast<uint16_t>(red), static_cast<uint16_t>(red)));
  });
}

}  // namespace
}  // namespace softverbs::integration
