// The responder against a hand-built target QP in a private segment: every
// check and effect, without processes or fabrics (the UDP fabric will feed it
// the same Requests packet by packet).
#include "transport/responder.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "shm/port_pkeys.h"
#include "shm/rings.h"
#include "transport/nak_table.h"
#include "transport/response_packets.h"
#include "transport/testing/hand_built.h"
#include "wire/feth.h"
#include "wire/packet.h"

namespace softverbs::transport {
namespace {

constexpr uint32_t kQpSlot = 2;
constexpr uint32_t kQpn = (1u << shm::kQpSlotBits) | kQpSlot;
constexpr uint32_t kPeerQpn = 0x777;
constexpr uint32_t kPd = 7;
constexpr uint32_t kCqSlot = 1;
constexpr shm::OwnerId kOwner{5, 1};

class RecordingNotifier final : public Notifier {
 public:
  void cq_event(uint32_t slot, shm::OwnerId) override { cq_events.push_back(slot); }
  void qp_event(uint32_t slot, shm::OwnerId, uint64_t bits) override { qp_events.push_back({slot, bits}); }
  void srq_event(uint32_t slot, shm::OwnerId) override { srq_events.push_back(slot); }
  shm::PortCounters& port_counters() override { return counters; }
  shm::PortCounters counters{};
  std::vector<uint32_t> cq_events;
  std::vector<uint32_t> srq_events;
  std::vector<std::pair<uint32_t, uint64_t>> qp_events;
};

class ResponderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-responder-test-" + std::to_string(getpid());
    Result<std::unique_ptr<shm::Segment>> s = shm::Segment::open(path_);
    ASSERT_TRUE(s.is_ok());
    seg_ = std::move(s.value());
    hand_built::make_cq(*seg_, kCqSlot, 64, kOwner);
    hand_built::make_qp(*seg_, kQpSlot, {
        .qpn = kQpn, .owner = kOwner, .pd = kPd, .dest_qpn = kPeerQpn,
        .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, .recv_cq = kCqSlot,
        .epsn = 100, .min_rnr_timer = 12, .rq_capacity = 8, .rq_max_sge = 4});
    mem_.assign(4096, 0);
    add_mr(3, mem_.data(), mem_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                             IBV_ACCESS_REMOTE_ATOMIC);
  }
  void TearDown() override {
    seg_.reset();
    unlink(path_.c_str());
  }

  void add_mr(uint32_t slot, void* addr, size_t len, uint32_t access) {
    hand_built::make_mr(*seg_, slot, addr, len, access, kPd, kOwner);
  }
  uint32_t lkey() const { return hand_built::lkey_of(3); }
  uint32_t rkey() const { return hand_built::rkey_of(3); }
  uint64_t va(size_t off = 0) const { return reinterpret_cast<uint64_t>(mem_.data()) + off; }

  void post_recv(uint64_t wr_id, size_t off, uint32_t len) {
    shm::Sge sge{va(off), len, lkey()};
    ASSERT_TRUE(shm::rq_post(*seg_, seg_->qp(kQpSlot).rq, wr_id, &sge, 1));
  }

  Request base(ReqKind kind, uint32_t psn) {
    Request r;
    r.kind = kind;
    r.psn = psn;
    r.dest_qpn = kQpn;
    r.src_qpn = kPeerQpn;
    return r;
  }
  Response send(Request r, const std::string& payload) {
    payload_ = payload;
    iov_ = {payload_.data(), payload_.size()};
    r.payload = {&iov_, 1, payload_.size()};
    r.dma_length = static_cast<uint32_t>(payload_.size());
    return respond(*seg_, kQpSlot, r, local_, notifier_);
  }
  bool pop(shm::Cqe* out) { return shm::cq_pop(*seg_, seg_->cq(kCqSlot), out); }
  uint8_t qp_state() { return seg_->qp(kQpSlot).state.load(); }

  std::string path_;
  std::unique_ptr<shm::Segment> seg_;
  std::vector<uint8_t> mem_;
  LocalMemory local_;
  RecordingNotifier notifier_;
  std::string payload_;
  iovec iov_{};
};

TEST_F(ResponderTest, SendPlacesPayloadAndCompletesReceive) {
  post_recv(42, 10, 100);
  Request r = base(ReqKind::kSend, 100);
  r.has_imm = true;
  r.imm = htonl(0xabcd);
  Response resp = send(r, "hello");
  EXPECT_EQ(resp.kind, Response::Kind::kAck);
  EXPECT_EQ(std::memcmp(mem_.data() + 10, "hello", 5), 0);
  shm::Cqe c;
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.wr_id, 42u);
  EXPECT_EQ(c.status, IBV_WC_SUCCESS);
  EXPECT_EQ(c.opcode, IBV_WC_RECV);
  EXPECT_EQ(c.byte_len, 5u);
  EXPECT_EQ(c.wc_flags, IBV_WC_WITH_IMM);
  EXPECT_EQ(c.imm_data, htonl(0xabcd));
  EXPECT_EQ(c.src_qp, kPeerQpn);
  EXPECT_EQ(seg_->qp(kQpSlot).resp.epsn, 101u);
}

