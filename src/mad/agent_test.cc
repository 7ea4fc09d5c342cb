#include "mad/agent.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <memory>
#include <random>
#include <vector>

#include "mad/mad_layout.h"
#include "mad/pma_counters.h"
#include "mad/vl15_buffer.h"
#include "shm/op_select.h"
#include "shm/slot_high_water.h"
#include "shm/port_pkeys.h"
#include "shm/port_qos.h"
#include "util/time.h"

namespace softverbs::mad {
namespace {

// The agents against a real segment: the PMA's counters are the segment's,
// a reset is seen through a second attachment, and no input crashes.
class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/softverbs-mad-agent-test-" + std::to_string(getpid());
    auto s = shm::Segment::open(path_);
    ASSERT_TRUE(s.is_ok()) << s.code();
    seg_ = std::move(s.value());
  }
  void TearDown() override {
    seg_.reset();
    unlink(path_.c_str());
    unlink((path_ + ".pma").c_str());
  }
  std::array<uint8_t, kMadBytes> pma_get(uint16_t attr, uint8_t method = 0x01, uint16_t select = 0) {
    std::array<uint8_t, kMadBytes> in{};
    in[0] = 1;
    in[1] = 0x04;
    in[2] = 1;
    in[3] = method;
    AttributeId::set(in.data(), attr);
    in[kGsiDataOffset + 1] = 1;
    BeField<kGsiDataOffset + 2, 2>::set(in.data(), select);
    std::array<uint8_t, kMadBytes> out{};
    EXPECT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kRespond);
    EXPECT_EQ(Status::get(out.data()), 0);
    return out;
  }
  std::string path_;
  std::unique_ptr<shm::Segment> seg_;
};

TEST_F(AgentTest, PmaCountsTheSegmentAndResetsForEveryReader) {
  // What gone processes left in the header: 10 packets of 1000 bytes each way.
  seg_->header().port.xmit_packets = 10;
  seg_->header().port.xmit_bytes = 10000;
  seg_->header().port.rcv_packets = 10;
  seg_->header().port.rcv_bytes = 10000;
  seg_->header().port.faults_corrupted = 2;
  auto out = pma_get(0x001d);
  using XmitData = BeField<kGsiDataOffset + 8, 8>;
  using XmitPkts = BeField<kGsiDataOffset + 24, 8>;
  EXPECT_EQ(XmitData::get(out.data()), (10000u + 10 * 24) / 4);
  EXPECT_EQ(XmitPkts::get(out.data()), 10u);
  out = pma_get(0x0012);
  EXPECT_EQ((BeField<kGsiDataOffset + 4, 2>::get(out.data())), 2);  // SymbolErrorCounter

  // Reset the extended data counters; another attachment of the same device sees zero.
  pma_get(0x001d, 0x02, 0x0003);
  auto again = shm::Segment::open(path_);
  ASSERT_TRUE(again.is_ok());
  PmaCounters c = pma_counters(*again.value());
  EXPECT_EQ(c.v[kXmitData], 0u);
  EXPECT_EQ(c.v[kRcvData], 0u);
  EXPECT_EQ(c.v[kXmitPkts], 10u);  // not selected
  // Traffic after the reset counts from there.
  seg_->header().port.xmit_packets = 11;
  seg_->header().port.xmit_bytes = 10100;
  c = pma_counters(*again.value());
  EXPECT_EQ(c.v[kXmitData], (10100u + 11 * 24) / 4 - (10000u + 10 * 24) / 4);
}

