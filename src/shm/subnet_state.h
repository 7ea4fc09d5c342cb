// The mutable state of a subnet's nodes beyond the device's own port
// (issue 19): what a subnet manager programs into them (LIDs, port states,
// the SM's address, QoS tables, the switches' forwarding tables), shared by
// every process that uses the same topology file.
//
// It lives in a file of its own beside the device segment (its path names
// the topology's hash, so another topology never sees it), not in the
// segment: the default device, without a topology, maps nothing more and
// the segment's layout is unchanged. Nodes and ports are indexed as in the
// topology (mad/topology.h), which is constant.
//
// Thread-safety: every read and write of `nodes` holds the robust,
// process-shared `lock` (SubnetLock); only the management plane touches this
// file, never the data path.
//
// Invariants:
//  1. A file whose magic is set is fully initialised (creation holds flock).
//  2. port_state 0 means "as the link leaves it": INIT on a linked port,
//     DOWN on a port without a link (the topology decides which, and a
//     disabled port at either end takes the link down).
#pragma once

#include <pthread.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "shm/port_qos.h"
#include "util/status.h"

namespace softverbs::shm {

inline constexpr unsigned kSubnetMaxNodes = 64;
inline constexpr unsigned kSubnetMaxPorts = 64;   // ports 0..63 of a node
inline constexpr unsigned kLftCap = 48 * 64;      // SwitchInfo:LinearFDBCap, 48 blocks
inline constexpr unsigned kMftCap = 32 * 32;      // SwitchInfo:MulticastFDBCap, 32 blocks
inline constexpr unsigned kMftPositions = kSubnetMaxPorts / 16;
inline constexpr uint8_t kLftUnset = 0xff;        // no route: the packet is dropped

// What the topology's other CAs sent through a port (issue 19: the data
// path between them, mad/data_route.h), raw since the last PMA reset of
// each counter: packets and 4-octet words as PortXmitData counts them,
// also per SL (PortXmitDataSL, PortRcvDataSL) and, received, per VL the
// link carried them on (PortVLOpPackets, PortVLOpData). The device's own
// traffic between its QPs is the segment's, never here.
struct SubnetTraffic {
  uint64_t xmit_packets = 0;
  uint64_t xmit_words = 0;
  uint64_t rcv_packets = 0;
  uint64_t rcv_words = 0;
  uint64_t xmit_discards = 0;  // IBA 7.6.6: dropped here for an SL on VL15
  uint64_t mcast_xmit_packets = 0;  // of the packets, those to a multicast LID
  uint64_t mcast_rcv_packets = 0;
  uint64_t xmit_words_sl[16] = {};
  uint64_t rcv_words_sl[16] = {};
  uint64_t rcv_packets_vl[16] = {};
  uint64_t rcv_words_vl[16] = {};
};

struct SubnetPort {
  uint64_t m_key = 0;
  uint8_t m_key_protect = 0;  // PortInfo:M_KeyProtectBits
  uint16_t lid = 0;
  uint16_t sm_lid = 0;
  uint8_t lmc = 0;
  uint8_t sm_sl = 0;
  uint8_t port_state = 0;     // IBA 14.2.5.6 PortState; 0: see invariant 2
  uint8_t subnet_timeout = 0;
  uint8_t neighbor_mtu = 5;   // 4096
  // PortInfo:PortPhysicalState set to Disabled (IBA 14.2.5.6): the link is
  // down at both ends until a Set of Polling enables the port again.
  uint8_t phys_disabled = 0;
  QosTables qos;
  // A CA port's P_Key table (an SM's Set(P_KeyTable)); switches' stay unset.
  std::array<uint16_t, kPKeyTableCap> pkeys{};
  SubnetTraffic traffic;
};

struct SubnetSwitch {
  uint16_t lft_top = 0;
  uint16_t mft_top = 0;
  uint8_t default_port = 0;
  uint8_t default_mcast_primary = 0;
  uint8_t default_mcast_not_primary = 0;
  uint8_t life_time = 0;
  uint8_t port_state_change = 0;  // SwitchInfo:PortStateChange (IBA 14.2.5.4)
  uint8_t lft[kLftCap];
  uint16_t mft[kMftCap][kMftPositions];  // port masks, 16 ports per position
  // IBA 14.2.5.8: a switch maps SL to VL per input and output port, so its
  // tables live here, [input][output], 4 bits per SL as on the wire (SL 2k
  // in the high nibble of byte k); its ports' SubnetPort::qos.sl_to_vl is
  // not used.
  uint8_t sl2vl[kSubnetMaxPorts][kSubnetMaxPorts][8];
};

// The VL of each SL from a packed table, and back.
inline void unpack_sl2vl(const uint8_t (&packed)[8], uint8_t (&vls)[16]) {
  for (unsigned sl = 0; sl < 16; ++sl)
    vls[sl] = static_cast<uint8_t>(sl % 2 == 0 ? packed[sl / 2] >> 4 : packed[sl / 2] & 0xf);
}
inline void pack_sl2vl(const uint8_t (&vls)[16], uint8_t (&packed)[8]) {
  for (unsigned i = 0; i < 8; ++i) packed[i] = static_cast<uint8_t>((vls[2 * i] & 0xf) << 4 | (vls[2 * i + 1] & 0xf));
}

struct SubnetNode {
  SubnetPort ports[kSubnetMaxPorts];
  SubnetSwitch sw;
};

struct SubnetFile {
  uint64_t magic;
  pthread_mutex_t lock;
  SubnetNode nodes[kSubnetMaxNodes];
};

class SubnetState {
 public:
  // Opens, creating and initialising on first use, the file at `path`
  // (0600, this user's, as the device segment). `on_create` adds to a new
  // file's first values (the topology's boot tables) before any other
  // process can see it.
  static Result<std::unique_ptr<SubnetState>> open(const std::string& path,
                                                   const std::function<void(SubnetNode* nodes)>& on_create = nullptr);
  ~SubnetState();
  SubnetState(const SubnetState&) = delete;
  SubnetState& operator=(const SubnetState&) = delete;

  // REQUIRES: the caller holds a SubnetLock.
  SubnetNode& node(unsigned i) const { return file_->nodes[i]; }
  void lock() const;
  void unlock() const;

 private:
  SubnetState() = default;
  SubnetFile* file_ = nullptr;
};

class SubnetLock {
 public:
  explicit SubnetLock(const SubnetState& s) : s_(s) { s_.lock(); }
  ~SubnetLock() { s_.unlock(); }
  SubnetLock(const SubnetLock&) = delete;
  SubnetLock& operator=(const SubnetLock&) = delete;

 private:
  const SubnetState& s_;
};

}  // namespace softverbs::shm