TEST_F(ResponderTest, SendWithoutReceiveIsRnrNakAndLeavesPsn) {
  Response resp = send(base(ReqKind::kSend, 100), "x");
  EXPECT_EQ(resp.kind, Response::Kind::kRnrNak);
  EXPECT_EQ(resp.rnr_timer, 12);
  EXPECT_EQ(seg_->qp(kQpSlot).resp.epsn, 100u);
  EXPECT_EQ(qp_state(), IBV_QPS_RTS);
}

TEST_F(ResponderTest, SendLongerThanReceiveIsInvalidRequestAndLocalLengthError) {
  post_recv(1, 0, 4);
  Response resp = send(base(ReqKind::kSend, 100), "too long");
  EXPECT_EQ(resp.kind, Response::Kind::kNak);
  EXPECT_EQ(resp.nak, NakCode::kInvalidRequest);
  shm::Cqe c;
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(qp_state(), IBV_QPS_ERR);
  ASSERT_EQ(notifier_.qp_events.size(), 1u);
  EXPECT_TRUE(notifier_.qp_events[0].second & kQpFlushRequest);
}

TEST_F(ResponderTest, ReceiveWithBadLkeyIsRemoteOperationalError) {
  shm::Sge sge{va(0), 16, lkey() ^ 0x10000};
  ASSERT_TRUE(shm::rq_post(*seg_, seg_->qp(kQpSlot).rq, 9, &sge, 1));
  Response resp = send(base(ReqKind::kSend, 100), "data");
  EXPECT_EQ(resp.nak, NakCode::kRemoteOperationalError);
  shm::Cqe c;
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.status, IBV_WC_LOC_PROT_ERR);
}

TEST_F(ResponderTest, WriteChecksKeyAccessAndRange) {
  Request r = base(ReqKind::kWrite, 100);
  r.va = va(100);
  r.rkey = rkey();
  EXPECT_EQ(send(r, "abc").kind, Response::Kind::kAck);
  EXPECT_EQ(std::memcmp(mem_.data() + 100, "abc", 3), 0);
  EXPECT_TRUE(notifier_.qp_events.empty());

  Request bad = base(ReqKind::kWrite, 101);
  bad.va = va(4095);  // two bytes, one past the end
  bad.rkey = rkey();
  Response resp = send(bad, "zz");
  EXPECT_EQ(resp.nak, NakCode::kRemoteAccessError);
  EXPECT_EQ(qp_state(), IBV_QPS_ERR);
  ASSERT_EQ(notifier_.qp_events.size(), 1u);
  EXPECT_TRUE(notifier_.qp_events[0].second & (1ull << IBV_EVENT_QP_ACCESS_ERR));
}

// A WRITE's answer names where its data landed (the host fabric's hint for
// the next WRITE with that R_Key).
TEST_F(ResponderTest, WriteAnswerNamesWhereItsDataLanded) {
  Request r = base(ReqKind::kWrite, 100);
  r.va = va(8);
  r.rkey = rkey();
  r.dma_length = 4;
  const Response resp = send(r, "abcd");
  ASSERT_EQ(resp.kind, Response::Kind::kAck);
  EXPECT_EQ(resp.msn, 1u);
  EXPECT_EQ(resp.data_va, va(8));
  EXPECT_EQ(std::memcmp(mem_.data() + 8, "abcd", 4), 0);
  EXPECT_EQ(send(base(ReqKind::kWrite, 100), "").kind, Response::Kind::kDuplicate);
}

TEST_F(ResponderTest, LkeyIsNotAnRkey) {
  Request r = base(ReqKind::kWrite, 100);
  r.va = va(0);
  r.rkey = lkey();
  EXPECT_EQ(send(r, "abc").nak, NakCode::kRemoteAccessError);
}

TEST_F(ResponderTest, KeyOfAnotherPdIsRejected) {
  seg_->mr(3).pd_id = kPd + 1;
  Request r = base(ReqKind::kRead, 100);
  r.va = va(0);
  r.rkey = rkey();
  r.dma_length = 8;
  EXPECT_EQ(respond(*seg_, kQpSlot, r, local_, notifier_).nak, NakCode::kRemoteAccessError);
}