// PortVLOpPackets/PortVLOpData: the per-SL receive counts under the VL the
// SL2VL table maps each SL to when read; a table changed mid-run moves the
// earlier counts with the SL (docs/DESIGN.md).
TEST_F(AgentTest, PerVlCountsFollowTheSl2VlTableWhenRead) {
  shm::SegmentHeader& h = seg_->header();
  for (unsigned sl = 0; sl < 16; ++sl) h.qos.sl_to_vl[sl].store(static_cast<uint8_t>(sl % 8));
  h.port.rcv_packets_sl[3] = 7;
  h.port.rcv_words_sl[3] = 700;
  h.port.rcv_packets_sl[11] = 1;  // SL11 -> VL3 as well
  h.port.rcv_words_sl[11] = 100;
  h.port.rcv_packets_sl[5] = 2;
  h.port.rcv_words_sl[5] = 200;
  using Vl3Pkts = BeField<kGsiDataOffset + 4 + 2 * 3, 2>;
  using Vl5Pkts = BeField<kGsiDataOffset + 4 + 2 * 5, 2>;
  using Vl3Data = BeField<kGsiDataOffset + 4 + 4 * 3, 4>;
  using Vl6Data = BeField<kGsiDataOffset + 4 + 4 * 6, 4>;
  auto out = pma_get(0x0019);
  EXPECT_EQ(Vl3Pkts::get(out.data()), 8);
  EXPECT_EQ(Vl5Pkts::get(out.data()), 2);
  out = pma_get(0x001a);
  EXPECT_EQ(Vl3Data::get(out.data()), 800u);
  // SL5 moves to VL6: what it received moves along; an SL on VL15 counts nowhere.
  h.qos.sl_to_vl[5].store(6);
  h.qos.sl_to_vl[11].store(15);
  out = pma_get(0x001a);
  EXPECT_EQ(Vl3Data::get(out.data()), 700u);
  EXPECT_EQ(Vl6Data::get(out.data()), 200u);
  // A reset of VL3's packets: data kept. Its OpCode (0: perfquery's, RC
  // SEND FIRST) is applied: the packets count that opcode's from here.
  pma_get(0x0019, 0x02, 1u << 3);
  EXPECT_EQ(h.op_select.load(), shm::with_op(0, shm::OpSelector::kVlOpPackets, 0x00));
  h.port.rcv_packets_sl[3] = 10;
  h.port.vl_op_packets_sl[3] = 3;
  PmaCounters c = pma_counters(*seg_);
  EXPECT_EQ(c.v[kRcvPktsVl0 + 3], 3u);
  EXPECT_EQ(c.v[kRcvDataVl0 + 3], 700u);
  EXPECT_EQ(c.v[kOpRcvPkts], c.v[kRcvPkts]);
}

TEST_F(AgentTest, SmaSetStoresTheTablesForEveryProcess) {
  const uint32_t generation = seg_->header().qos.generation.load();
  std::array<uint8_t, kMadBytes> in{};
  in[0] = 1;
  in[1] = 0x01;
  in[2] = 1;
  in[3] = 0x02;
  AttributeId::set(in.data(), 0x0017);
  in[kSmpDataOffset + 7] = 0x0f;  // SL15 -> VL15, every other SL -> VL0
  std::array<uint8_t, kMadBytes> out{};
  ASSERT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kRespond);
  EXPECT_EQ(Status::get(out.data()), 0);
  auto again = shm::Segment::open(path_);
  ASSERT_TRUE(again.is_ok());
  const shm::SegmentHeader& h = again.value()->header();
  EXPECT_EQ(h.qos.generation.load(), generation + 1);
  EXPECT_EQ(shm::vl_of_sl(h, 15), shm::kVl15);
  EXPECT_EQ(shm::vl_of_sl(h, 7), 0);
  // The same Set again changes nothing and leaves the generation alone.
  answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data());
  EXPECT_EQ(h.qos.generation.load(), generation + 1);
}

