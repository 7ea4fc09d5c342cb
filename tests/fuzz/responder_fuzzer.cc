// libFuzzer target for the receive path past the parser: each input is an IB
// packet (what a UDP socket hands the fabric) that, when it parses, goes
// through transport::request_from_packet and transport::respond — the code
// the UDP fabric runs — against a QP of a real device segment with one
// registered region and receive WQEs.
//
// The first input byte picks the QP's transport (RC, UC, UD) and path MTU;
// every input starts from a freshly reset QP, so a finding replays alone.
// The region is a heap block of exactly its registered size: a write or read
// the key and range checks should have refused lands outside it and
// AddressSanitizer reports it. Invariants checked besides: a request keeps to
// the path MTU, the responder's state stays within its bounds, and a READ is
// granted only inside the region.
#include <infiniband/verbs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "shm/rings.h"
#include "shm/segment.h"
#include "transport/packet_request.h"
#include "transport/responder.h"
#include "transport/target_memory.h"
#include "transport/testing/hand_built.h"
#include "wire/packet.h"

namespace softverbs::transport {
namespace {

[[noreturn]] void broken(const char* what, int line) {
  std::fprintf(stderr, "responder_fuzzer: invariant broken (line %d): %s\n", line, what);
  std::abort();
}
#define CHECK(cond)                      \
  do {                                   \
    if (!(cond)) broken(#cond, __LINE__); \
  } while (0)

constexpr uint32_t kQpSlot = 5;
constexpr uint32_t kCqSlot = 3;
constexpr uint32_t kMrSlot = 7;
constexpr uint32_t kPd = 9;
constexpr shm::OwnerId kOwner{1, 1};
constexpr uint32_t kQpn = (1u << shm::kQpSlotBits) | kQpSlot;
constexpr uint32_t kPeerQpn = 0x77;
constexpr size_t kRegion = 8192;
constexpr uint32_t kCqDepth = 64;

struct Device {
  std::string path = "/dev/shm/softverbs-responder-fuzz-" + std::to_string(getpid());
  std::unique_ptr<shm::Segment> seg;
  uint8_t* region = nullptr;
  hand_built::QuietNotifier notifier;

  Device() {
    Result<std::unique_ptr<shm::Segment>> s = shm::Segment::open(path);
    if (!s.is_ok()) {
      std::fprintf(stderr, "responder_fuzzer: cannot create %s\n", path.c_str());
      std::exit(1);
    }
    seg = std::move(s.value());
    unlink(path.c_str());  // the mapping stays; nothing is left behind
    region = new uint8_t[kRegion];
    hand_built::make_cq(*seg, kCqSlot, kCqDepth, kOwner);
    hand_built::make_mr(*seg, kMrSlot, region, kRegion,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC,
                        kPd, kOwner);
  }

  // A fresh QP of `type`, in RTS, with four receive WQEs over the region.
  shm::SharedQp& reset_qp(uint8_t type, ibv_mtu mtu) {
    shm::SharedQp& qp = hand_built::make_qp(*seg, kQpSlot, {
        .qpn = kQpn, .owner = kOwner, .type = type, .pd = kPd, .dest_qpn = kPeerQpn,
        .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, .recv_cq = kCqSlot,
        .qkey = 0x11111111, .path_mtu = static_cast<uint8_t>(mtu), .rq_capacity = 8, .rq_max_sge = 2});
    for (uint32_t i = 0; i < 4; ++i) {
      shm::Sge sge[2] = {{m_addr(i * 2048), 1024, lkey()}, {m_addr(i * 2048 + 1024), 1024, lkey()}};
      CHECK(shm::rq_post(*seg, qp.rq, i, sge, 2));
    }
    shm::SharedCq& cq = seg->cq(kCqSlot);
    shm::Cqe drained;
    while (shm::cq_pop(*seg, cq, &drained)) {
    }
    return qp;
  }
  uint64_t m_addr(size_t off) const { return reinterpret_cast<uint64_t>(region) + off; }
  static uint32_t lkey() { return hand_built::lkey_of(kMrSlot); }
};

Device& device() {
  static Device* d = new Device();  // lives as long as the fuzzer
  return *d;
}

}  // namespace
}  // namespace softverbs::transport

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace softverbs;
  using namespace softverbs::transport;
  if (size < 1) return 0;
  static const uint8_t kTypes[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};
  static const ibv_mtu kMtus[] = {IBV_MTU_256, IBV_MTU_1024, IBV_MTU_4096};
  const uint8_t type = kTypes[data[0] % 3];
  const ibv_mtu mtu = kMtus[(data[0] / 3) % 3];
  Device& d = device();
  shm::SharedQp& qp = d.reset_qp(type, mtu);
  std::memset(d.region, 0, kRegion);
  // Inputs are packets of any QPN; aim them at ours so they get past routing.
  std::vector<uint8_t> packet(data + 1, data + size);
  if (packet.size() >= 8) {
    packet[5] = static_cast<uint8_t>(kQpn >> 16);
    packet[6] = static_cast<uint8_t>(kQpn >> 8);
    packet[7] = static_cast<uint8_t>(kQpn);
  }
  const wire::PacketView v = wire::PacketView::parse(packet, 4096);
  if (!v.ok()) return 0;
  iovec iov;
  Request req;
  const uint32_t mtu_bytes = 128u << mtu;
  if (request_from_packet(v, qp, mtu_bytes, &iov, &req) != PacketVerdict::kRequest) return 0;
  CHECK(req.payload.bytes <= mtu_bytes);
  // Start each message where the PSN is expected, half of the time, so the
  // fuzzer reaches the checks after the PSN one.
  if (data[0] & 0x80) qp.resp.epsn = req.psn;
  uint8_t grh[40] = {};
  req.grh = grh;
  req.with_grh = type == IBV_QPT_UD;
  LocalMemory mem;
  const Response r = respond(*d.seg, kQpSlot, req, mem, d.notifier);
  CHECK(qp.resp.recv_num_sge <= shm::kMaxSge);
  if (r.data_mr != nullptr) {
    // A READ granted: the range must lie inside the region.
    CHECK(r.data_va >= d.m_addr(0));
    CHECK(r.data_va + req.dma_length <= d.m_addr(kRegion));
  }
  return 0;
}