TEST_F(ResponderTest, RegionWithoutRemoteWriteRefusesWrites) {
  seg_->mr(3).access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  Request r = base(ReqKind::kWrite, 100);
  r.va = va(0);
  r.rkey = rkey();
  EXPECT_EQ(send(r, "a").nak, NakCode::kRemoteAccessError);
}

TEST_F(ResponderTest, QpWithoutRemoteReadRefusesReadsAsInvalidRequest) {
  seg_->qp(kQpSlot).access_flags.store(IBV_ACCESS_REMOTE_WRITE);
  Request r = base(ReqKind::kRead, 100);
  r.va = va(0);
  r.rkey = rkey();
  r.dma_length = 8;
  EXPECT_EQ(respond(*seg_, kQpSlot, r, local_, notifier_).nak, NakCode::kInvalidRequest);
}

TEST_F(ResponderTest, ZeroLengthWriteDoesNotCheckTheKey) {
  Request r = base(ReqKind::kWrite, 100);
  r.rkey = 0xdeadbeef;
  EXPECT_EQ(send(r, "").kind, Response::Kind::kAck);
}

TEST_F(ResponderTest, WriteWithImmediateConsumesAReceive) {
  Request r = base(ReqKind::kWrite, 100);
  r.va = va(0);
  r.rkey = rkey();
  r.has_imm = true;
  r.imm = htonl(7);
  EXPECT_EQ(send(r, "abcd").kind, Response::Kind::kRnrNak);  // no receive yet, nothing written
  EXPECT_EQ(mem_[0], 0);
  post_recv(5, 0, 0);
  EXPECT_EQ(send(r, "abcd").kind, Response::Kind::kAck);
  shm::Cqe c;
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(c.byte_len, 4u);
  EXPECT_EQ(c.imm_data, htonl(7));
}

TEST_F(ResponderTest, ReadGrantsTheRange) {
  Request r = base(ReqKind::kRead, 100);
  r.va = va(64);
  r.rkey = rkey();
  r.dma_length = 200;
  r.packets = 3;
  Response resp = respond(*seg_, kQpSlot, r, local_, notifier_);
  EXPECT_EQ(resp.kind, Response::Kind::kAck);
  EXPECT_EQ(resp.data_va, va(64));
  EXPECT_EQ(seg_->qp(kQpSlot).resp.epsn, 103u);  // one PSN per response packet
}

TEST_F(ResponderTest, AtomicsExecuteOnceAndReplayDuplicates) {
  uint64_t* counter = reinterpret_cast<uint64_t*>(mem_.data() + 64);
  *counter = 10;
  Request r = base(ReqKind::kFetchAdd, 100);
  r.va = va(64);
  r.rkey = rkey();
  r.compare_add = 5;
  Response first = respond(*seg_, kQpSlot, r, local_, notifier_);
  EXPECT_EQ(first.kind, Response::Kind::kAck);
  EXPECT_EQ(first.original, 10u);
  EXPECT_EQ(*counter, 15u);
  // IBA 9.7.5.1.5: a duplicate atomic returns the saved result, not a new one.
  Response dup = respond(*seg_, kQpSlot, r, local_, notifier_);
  EXPECT_EQ(dup.kind, Response::Kind::kDuplicate);
  EXPECT_EQ(dup.original, 10u);
  EXPECT_EQ(*counter, 15u);

  Request cas = base(ReqKind::kCmpSwap, 101);
  cas.va = va(64);
  cas.rkey = rkey();
  cas.compare_add = 99;  // does not match: no swap
  cas.swap = 1;
  EXPECT_EQ(respond(*seg_, kQpSlot, cas, local_, notifier_).original, 15u);
  EXPECT_EQ(*counter, 15u);
  cas.psn = 102;
  cas.compare_add = 15;
  EXPECT_EQ(respond(*seg_, kQpSlot, cas, local_, notifier_).original, 15u);
  EXPECT_EQ(*counter, 1u);
}

TEST_F(ResponderTest, MisalignedAtomicIsInvalidRequest) {
  Request r = base(ReqKind::kCmpSwap, 100);
  r.va = va(3);
  r.rkey = rkey();
  EXPECT_EQ(respond(*seg_, kQpSlot, r, local_, notifier_).nak, NakCode::kInvalidRequest);
}