// IBA 10.9.3: a QP holds an index into its port's P_Key table, so an SM's
// Set(P_KeyTable) reaches every live QP at once, whichever process owns it;
// another CA's QPs follow their own CA's table.
TEST_F(AgentTest, SmaPKeyTableSetReachesLiveQpsAtOnce) {
  auto make = [this](uint32_t slot, uint8_t ca, shm::SlotState state) -> shm::SharedQp& {
    shm::SharedQp& qp = seg_->qp(slot);
    qp.ca = ca;
    qp.state.store(IBV_QPS_RTS);
    qp.pkey_index = 1;
    qp.pkey = 0;  // the entry it held: invalid until the SM fills it
    qp.pkey_fast = shm::fast_pkey(0);
    qp.slot_state.store(static_cast<uint32_t>(state));
    shm::raise_high_water(seg_->header().high_water.qps, slot);
    return qp;
  };
  const shm::SharedQp& rts = make(5, 0, shm::SlotState::kLive);
  const shm::SharedQp& dead = make(6, 0, shm::SlotState::kDead);
  const shm::SharedQp& other_ca = make(7, 1, shm::SlotState::kLive);
  std::array<uint8_t, kMadBytes> in{};
  in[0] = 1;
  in[1] = 0x01;
  in[2] = 1;
  in[3] = 0x02;
  AttributeId::set(in.data(), 0x0016);
  const uint8_t block[] = {0xff, 0xff, 0x80, 0x01};
  std::copy(std::begin(block), std::end(block), in.begin() + kSmpDataOffset);
  std::array<uint8_t, kMadBytes> out{};
  ASSERT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kRespond);
  EXPECT_EQ(Status::get(out.data()), 0);
  EXPECT_EQ(rts.pkey, 0x8001);
  EXPECT_EQ(rts.pkey_fast, 0x8001u) << "a request of the new key passes with one compare";
  EXPECT_EQ(dead.pkey, 0);
  EXPECT_EQ(other_ca.pkey, 0);
  // And out again: the QP's packets carry, and its checks use, the invalid key.
  in[kSmpDataOffset + 2] = in[kSmpDataOffset + 3] = 0;
  ASSERT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kRespond);
  EXPECT_EQ(rts.pkey, 0);
  EXPECT_EQ(rts.pkey_fast, shm::kNoFastPKey);
}

TEST_F(AgentTest, AnSmpThatFindsVl15FullIsDroppedAndCounted) {
  std::array<uint8_t, kMadBytes> in{};
  in[0] = 1;
  in[1] = 0x01;
  in[2] = 1;
  in[3] = 0x01;
  AttributeId::set(in.data(), 0x0011);  // NodeInfo
  std::array<uint8_t, kMadBytes> out{};
  ASSERT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kRespond);
  // The first SMP fixed the buffer's size; fill every slot, as SMPs that
  // other threads are having answered would.
  shm::Vl15Buffer& b = seg_->header().vl15;
  const uint32_t capacity = b.capacity.load();
  ASSERT_GE(capacity, 1u);
  std::vector<std::unique_ptr<Vl15Slot>> held;
  for (uint32_t i = 0; i < capacity; ++i) held.push_back(std::make_unique<Vl15Slot>(b, capacity, now_ns()));
  EXPECT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kDrop);
  in[1] = 0x81;  // directed route: VL15 too
  EXPECT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kDrop);
  // A GMP travels on a data VL (only SMPs use VL15): the PMA
  // answers, and shows the two drops.
  auto pc = pma_get(0x0012);
  EXPECT_EQ((BeField<kGsiDataOffset + 22, 2>::get(pc.data())), 2);  // VL15Dropped
  held.clear();
  in[1] = 0x01;
  EXPECT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kRespond);
  // CounterSelect bit 11 clears it.
  pma_get(0x0012, 0x02, 1u << 11);
  pc = pma_get(0x0012);
  EXPECT_EQ((BeField<kGsiDataOffset + 22, 2>::get(pc.data())), 0);
}

TEST_F(AgentTest, ClassesWithoutAnAgentAreDropped) {
  std::array<uint8_t, kMadBytes> in{};
  std::array<uint8_t, kMadBytes> out{};
  in[0] = 1;
  in[2] = 2;
  in[3] = 0x01;
  for (uint8_t klass : {0x03, 0x07, 0x09, 0x21, 0x30}) {
    in[1] = klass;
    EXPECT_EQ(answer_mad(*seg_, in.data(), in.size(), kPermissiveLid, out.data()), Disposition::kDrop) << int(klass);
  }
}

TEST_F(AgentTest, RandomMadsNeverCrash) {
  std::mt19937 rng(1919);
  std::array<uint8_t, kMadBytes> in{};
  std::array<uint8_t, kMadBytes> out{};
  const uint8_t classes[] = {0x01, 0x81, 0x04};
  for (int i = 0; i < 3000; ++i) {
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    in[1] = classes[i % 3];
    if (i % 2 == 0) {
      in[0] = 1;
      in[2] = 1;
      in[3] &= 0x03;
      in[7] = 0;
      in[4] &= 0x7f;
    }
    answer_mad(*seg_, in.data(), static_cast<size_t>(rng() % 2 ? kMadBytes : rng() % kMadBytes), kPermissiveLid, out.data());
  }
}

}  // namespace
}  // namespace softverbs::mad
