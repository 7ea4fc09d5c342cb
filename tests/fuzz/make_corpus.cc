// Writes the wire fuzzer's seed corpus: for every opcode softverbs accepts,
// packets built by PacketBuilder with payloads that cover every pad count,
// each as a bare IB packet and inside IPv4 and IPv6 framing. Seeds that
// already parse let the fuzzer start from deep inside the parsers instead of
// rediscovering the opcode table byte by byte.
//
// Usage: wire_fuzz_corpus <directory>   (created if missing)
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/packet.h"
#include "wire/roce_udp.h"

namespace {

using namespace softverbs::wire;

bool write_file(const std::string& path, std::span<const uint8_t> bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

TransportHeaders headers_for(Opcode op, uint32_t n) {
  TransportHeaders h;
  h.bth.opcode = op;
  h.bth.dest_qp = 0x000100 + n;
  h.bth.psn = Psn(0xfffffe + n);  // straddles the 24-bit wrap
  h.bth.ack_req = (n & 1) != 0;
  h.bth.solicited = (n & 2) != 0;
  h.reth = Reth{0x00007f0000001000ull + n, 0x1234 + n, 4096};
  h.aeth = (n % 3 == 0) ? Aeth::ack(kCreditCodeInvalid, n)
           : (n % 3 == 1) ? Aeth::rnr_nak(14, n)
                          : Aeth::nak(NakCode::kRemoteAccessError, n);
  h.atomic_eth = AtomicEth{0x2000, 0x99, 1, 2};
  h.atomic_ack_eth = AtomicAckEth{0x0102030405060708ull};
  h.immdt = ImmDt{0xdeadbeef};
  h.ieth = Ieth{0x4242};
  h.deth = Deth{0x11111111, 0x000007};
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  size_t written = 0;
  for (unsigned code = 0; code < 256; ++code) {
    const Opcode op = static_cast<Opcode>(code);
    const OpcodeInfo& info = opcode_info(op);
    if (!info.valid()) continue;
    for (uint32_t len : {0u, 1u, 2u, 3u, 8u, 61u}) {
      if (!info.is(OpFlag::kPayload) && len != 0) continue;
      std::vector<uint8_t> payload(len);
      for (uint32_t i = 0; i < len; ++i) payload[i] = static_cast<uint8_t>(0xa0 + i);
      const size_t ib_len = PacketBuilder::packet_length(op, len);
      const std::string stem = dir + "/" + info.name + "_" + std::to_string(len);

      std::vector<uint8_t> ib(ib_len);
      PacketBuilder b(ib);
      if (b.build(headers_for(op, len), payload) != PacketError::kOk) return 1;
      if (!write_file(stem + "_ib", ib)) return 1;

      for (IpVersion v : {IpVersion::kV4, IpVersion::kV6}) {
        RoceUdpHeader h;
        h.version = v;
        h.src = gid_from_ipv4(192, 168, 0, 1);
        h.dst = gid_from_ipv4(192, 168, 0, 2);
        if (v == IpVersion::kV6) {
          h.src = Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
          h.dst = Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
        }
        const size_t head = encap_length(v);
        std::vector<uint8_t> dg(head + ib_len);
        std::memcpy(dg.data() + head, ib.data(), ib_len);
        if (roce_encapsulate(dg, h) != EncapError::kOk) return 1;
        if (!write_file(stem + (v == IpVersion::kV4 ? "_v4" : "_v6"), dg)) return 1;
      }
      written += 3;
    }
  }
  std::printf("wire_fuzz_corpus: %zu seeds in %s\n", written, dir.c_str());
  return 0;
}