// IBA 1.5 ATOMIC WRITE: stored once; a duplicate is answered from the
// responder resources, not stored again over what came after it.
TEST_F(ResponderTest, AtomicWriteStoresOnceAndReplaysDuplicates) {
  uint64_t* word = reinterpret_cast<uint64_t*>(mem_.data() + 128);
  *word = 1;
  Request r = base(ReqKind::kAtomicWrite, 100);
  r.va = va(128);
  r.rkey = rkey();
  const std::string value("\x11\x22\x33\x44\x55\x66\x77\x88", 8);
  Response first = send(r, value);
  EXPECT_EQ(first.kind, Response::Kind::kAck);
  EXPECT_EQ(first.msn, 1u);
  EXPECT_EQ(std::memcmp(word, value.data(), 8), 0);
  EXPECT_EQ(seg_->qp(kQpSlot).resp.epsn, 101u);
  *word = 42;  // a later store by someone else
  Response dup = send(r, value);
  EXPECT_EQ(dup.kind, Response::Kind::kDuplicate);
  EXPECT_EQ(*word, 42u) << "the duplicate stored again";
  // A PSN the resources no longer hold is dropped: the requester times out.
  for (uint32_t psn = 101; psn < 101 + shm::kMaxRdAtomic; ++psn) {
    Request next = base(ReqKind::kFetchAdd, psn);
    next.va = va(256);
    next.rkey = rkey();
    EXPECT_EQ(respond(*seg_, kQpSlot, next, local_, notifier_).kind, Response::Kind::kAck);
  }
  EXPECT_EQ(send(r, value).kind, Response::Kind::kDrop);
  EXPECT_EQ(*word, 42u);
}

// rxe's checks, in its order: the QP's REMOTE_WRITE, eight bytes, the R_Key
// with REMOTE_WRITE over them, then 8-byte alignment.
TEST_F(ResponderTest, AtomicWriteChecks) {
  add_mr(4, mem_.data() + 1024, 64, IBV_ACCESS_REMOTE_READ);
  struct Case {
    const char* what;
    uint64_t va;
    uint32_t rkey;
    size_t length;
    NakCode nak;
  };
  const Case cases[] = {
      {"bad R_Key", va(64), rkey() ^ 0x100000, 8, NakCode::kRemoteAccessError},
      {"MR without REMOTE_WRITE", va(1024), hand_built::rkey_of(4), 8, NakCode::kRemoteAccessError},
      {"past the MR's end", va(4092), rkey(), 8, NakCode::kRemoteAccessError},
      {"unaligned", va(68), rkey(), 8, NakCode::kInvalidRequest},
      {"four bytes", va(64), rkey(), 4, NakCode::kInvalidRequest},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    hand_built::make_qp(*seg_, kQpSlot, {
        .qpn = kQpn, .owner = kOwner, .pd = kPd, .dest_qpn = kPeerQpn,
        .access = IBV_ACCESS_REMOTE_WRITE, .recv_cq = kCqSlot, .epsn = 100});
    Request r = base(ReqKind::kAtomicWrite, 100);
    r.va = c.va;
    r.rkey = c.rkey;
    const Response resp = send(r, std::string(c.length, '\x5a'));
    EXPECT_EQ(resp.kind, Response::Kind::kNak);
    EXPECT_EQ(resp.nak, c.nak);
    EXPECT_EQ(qp_state(), IBV_QPS_ERR);
  }
  hand_built::make_qp(*seg_, kQpSlot, {
      .qpn = kQpn, .owner = kOwner, .pd = kPd, .dest_qpn = kPeerQpn,
      .access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, .recv_cq = kCqSlot, .epsn = 100});
  Request r = base(ReqKind::kAtomicWrite, 100);
  r.va = va(64);
  r.rkey = rkey();
  EXPECT_EQ(send(r, std::string(8, '\x5a')).nak, NakCode::kInvalidRequest) << "QP without REMOTE_WRITE";
  for (size_t i = 0; i < mem_.size(); ++i) ASSERT_EQ(mem_[i], 0) << "byte " << i << " was written";
}

