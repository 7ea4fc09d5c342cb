// Round trips and byte layouts of the extension header codecs.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "wire/atmack.h"
#include "wire/atmeth.h"
#include "wire/deth.h"
#include "wire/feth.h"
#include "wire/ieth.h"
#include "wire/immdt.h"
#include "wire/opcode.h"
#include "wire/reth.h"
#include "wire/xrceth.h"

namespace softverbs::wire {
namespace {

template <class H>
std::vector<uint8_t> encode(const H& h) {
  std::vector<uint8_t> out(H::kBytes + 2, 0xee);  // guard bytes after the header
  h.encode(out.data());
  EXPECT_EQ(out[H::kBytes], 0xee);
  EXPECT_EQ(out[H::kBytes + 1], 0xee);
  EXPECT_EQ(H::decode(out.data()), h);
  out.resize(H::kBytes);
  return out;
}

TEST(Headers, SizesMatchTheOpcodeTable) {
  EXPECT_EQ(Reth::kBytes, kHeaderBytes[size_t(Header::kReth)]);
  EXPECT_EQ(AtomicEth::kBytes, kHeaderBytes[size_t(Header::kAtomicEth)]);
  EXPECT_EQ(AtomicAckEth::kBytes, kHeaderBytes[size_t(Header::kAtomicAckEth)]);
  EXPECT_EQ(ImmDt::kBytes, kHeaderBytes[size_t(Header::kImmDt)]);
  EXPECT_EQ(Ieth::kBytes, kHeaderBytes[size_t(Header::kIeth)]);
  EXPECT_EQ(Deth::kBytes, kHeaderBytes[size_t(Header::kDeth)]);
  EXPECT_EQ(Xrceth::kBytes, kHeaderBytes[size_t(Header::kXrceth)]);
  EXPECT_EQ(Feth::kBytes, kHeaderBytes[size_t(Header::kFeth)]);
}

// IBA 1.5 A19 (as Linux's rxe packs it): placement type in bits 3..0,
// selectivity in bits 5..4 of one big-endian word.
TEST(Headers, Feth) {
  EXPECT_EQ(encode(Feth{Feth::kGlobalVisibility, Feth::kWholeRegion}), (std::vector<uint8_t>{0, 0, 0, 0x11}));
  EXPECT_EQ(encode(Feth{Feth::kGlobalVisibility | Feth::kPersistence, Feth::kRange}),
            (std::vector<uint8_t>{0, 0, 0, 0x03}));
  const uint8_t reserved_set[4] = {0xff, 0xff, 0xff, 0xe2};
  EXPECT_EQ(Feth::decode(reserved_set), (Feth{0x2, 0x2}));
}

TEST(Headers, Reth) {
  const auto b = encode(Reth{0x00007f0012345678, 0xcafebabe, 16});
  const std::vector<uint8_t> want = {0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x56, 0x78,
                                     0xca, 0xfe, 0xba, 0xbe, 0x00, 0x00, 0x00, 0x10};
  EXPECT_EQ(b, want);
  encode(Reth{~0ull, ~0u, ~0u});
  encode(Reth{});
}

TEST(Headers, AtomicEth) {
  const auto b = encode(AtomicEth{0x1122334455667788, 0x99aabbcc, 0x0102030405060708,
                                  0xf1f2f3f4f5f6f7f8});
  EXPECT_EQ(b[0], 0x11);
  EXPECT_EQ(b[8], 0x99);
  EXPECT_EQ(b[12], 0x01);  // swap/add starts at byte 12, unaligned
  EXPECT_EQ(b[19], 0x08);
  EXPECT_EQ(b[20], 0xf1);  // compare
  EXPECT_EQ(b[27], 0xf8);
  encode(AtomicEth{~0ull, ~0u, ~0ull, ~0ull});
}

TEST(Headers, AtomicAckEth) {
  const auto b = encode(AtomicAckEth{0x8000000000000001});
  EXPECT_EQ(b, (std::vector<uint8_t>{0x80, 0, 0, 0, 0, 0, 0, 0x01}));
}

TEST(Headers, ImmDtIsTheWireWordAsANumber) {
  EXPECT_EQ(encode(ImmDt{0xdeadbeef}), (std::vector<uint8_t>{0xde, 0xad, 0xbe, 0xef}));
}

TEST(Headers, Ieth) {
  EXPECT_EQ(encode(Ieth{0x01020304}), (std::vector<uint8_t>{1, 2, 3, 4}));
}

TEST(Headers, DethKeepsItsReservedByteZero) {
  const auto b = encode(Deth{0x11111111, 0x000042});
  EXPECT_EQ(b, (std::vector<uint8_t>{0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x42}));
  std::array<uint8_t, 8> in = {0x80, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe};
  const Deth d = Deth::decode(in.data());
  EXPECT_EQ(d.qkey, 0x80000001u);
  EXPECT_EQ(d.src_qp, 0xfffffeu);  // the reserved byte is not part of SrcQP
}

// IBA Annex A14: a reserved byte, then the 24-bit XRCSRQ.
TEST(Headers, XrcethIsAReservedByteThenTheSrqNumber) {
  EXPECT_EQ(encode(Xrceth{0xabcdef}), (std::vector<uint8_t>{0x00, 0xab, 0xcd, 0xef}));
  std::array<uint8_t, 4> in = {0xff, 0x00, 0x10, 0x01};
  EXPECT_EQ(Xrceth::decode(in.data()).srqn, 0x001001u);  // the reserved byte is ignored
}

}  // namespace
}  // namespace softverbs::wire