// IBA 1.5 FLUSH, as rxe answers it: the QP must allow the placement type and
// the R_Key grant it over the RETH's range (or, whole-region selectivity,
// just the key and the right); a duplicate is answered again.
TEST_F(ResponderTest, FlushChecksRightsAndRangeAndReplaysDuplicates) {
  constexpr uint32_t kQpFlush = kAccessFlushGlobal | IBV_ACCESS_REMOTE_WRITE;
  add_mr(4, mem_.data() + 1024, 256, kAccessFlushGlobal | IBV_ACCESS_LOCAL_WRITE);
  add_mr(5, mem_.data() + 2048, 256, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct Case {
    const char* what;
    uint32_t qp_access;
    uint32_t mr_slot;
    uint64_t va;
    uint32_t length;
    uint8_t placement;
    uint8_t selectivity;
    Response::Kind kind;
    NakCode nak;
  };
  const Case cases[] = {
      {"range", kQpFlush, 4, va(1024 + 16), 64, wire::Feth::kGlobalVisibility, wire::Feth::kRange,
       Response::Kind::kAck, NakCode::kInvalidRequest},
      {"whole region, VA ignored", kQpFlush, 4, 0x1234, 0, wire::Feth::kGlobalVisibility, wire::Feth::kWholeRegion,
       Response::Kind::kAck, NakCode::kInvalidRequest},
      {"range past the region", kQpFlush, 4, va(1024 + 200), 64, wire::Feth::kGlobalVisibility, wire::Feth::kRange,
       Response::Kind::kNak, NakCode::kRemoteAccessError},
      {"region without FLUSH_GLOBAL", kQpFlush, 5, va(2048), 8, wire::Feth::kGlobalVisibility, wire::Feth::kRange,
       Response::Kind::kNak, NakCode::kRemoteAccessError},
      {"QP without FLUSH_GLOBAL", IBV_ACCESS_REMOTE_WRITE, 4, va(1024), 8, wire::Feth::kGlobalVisibility,
       wire::Feth::kRange, Response::Kind::kNak, NakCode::kInvalidRequest},
      {"persistence: no region has it", kQpFlush | kAccessFlushPersistent, 4, va(1024), 8, wire::Feth::kPersistence,
       wire::Feth::kRange, Response::Kind::kNak, NakCode::kRemoteAccessError},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    hand_built::make_qp(*seg_, kQpSlot, {
        .qpn = kQpn, .owner = kOwner, .pd = kPd, .dest_qpn = kPeerQpn, .access = c.qp_access, .recv_cq = kCqSlot,
        .epsn = 100});
    Request r = base(ReqKind::kFlush, 100);
    r.va = c.va;
    r.rkey = hand_built::rkey_of(c.mr_slot);
    r.dma_length = c.length;
    r.flush_placement = c.placement;
    r.flush_selectivity = c.selectivity;
    const Response resp = respond(*seg_, kQpSlot, r, local_, notifier_);
    EXPECT_EQ(resp.kind, c.kind);
    if (c.kind == Response::Kind::kNak) {
      EXPECT_EQ(resp.nak, c.nak);
      continue;
    }
    EXPECT_EQ(resp.msn, 1u);
    EXPECT_EQ(seg_->qp(kQpSlot).resp.epsn, 101u);
    EXPECT_EQ(respond(*seg_, kQpSlot, r, local_, notifier_).kind, Response::Kind::kDuplicate);
  }
}

namespace {
struct RecordingSink final : PacketSink {
  void send(std::span<uint8_t> packet) override { sent.emplace_back(packet.begin(), packet.end()); }
  std::vector<std::vector<uint8_t>> sent;
};
}  // namespace

// A FLUSH as another RoCE host (Linux rxe) sends it, byte for byte — BTH,
// FETH, RETH — answered by a zero-length RDMA READ RESPONSE ONLY with an ACK
// AETH at its PSN, again when it is repeated.
TEST_F(ResponderTest, CraftedFlushPacketIsAnsweredByAnEmptyReadResponse) {
  add_mr(4, mem_.data() + 1024, 256, kAccessFlushGlobal | IBV_ACCESS_LOCAL_WRITE);
  hand_built::make_qp(*seg_, kQpSlot, {
      .qpn = kQpn, .owner = kOwner, .pd = kPd, .dest_qpn = kPeerQpn, .access = kAccessFlushGlobal,
      .recv_cq = kCqSlot, .epsn = 100});
  const uint64_t target = va(1024);
  const uint32_t rkey = hand_built::rkey_of(4);
  std::vector<uint8_t> packet = {
      0x1c, 0x00, 0xff, 0xff, 0x00, uint8_t(kQpn >> 16), uint8_t(kQpn >> 8), uint8_t(kQpn),  // FLUSH, QP
      0x80, 0x00, 0x00, 100,                                                                 // AckReq, PSN 100
      0x00, 0x00, 0x00, 0x01};                                                               // FETH: global, range
  for (int i = 7; i >= 0; --i) packet.push_back(uint8_t(target >> (8 * i)));
  for (int i = 3; i >= 0; --i) packet.push_back(uint8_t(rkey >> (8 * i)));
  for (const uint8_t b : {0, 0, 0, 64}) packet.push_back(b);
  for (int i = 0; i < 4; ++i) packet.push_back(0);  // ICRC (checked by the link, not here)
  const wire::PacketView v = wire::PacketView::parse(packet, 4096);
  ASSERT_TRUE(v.ok()) << wire::packet_error_name(v.error());
  EXPECT_EQ(v.feth(), (wire::Feth{wire::Feth::kGlobalVisibility, wire::Feth::kRange}));
  RecordingSink sink;
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(serve_request_packet(*seg_, kQpSlot, v, 4096, nullptr, local_, notifier_, sink),
              PacketVerdict::kRequest);
  }
  const std::vector<uint8_t> want = {
      0x10, 0x00, 0xff, 0xff, 0x00, uint8_t(kPeerQpn >> 16), uint8_t(kPeerQpn >> 8), uint8_t(kPeerQpn),
      0x00, 0x00, 0x00, 100,   // PSN 100
      0x1f, 0x00, 0x00, 0x01,  // AETH: ACK, credits not limited, MSN 1
      0x00, 0x00, 0x00, 0x00};
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(sink.sent[0], want);
  EXPECT_EQ(sink.sent[1], want) << "the repeated FLUSH";
  EXPECT_EQ(seg_->qp(kQpSlot).counters.duplicate_requests.load(), 1u);
}

TEST_F(ResponderTest, DuplicateSendIsAcknowledgedNotExecuted) {
  post_recv(1, 0, 16);
  post_recv(2, 16, 16);
  EXPECT_EQ(send(base(ReqKind::kSend, 100), "one").kind, Response::Kind::kAck);
  EXPECT_EQ(send(base(ReqKind::kSend, 100), "two").kind, Response::Kind::kDuplicate);
  shm::Cqe c;
  ASSERT_TRUE(pop(&c));
  EXPECT_FALSE(pop(&c)) << "the duplicate consumed no receive";
  EXPECT_EQ(std::memcmp(mem_.data(), "one", 3), 0);
}

TEST_F(ResponderTest, PacketAheadIsOneSequenceNakThenSilence) {
  post_recv(1, 0, 16);
  Response r1 = send(base(ReqKind::kSend, 103), "x");
  EXPECT_EQ(r1.kind, Response::Kind::kNak);
  EXPECT_EQ(r1.nak, NakCode::kPsnSequenceError);
  EXPECT_EQ(send(base(ReqKind::kSend, 104), "x").kind, Response::Kind::kDrop);
  EXPECT_EQ(qp_state(), IBV_QPS_RTS);
  EXPECT_EQ(send(base(ReqKind::kSend, 100), "x").kind, Response::Kind::kAck);
}

TEST_F(ResponderTest, PsnComparisonWrapsAt24Bits) {
  seg_->qp(kQpSlot).resp.epsn = 0xffffff;
  post_recv(1, 0, 16);
  post_recv(2, 0, 16);
  EXPECT_EQ(send(base(ReqKind::kSend, 0xffffff), "a").kind, Response::Kind::kAck);
  EXPECT_EQ(seg_->qp(kQpSlot).resp.epsn, 0u);
  EXPECT_EQ(send(base(ReqKind::kSend, 0xffffff), "a").kind, Response::Kind::kDuplicate);
  EXPECT_EQ(send(base(ReqKind::kSend, 0), "b").kind, Response::Kind::kAck);
}

TEST_F(ResponderTest, MultiPacketSendFollowsOpcodeSequence) {
  post_recv(1, 0, 64);
  Request first = base(ReqKind::kSend, 100);
  first.last = false;
  EXPECT_EQ(send(first, "abc").kind, Response::Kind::kAck);
  Request mid = base(ReqKind::kSend, 101);
  mid.first = false;
  mid.last = false;
  EXPECT_EQ(send(mid, "def").kind, Response::Kind::kAck);
  Request last = base(ReqKind::kSend, 102);
  last.first = false;
  EXPECT_EQ(send(last, "g").kind, Response::Kind::kAck);
  shm::Cqe c;
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.byte_len, 7u);
  EXPECT_EQ(std::memcmp(mem_.data(), "abcdefg", 7), 0);
  // A middle packet with no message open is out of sequence.
  mid.psn = 103;
  Response resp = send(mid, "x");
  EXPECT_EQ(resp.kind, Response::Kind::kNak);
  EXPECT_EQ(resp.nak, NakCode::kInvalidRequest);
}

// A loss inside a message: the packet after the gap is NAKed, and the resent
// middle packet continues the same message rather than breaking its sequence.
TEST_F(ResponderTest, PacketLostMidMessageResumesTheMessage) {
  post_recv(1, 0, 64);
  Request first = base(ReqKind::kSend, 100);
  first.last = false;
  EXPECT_EQ(send(first, "abc").kind, Response::Kind::kAck);
  Request mid = base(ReqKind::kSend, 101);
  mid.first = false;
  mid.last = false;
  Request last = base(ReqKind::kSend, 102);
  last.first = false;
  Response nak = send(last, "g");  // 101 was lost
  EXPECT_EQ(nak.kind, Response::Kind::kNak);
  EXPECT_EQ(nak.nak, NakCode::kPsnSequenceError);
  shm::Cqe c;
  EXPECT_FALSE(pop(&c)) << "the receive must stay open";
  EXPECT_EQ(send(mid, "def").kind, Response::Kind::kAck);
  EXPECT_EQ(send(last, "g").kind, Response::Kind::kAck);
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.status, IBV_WC_SUCCESS);
  EXPECT_EQ(c.byte_len, 7u);
  EXPECT_EQ(std::memcmp(mem_.data(), "abcdefg", 7), 0);
  EXPECT_EQ(qp_state(), IBV_QPS_RTS);
}

TEST_F(ResponderTest, NotReadyOrWrongPeerIsDropped) {
  seg_->qp(kQpSlot).state.store(IBV_QPS_INIT);
  EXPECT_EQ(send(base(ReqKind::kSend, 100), "x").kind, Response::Kind::kDrop);
  seg_->qp(kQpSlot).state.store(IBV_QPS_RTS);
  Request r = base(ReqKind::kSend, 100);
  r.src_qpn = kPeerQpn + 1;
  EXPECT_EQ(send(r, "x").kind, Response::Kind::kDrop);
  r = base(ReqKind::kSend, 100);
  r.dest_qpn = kQpn + (1u << shm::kQpSlotBits);  // stale generation
  EXPECT_EQ(send(r, "x").kind, Response::Kind::kDrop);
}

TEST_F(ResponderTest, ArmedCqRaisesOneEvent) {
  shm::SharedCq& cq = seg_->cq(kCqSlot);
  cq.armed.store(shm::kCqArmSolicited);
  post_recv(1, 0, 16);
  post_recv(2, 0, 16);
  send(base(ReqKind::kSend, 100), "quiet");
  EXPECT_TRUE(notifier_.cq_events.empty()) << "unsolicited message, solicited-only arm";
  Request r = base(ReqKind::kSend, 101);
  r.solicited = true;
  send(r, "loud");
  EXPECT_EQ(notifier_.cq_events.size(), 1u);
  EXPECT_EQ(cq.armed.load(), shm::kCqDisarmed);
}

TEST(NakTable, UnreliableTransportsNeverAnswer) {
  for (RespError e : {RespError::kRkey, RespError::kRecvTooSmall, RespError::kOpcodeSequence}) {
    EXPECT_EQ(nak_effect(e, IBV_QPT_UC).kind, Response::Kind::kDrop);
    EXPECT_FALSE(nak_effect(e, IBV_QPT_UD).qp_error);
  }
  EXPECT_EQ(requester_status(NakCode::kRemoteAccessError), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(requester_status(NakCode::kInvalidRequest), IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(requester_status(NakCode::kRemoteOperationalError), IBV_WC_REM_OP_ERR);
}

}  // namespace
}  // namespace softverbs::transport

namespace softverbs::transport {
namespace {

// IBA 9.8.3: on UC a gap loses the rest of the message; the next FIRST or
// ONLY starts again at the beginning of the same receive WQE.
TEST_F(ResponderTest, UcGapLosesTheMessageAndTheNextOneArrives) {
  seg_->qp(kQpSlot).qp_type = IBV_QPT_UC;
  post_recv(1, 0, 64);
  Request first = base(ReqKind::kSend, 100);
  first.last = false;
  EXPECT_EQ(send(first, "abc").kind, Response::Kind::kAck);
  Request last = base(ReqKind::kSend, 102);  // 101 was lost
  last.first = false;
  EXPECT_EQ(send(last, "zz").kind, Response::Kind::kDrop);
  shm::Cqe c;
  EXPECT_FALSE(pop(&c)) << "a broken UC message completes nothing";
  Request only = base(ReqKind::kSend, 103);
  EXPECT_EQ(send(only, "hello").kind, Response::Kind::kAck);
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.wr_id, 1u);
  EXPECT_EQ(c.status, IBV_WC_SUCCESS);
  EXPECT_EQ(c.byte_len, 5u);
  EXPECT_EQ(std::memcmp(mem_.data(), "hello", 5), 0);
  EXPECT_EQ(qp_state(), IBV_QPS_RTS);
}

// IBA 10.9.3: a request whose P_Key does not match the QP's is dropped,
// nothing executed, and counted in PortInfo:P_KeyViolations.
TEST_F(ResponderTest, PKeyMismatchIsDroppedAndCounted) {
  shm::SharedQp& qp = seg_->qp(kQpSlot);
  auto set_own = [&qp](uint16_t own) {
    qp.pkey = own;
    qp.pkey_fast = shm::fast_pkey(own);
  };
  set_own(0x8001);
  post_recv(1, 0, 64);
  shm::Cqe c;
  Request r = base(ReqKind::kSend, 100);
  r.pkey = 0x8002;  // another partition
  EXPECT_EQ(send(r, "other").kind, Response::Kind::kDrop);
  EXPECT_FALSE(pop(&c));
  EXPECT_EQ(shm::pkey_violations(seg_->header()), 1);
  EXPECT_EQ(seg_->qp(kQpSlot).resp.epsn, 100u) << "nothing executed";
  r.pkey = 0x0001;  // a limited member of ours: a full member talks to it
  EXPECT_EQ(send(r, "limited").kind, Response::Kind::kAck);
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.wr_id, 1u);
  // Two limited members of one partition never talk.
  set_own(0x0001);
  post_recv(2, 0, 64);
  r = base(ReqKind::kSend, 101);
  r.pkey = 0x0001;
  EXPECT_EQ(send(r, "both limited").kind, Response::Kind::kDrop);
  EXPECT_EQ(shm::pkey_violations(seg_->header()), 2);
  r.pkey = 0x8001;
  EXPECT_EQ(send(r, "full").kind, Response::Kind::kAck);
  EXPECT_EQ(shm::pkey_violations(seg_->header()), 2);
}

TEST_F(ResponderTest, UdChecksQkeyAndPlacesGrhRoom) {
  shm::SharedQp& qp = seg_->qp(kQpSlot);
  qp.qp_type = IBV_QPT_UD;
  qp.qkey = 0x1234;
  post_recv(7, 0, 64);
  Request r = base(ReqKind::kSend, 5);
  r.src_qpn = 0x999;  // any sender may reach a UD QP
  r.qkey = 0x4321;
  EXPECT_EQ(send(r, "dropped").kind, Response::Kind::kDrop);
  shm::Cqe c;
  EXPECT_FALSE(pop(&c));
  r.qkey = 0x1234;
  uint8_t grh[40];
  for (int i = 0; i < 40; ++i) grh[i] = static_cast<uint8_t>(i);
  r.grh = grh;
  r.with_grh = true;
  EXPECT_EQ(send(r, "datagram").kind, Response::Kind::kAck);
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.wr_id, 7u);
  EXPECT_EQ(c.byte_len, 48u);
  EXPECT_EQ(c.src_qp, 0x999u);
  EXPECT_TRUE(c.wc_flags & IBV_WC_GRH);
  EXPECT_EQ(std::memcmp(mem_.data(), grh, 40), 0);
  EXPECT_EQ(std::memcmp(mem_.data() + 40, "datagram", 8), 0);
  // No receive WQE: dropped, nothing completes.
  EXPECT_EQ(send(r, "lost").kind, Response::Kind::kDrop);
  EXPECT_FALSE(pop(&c));
}

// IBA 9.6.1.1: QP1 (a GSI agent's QP, source QPN 1) takes a P_Key that
// matches any valid entry of its port's table, by the membership rule;
// any other QP only its own.
TEST_F(ResponderTest, GsiQpTakesAnyEntryOfThePortsTable) {
  shm::PKeyTable table = shm::default_pkeys();
  table[1] = 0x8001;
  table[2] = 0x0003;  // limited
  shm::store_pkeys(seg_->header(), table);
  shm::SharedQp& qp = seg_->qp(kQpSlot);
  qp.qp_type = IBV_QPT_UD;
  qp.qkey = 0x1234;
  qp.gsi = 1;  // its own key stays the default: index 0
  for (uint64_t id = 1; id <= 5; ++id) post_recv(id, 0, 64);
  shm::Cqe c;
  Request r = base(ReqKind::kSend, 5);
  r.src_qpn = 1;
  r.qkey = 0x1234;
  r.pkey = 0x8001;  // another entry of the table
  EXPECT_EQ(send(r, "red").kind, Response::Kind::kAck);
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.pkey_index, 1) << "the entry the datagram's P_Key is";
  r.pkey = 0x0001;  // a limited member of that entry's partition
  EXPECT_EQ(send(r, "red, limited").kind, Response::Kind::kAck);
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.pkey_index, 1) << "the entry it matched";
  r.pkey = 0xffff;  // its own
  EXPECT_EQ(send(r, "default").kind, Response::Kind::kAck);
  ASSERT_TRUE(pop(&c));
  EXPECT_EQ(c.pkey_index, 0);
  EXPECT_EQ(shm::pkey_violations(seg_->header()), 0);
  r.pkey = 0x8002;  // in no entry
  EXPECT_EQ(send(r, "blue").kind, Response::Kind::kDrop);
  r.pkey = 0x0003;  // limited, as the only entry of its partition
  EXPECT_EQ(send(r, "both limited").kind, Response::Kind::kDrop);
  EXPECT_FALSE(pop(&c));
  EXPECT_EQ(shm::pkey_violations(seg_->header()), 2);
  // Any other QP: its own key only.
  qp.gsi = 0;
  r.pkey = 0x8001;
  EXPECT_EQ(send(r, "red to a plain UD QP").kind, Response::Kind::kDrop);
  EXPECT_EQ(shm::pkey_violations(seg_->header()), 3);
}

}  // namespace
}  // namespace softverbs::transport
