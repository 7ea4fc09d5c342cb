// The objects of the device that live in its shared segment.
//
// Every process attached to the device maps the segment read-write at some
// base address; objects refer to each other by slot index and to ring memory
// by segment offset, never by pointer.
//
// Who writes what, and when, is the numbered list "Invariants" in
// docs/DESIGN.md, the one copy; code cites its numbers ("objects.h invariant
// N" and "DESIGN.md invariant N" mean the same entry).
// Those about this file's objects: 1 (slots allocated under
// SegmentHeader::control), 2 (configuration written by the owner, published
// by release), 3 (one writer of a QP's ResponderState), 4 (RecvQueue: one
// producer, CAS consumers), 5 (CqRing: CAS producers, one consumer), 6 (one
// writer per cache line, counters), 7 (two-phase reclaim of a dead process).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shm/limits.h"

namespace softverbs::shm {

using Offset = uint64_t;  // byte offset within the segment; 0 = none

enum class SlotState : uint32_t { kFree = 0, kLive = 1, kDead = 2 };

// Identifies the process that owns an object: slot plus that slot's generation.
struct OwnerId {
  uint32_t slot = 0;
  uint32_t generation = 0;
  bool operator==(const OwnerId&) const = default;
};

// kAtomicStore: ATOMIC WRITE's 64-bit store of operand2 (layout version 8).
enum class BounceOp : uint32_t { kWrite = 1, kRead = 2, kCmpSwap = 3, kFetchAdd = 4, kAtomicStore = 5 };
enum class BounceState : uint32_t { kFree = 0, kClaimed = 1, kRequested = 2, kDone = 3 };

// A request from a peer that can reach this process's memory in no other way;
// served by the owner's service thread (fabric/host/bounce_server.cc).
struct alignas(64) BounceSlot {
  std::atomic<uint32_t> state;  // BounceState; futex word for the requester
  uint32_t op;                  // BounceOp
  uint32_t mr_slot;
  uint32_t rkey;
  uint64_t addr;                // owner virtual address
  uint32_t length;
  int32_t result;               // errno, 0 on success
  uint64_t operand1;
  uint64_t operand2;
  uint64_t original;
  Offset buffer;                // kBounceBytes of segment memory
};

// Port counters. Each process counts its own (no cache line shared across
// processes on the datapath); the header holds what dead processes counted.
struct PortCounters {
  std::atomic<uint64_t> xmit_packets;
  std::atomic<uint64_t> xmit_bytes;
  std::atomic<uint64_t> rcv_packets;
  std::atomic<uint64_t> rcv_bytes;
  std::atomic<uint64_t> rcv_errors;
  std::atomic<uint64_t> local_access_errors;
  std::atomic<uint64_t> remote_access_errors;
  std::atomic<uint64_t> cq_overruns;
  std::atomic<uint64_t> dropped_requests;
  // Packet fabrics (RoCEv2/UDP).
  std::atomic<uint64_t> icrc_errors;        // dropped: ICRC mismatch
  std::atomic<uint64_t> malformed_packets;  // dropped: headers that do not parse
  std::atomic<uint64_t> unknown_qp_packets; // dropped: no QP of ours has that number
  std::atomic<uint64_t> send_errors;        // the socket refused a datagram (counted as lost)
  // What SOFTVERBS_FAULTS did to the datagrams we sent.
  std::atomic<uint64_t> faults_dropped;
  std::atomic<uint64_t> faults_duplicated;
  std::atomic<uint64_t> faults_reordered;
  std::atomic<uint64_t> faults_corrupted;
  std::atomic<uint64_t> faults_delayed;
  // Requests whose SL the port maps to VL15, or that VL arbitration never
  // gave a turn (transport/vl.h), never sent.
  std::atomic<uint64_t> sl_vl15_discards;
  // Requests sent while the port was not ACTIVE (IBA 7.2): discarded at the
  // port, as a link that is not up discards them (layout version 14).
  std::atomic<uint64_t> port_state_discards;
  // PMA PortXmitDataSL / PortRcvDataSL (4-octet words, LRH to ICRC): the
  // host fabric's per-QP shares of QPs that are gone or changed SL, under
  // the SL they had (shm::fold_port_share).
  std::atomic<uint64_t> xmit_words_sl[16];
  std::atomic<uint64_t> rcv_words_sl[16];
  // PMA PortVLOpPackets: the packets received, under the receiving QP's SL
  // as rcv_words_sl (the PMA maps SL to VL when it is read; layout
  // version 15).
  std::atomic<uint64_t> rcv_packets_sl[16];
  // The packets sent, under the sending QP's SL as xmit_words_sl: what the
  // facing switch port of a topology received per VL (layout version 16).
  std::atomic<uint64_t> xmit_packets_sl[16];
  // The packets received whose BTH opcode the PMA's OpCode selectors name
  // (shm/op_select.h), counted only while one is applied (layout version
  // 19): PortOpRcvCounters' packets and words, and per SL (mapped to VLs
  // when read, as rcv_packets_sl) PortVLOpPackets' packets and
  // PortVLOpData's words.
  std::atomic<uint64_t> op_rcv_packets;
  std::atomic<uint64_t> op_rcv_words;
  std::atomic<uint64_t> vl_op_packets_sl[16];
  std::atomic<uint64_t> vl_op_words_sl[16];
};

struct alignas(64) ProcessSlot {
  std::atomic<uint32_t> state;  // SlotState
  uint32_t generation;
  int32_t pid;
  uint32_t reserved;
  uint64_t start_time;          // from /proc/<pid>/stat, defends against pid reuse
  uint64_t dead_since_ns;
  pthread_mutex_t liveness;     // robust, process-shared; the owner's service thread holds it

  alignas(64) std::atomic<uint32_t> doorbell;  // futex word the service thread sleeps on
  std::atomic<uint32_t> sleeping;
  std::atomic<uint32_t> cma_refused;           // peers found process_vm_* refused for this target

  // Work for the service thread, set by peers before they ring the doorbell.
  alignas(64) std::atomic<uint64_t> cq_event_bits[kMaxCqs / 64];
  std::atomic<uint64_t> qp_event_bits[kMaxQpSlots / 64];
  std::atomic<uint64_t> srq_event_bits[kMaxSrqs / 64];  // XRC SRQ limits
  BounceSlot bounce[kBounceSlots];
  alignas(64) PortCounters port;
};

struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct RecvWqe {
  uint64_t seq;       // index + 1 once the entry at index is published
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t reserved;
  Sge sge[];  // stride = sizeof(RecvWqe) + max_sge * sizeof(Sge)
};

struct RecvQueue {
  Offset ring;
  uint32_t capacity;  // power of two
  uint32_t stride;
  uint32_t max_sge;
  std::atomic<uint32_t> limit;  // SRQ limit (IBV_EVENT_SRQ_LIMIT_REACHED), 0 = disarmed
  // Consumers find published entries by their seq, never by reading tail.
  // The owner learns which slots are free from the receive completions it
  // polls (as mlx5 does), and re-reads head only when that and its last look
  // at head both say full: a take and a post then touch the other side's
  // lines only for the entry itself, even on a queue kept full.
  alignas(64) std::atomic<uint64_t> head;  // consumers claim by CAS
  alignas(64) std::atomic<uint64_t> tail;  // the owner publishes
  std::atomic<uint64_t> head_seen;         // the owner's last look at head
  std::atomic<uint64_t> polled;            // 1 + the last entry whose completion the owner polled
};

// IBA 9.7.5.1.5 / C9-155: a duplicate atomic is answered with the original
// result, never executed again; the responder keeps the last results by PSN.
struct AtomicReplay {
  uint32_t psn;
  uint32_t valid;
  uint64_t original;
};

// The message the responder is in the middle of (multi-packet messages on the
// UDP fabric; on the host fabric every message is one "only" packet).
struct ResponderState {
  uint32_t epsn;            // next expected PSN
  uint32_t msn;             // messages completed, for AETH
  uint32_t in_message;      // 1 while a SEND or WRITE spans packets
  uint32_t opcode_family;   // of the message in progress
  uint64_t write_va;        // WRITE: next remote address
  uint32_t write_rkey;
  uint32_t write_remaining;
  uint32_t write_length;    // WRITE: the whole message (its RETH), for a receive completion
  uint32_t reserved0;
  uint32_t recv_offset;     // SEND: bytes placed so far
  uint32_t recv_valid;      // a receive WQE has been taken for the message
  uint64_t recv_wr_id;
  uint64_t recv_index;      // its index in the receive queue
  uint32_t recv_num_sge;
  uint32_t recv_from_srq;
  uint32_t psn_nak_sent;    // one PSN sequence NAK per gap (IBA 9.7.5.1.2)
  uint32_t atomic_next;     // next AtomicReplay slot
  Sge recv_sge[kMaxSge];
  AtomicReplay atomics[kMaxRdAtomic];
};

// Per-QP counters, at least what Linux Soft-RoCE exposes. The requester's
// (written by the QP's owner) and the responder's (written by whoever runs its
// responder: on the host fabric, the peer's process) sit on separate cache
// lines, so a message does not move a line between the two cores.
// One writer at a time: the requester's under the QP's send-side lock, an
// RC/UC responder's by its one connected requester (DESIGN.md invariant 3);
// only a UD QP's responder counters have concurrent writers (any sender).
struct QpCounters {
  // Requester side.
  alignas(64) std::atomic<uint64_t> sent_packets;  // requests, retransmissions included
  std::atomic<uint64_t> sent_messages;
  std::atomic<uint64_t> sent_bytes;
  std::atomic<uint64_t> rnr_naks_received;
  std::atomic<uint64_t> retries;
  std::atomic<uint64_t> retry_exceeded;
  std::atomic<uint64_t> rnr_retry_exceeded;
  std::atomic<uint64_t> remote_errors;
  std::atomic<uint64_t> sequence_naks_received;
  // The host fabric's share of the port's packet and byte counters, counted
  // here (one writer) rather than in the process's PortCounters (any of its
  // threads: a locked add each); folded into those when the QP goes
  // (shm::fold_port_share), and added to them by whoever reads the port.
  std::atomic<uint64_t> port_xmit_packets;
  std::atomic<uint64_t> port_xmit_bytes;
  std::atomic<uint64_t> port_rcv_packets;
  std::atomic<uint64_t> port_rcv_bytes;
  // Requester side again, in what was the line's padding (the layout is
  // unchanged): local ACK timeouts that expired, and tail-loss probes sent
  // (packet links: completer.cc).
  std::atomic<uint64_t> ack_timeouts;
  std::atomic<uint64_t> tail_probes;
  // Responder side.
  alignas(64) std::atomic<uint64_t> received_packets;  // requests that reached the responder
  std::atomic<uint64_t> received_messages;
  std::atomic<uint64_t> received_bytes;
  std::atomic<uint64_t> rnr_naks_sent;
  std::atomic<uint64_t> duplicate_requests;
  std::atomic<uint64_t> out_of_sequence;
};

static_assert(offsetof(QpCounters, received_packets) == 128 && sizeof(QpCounters) == 192,
              "QpCounters keeps its layout (segment version)");

// Adds to a counter that has one writer at a time (QpCounters): a load and a
// store rather than a locked add, which would first wait for every store
// before it to drain — a message's payload and CQE on the peer's lines.
inline void add_single_writer(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// The QP's configuration lines are written at create/modify time only and
// read by every peer's responder; what the datapath writes lives on lines of
// its own, grouped by writer (the owner's requester, or the peer running the
// responder), so that the configuration stays shared in both cores' caches.
struct alignas(64) SharedQp {
  std::atomic<uint32_t> slot_state;  // SlotState
  uint32_t qpn;
  OwnerId owner;
  uint64_t dead_since_ns;            // kDead: when; memory is freed after a grace period
  uint8_t qp_type;                   // enum ibv_qp_type
  std::atomic<uint8_t> state;        // enum ibv_qp_state
  uint8_t port_num;
  uint8_t path_mtu;                  // enum ibv_mtu
  std::atomic<uint8_t> min_rnr_timer;
  uint8_t max_dest_rd_atomic;
  uint8_t sq_sig_all;
  uint8_t block_self_mcast;          // IBV_QP_CREATE_BLOCK_SELF_MCAST_LB
  // The SL its counters' port share belongs to (PMA PortXmitDataSL): the
  // path's; a UD QP's last send's. Its owner folds the share before changing it.
  std::atomic<uint8_t> sl;
  uint8_t traffic_class;             // the path's GRH traffic class: RoCE responses carry it (DSCP/ECN)
  // The CA whose port 1 the QP sits behind (issue 19): 0 the device's own,
  // k > 0 the topology's k-th other CA (softverbsk). The host link carries
  // a request between two QPs of CA 0 on its fast path, anything else only
  // where the subnet's links and forwarding tables do.
  uint8_t ca;
  // Created with source QPN 1 (IBV_QP_CREATE_SOURCE_QPN): a GSI agent's QP,
  // which takes a request whose P_Key matches any entry of its port's table
  // (IBA 10.9.3; layout version 19).
  uint8_t gsi;
  std::atomic<uint32_t> access_flags;  // qp_access_flags
  uint32_t pd_id;
  uint32_t dest_qpn;
  uint32_t qkey;
  uint32_t recv_cq;                  // CQ slot
  uint32_t send_cq;
  uint32_t srq;                      // SRQ slot + 1; 0 = none
  uint32_t xrcd;                     // XRC_RECV: its domain's slot + 1; 0 = none
  uint16_t dlid;
  uint16_t pkey_index;
  // The P_Key at pkey_index (shm/port_pkeys.h): what its packets carry and
  // what a request to it must match; pkey_fast is what a request may carry
  // to pass with one compare (shm::fast_pkey). Written under
  // SegmentHeader::control, by its owner's modify or by an SM's
  // Set(P_KeyTable) in any process (shm/qp_pkeys.h), with __atomic stores;
  // the data path reads them without a lock. Plain fields, as `lid`: the
  // data path's relaxed loads stay plain loads.
  uint16_t pkey;
  uint32_t pkey_fast;
  std::atomic<uint64_t> pending_async;  // bits (1 << ibv_event_type) raised by peers
  RecvQueue rq;
  // Written by the responder.
  alignas(64) uint32_t requester_qpn;  // QPN of the peer that last sent to us
  ResponderState resp;
  // Written by the owner's requester.
  alignas(64) uint8_t host_path;       // fabric::host::Path our requests last used
  QpCounters counters;
};

// A receive ring an SRQ outgrew (ibv_modify_srq, shm::rq_move): a responder
// that looked the ring up before the move may still read it, so it is freed
// with the SRQ's slot (invariant 7), never before.
struct RetiredRing {
  Offset ring;
  uint64_t bytes;
};

struct alignas(64) SharedSrq {
  std::atomic<uint32_t> slot_state;
  OwnerId owner;
  uint64_t dead_since_ns;
  uint32_t pd_id;
  uint32_t recv_cq;                  // XRC SRQs: their CQ (a basic SRQ's QPs name their own)
  uint32_t xrcd;                     // XRC SRQs: the domain's slot + 1; 0 = a basic SRQ
  uint32_t srqn;                     // XRC SRQ number: generation above the slot (kept across claims)
  std::atomic<uint64_t> pending_async;
  RecvQueue rq;
  // Each move at least doubles the ring, up to kMaxSrqWr entries.
  uint32_t retired_count;
  RetiredRing retired[kMaxSrqRingMoves];
};

// One work completion; the fields of struct ibv_wc that a producer fills.
struct Cqe {
  uint64_t wr_id;
  uint32_t byte_len;
  uint32_t imm_data;     // network byte order, as in ibv_wc
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t vendor_err;
  uint32_t sq_index;     // send WQE index, for retiring the send queue; kRecv for receives
  uint16_t wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t status;        // enum ibv_wc_status
  uint8_t opcode;        // enum ibv_wc_opcode
  uint8_t sl;
  uint8_t dlid_path_bits;
  uint8_t solicited;
  uint8_t reserved;
  uint64_t rq_index;     // receives from a QP's own queue: the entry's index
  static constexpr uint32_t kRecv = 0xffffffffu;
};
static_assert(sizeof(Cqe) <= 56);

struct alignas(64) CqeSlot {
  std::atomic<uint64_t> seq;  // index + 1 once the entry at index is published
  Cqe cqe;
};
static_assert(sizeof(CqeSlot) == 64);

enum CqArm : uint32_t { kCqDisarmed = 0, kCqArmAny = 1, kCqArmSolicited = 2 };

struct alignas(64) SharedCq {
  std::atomic<uint32_t> slot_state;
  OwnerId owner;
  uint64_t dead_since_ns;
  uint32_t capacity;  // power of two
  uint32_t cqe;       // what ibv_cq.cqe reports
  Offset ring;        // capacity CqeSlots
  // Completion timestamps (ibv_create_cq_ex IBV_WC_EX_WITH_COMPLETION_TIMESTAMP*):
  // capacity uint64_t adapter-clock ticks right after the ring, one per slot,
  // written by the producer before it publishes the slot; 0 = none kept.
  Offset stamps;
  std::atomic<uint32_t> armed;    // CqArm
  std::atomic<uint32_t> overrun;  // set once; the CQ is in error
  alignas(64) std::atomic<uint64_t> tail;  // producers reserve by CAS
  std::atomic<uint64_t> head_seen;         // producers' last look at head: re-read only when full
  alignas(64) std::atomic<uint64_t> head;  // the owner consumes
};

struct alignas(64) SharedMr {
  std::atomic<uint32_t> rkey;  // 0 = free; stored last when registering, first when deregistering
  uint32_t lkey;
  OwnerId owner;
  uint32_t pd_id;
  uint32_t access;             // enum ibv_access_flags
  uint64_t addr;               // owner virtual address of the first byte
  uint64_t length;
  uint64_t iova;               // the address peers and SGEs use for the first byte
  uint64_t reg_seq;            // distinguishes registrations that reused this slot
  // Map path: the owner's memfd that backs [map_base, map_base + map_size).
  int32_t map_fd;              // fd number in the owner, -1 when not mappable
  uint32_t reserved;
  uint64_t map_base;
  uint64_t map_size;
  uint64_t map_ino;
  uint64_t map_dev;
  // Memory windows share the table (slots from kFirstMwSlot): a bound window
  // is a slot whose range, access and key are the window's and whose map
  // fields are its MR's, so every check and path treats it as a region.
  uint32_t mw_type;             // 0: an MR; IBV_MW_TYPE_1 or IBV_MW_TYPE_2
  uint32_t mw_qpn;              // type 2: the one QP that may use it (IBA 10.6.7.2.2); else 0
  uint32_t mw_mr_slot;          // the MR the window is bound to
  std::atomic<uint32_t> bound_windows;  // an MR: windows bound to it (ibv_dereg_mr: EBUSY while any)
};
static_assert(sizeof(SharedMr) == 128);

// A multicast group of the port (IBA 10.5.2.5, ibv_attach_mcast): the QPs
// attached to it. Written under SegmentHeader::control (invariant 1): the
// MGID and MLID before `members` turns nonzero (release), each QPN entry by
// one store. Senders read it without a lock: `members` (acquire), the key,
// then each entry; a QPN names its generation, so an entry left by a QP that
// is gone reaches nothing (qp_slot_of) and is reclaimed by the next attach.
struct alignas(64) SharedMcastGroup {
  std::atomic<uint32_t> members;  // QPN entries in use; 0 = the group is free
  uint16_t mlid;
  uint16_t reserved;
  uint8_t mgid[16];
  std::atomic<uint32_t> qpn[kMaxMcastQpAttach];  // 0 = empty entry
};

// An XRC domain (ibv_open_xrcd). One opened through a file is found by the
// file's inode, so that every process opening that file shares it; ino 0 is
// a domain private to its opener. Written under SegmentHeader::control only;
// the responder reads slot_state to check an SRQ's domain is still there.
struct alignas(64) SharedXrcd {
  std::atomic<uint32_t> slot_state;  // SlotState: kLive while opened, else kFree
  uint32_t opens;                    // handles open, all processes together
  uint64_t dev;
  uint64_t ino;
  uint16_t opens_by[kMaxProcesses];  // per process slot: what a dead process held
};

// The port's QoS tables (shm/port_qos.h says who writes and reads them).
// Layout version 10. Entries are atomics so that a Set racing a reader is
// defined; a VL arbitration entry is VL << 8 | weight.
inline constexpr unsigned kVlArbCap = 8;  // entries per priority table (PortInfo:VLArb*Cap)
struct alignas(64) PortQos {
  std::atomic<uint32_t> generation;  // bumped after every change
  // 1 when the first process to attach claims it, 2 once it has given the
  // port the tables of its SOFTVERBS_QOS_CONFIG or topology file, if any
  // (mad/qos_config_file.h, mad/topology_qos.h).
  std::atomic<uint32_t> boot_claimed;
  std::atomic<uint8_t> oper_vls;     // PortInfo:OperationalVLs encoding
  std::atomic<uint8_t> vl_high_limit;
  std::atomic<uint8_t> sl_to_vl[16];
  std::atomic<uint16_t> vl_arb_low[kVlArbCap];
  std::atomic<uint16_t> vl_arb_high[kVlArbCap];
};

// The port's link (issue 20, shm/port_link.h): its width x speed and, when
// pacing is on, the transmit state every initiator of the port shares, one
// line per VL. Nothing here is held: a lane's reservation is a time, so a
// process that dies after taking one leaves at most that much idle link.
inline constexpr unsigned kVls = 16;
struct alignas(64) VlLane {
  std::atomic<uint64_t> free_at_ns;    // the end of the lane's last reservation (CAS)
  std::atomic<uint64_t> waiting_ns;    // the last time a sender waited here without a share
  std::atomic<uint64_t> xmit_words;    // what left on this VL, as PortXmitData counts (4-octet words)
  std::atomic<uint64_t> xmit_packets;
  // What its senders spent waiting while other VLs had the link (or none
  // had a share for it): PMA PortXmitWait and PortVLXmitWaitCounters.
  std::atomic<uint64_t> xmit_wait_ns;
};
struct alignas(64) PortLink {
  std::atomic<uint32_t> config;  // 0 until the first attach: shm::LinkConfig packed (port_link.h)
  alignas(64) VlLane lane[kVls];
};

// VL15's receive buffer (issue 20, mad/vl15_buffer.h): the subnet
// management packets the port has taken in and its SMA not yet answered.
// A slot is a lease, claimed by CAS and never locked, so a process that dies
// holding one loses it only until the lease ends. Off the data path: only
// MADs touch it, and `dropped` is shared by every process.
inline constexpr unsigned kVl15BufferMax = 64;
struct alignas(64) Vl15Buffer {
  std::atomic<uint32_t> capacity;  // 0 until the first SMP: SOFTVERBS_VL15_BUFFER, then fixed
  std::atomic<uint64_t> dropped;   // SMPs that found every slot taken (PMA VL15Dropped)
  alignas(64) std::atomic<uint64_t> slot[kVl15BufferMax];  // 0 free, else when its lease ends (ns)
};

// The port's asynchronous events (shm/port_events.h), for every process's
// service thread to raise on its open contexts. Entry i holds the event of
// sequence number i (mod kPortEventLog) as (seq mod 2^16) << 16 | device << 8 |
// ibv_event_type (device: 0 the device's own port, k a topology's softverbsk),
// so a reader that fell a whole lap behind sees the sequence it expected is
// gone. Appended under SegmentHeader::control; read without a lock. Layout
// version 18.
inline constexpr unsigned kPortEventLog = 32;
struct alignas(64) PortEventLog {
  std::atomic<uint32_t> head;  // the sequence number the next event takes
  std::atomic<uint32_t> entry[kPortEventLog];
};

// The port's P_Key table (shm/port_pkeys.h says who writes and reads it).
// Layout version 18. `violations` counts requests the port dropped for their
// P_Key (PortInfo:P_KeyViolations, ibv_port_attr.bad_pkey_cntr).
inline constexpr unsigned kPKeyTableCap = 32;  // NodeInfo:PartitionCap: one P_KeyTable block
struct alignas(64) PortPKeys {
  std::atomic<uint32_t> generation;  // bumped after every change
  std::atomic<uint16_t> entry[kPKeyTableCap];
  std::atomic<uint64_t> violations;
};

// One past the highest slot of each table ever claimed; never lowered.
// Walks over every object of a kind (a process's death, a sweep, the PMA's
// totals, a P_Key table change) stop there instead of at the table's end,
// so a device whose processes used a few slots touches a few pages of its
// tables, not all of them (shm/slot_high_water.h). Raised by the claim,
// under SegmentHeader::control, before the slot is used. Layout version 21.
struct alignas(64) SlotHighWater {
  std::atomic<uint32_t> qps;
  std::atomic<uint32_t> cqs;
  std::atomic<uint32_t> srqs;
  std::atomic<uint32_t> mrs;      // the key table's lower half (memory regions)
  std::atomic<uint32_t> windows;  // its upper half, as slots from kFirstMwSlot
};

struct alignas(4096) SegmentHeader {
  std::atomic<uint64_t> magic;  // stored last by the creator
  uint32_t layout_version;
  uint32_t reserved;
  uint64_t segment_bytes;
  uint64_t node_guid;          // network byte order, as ibv_device_attr.node_guid
  uint64_t port_guid;          // network byte order
  // The port's addresses and logical state (IBA 14.2.5.6 PortState: 2 INIT
  // ... 4 ACTIVE). With the built-in SM constant (LID 1, ACTIVE); with an
  // external SM (`external_sm`, fixed at creation) written by the SMA's
  // PortInfo Sets under `control` with __atomic stores, read without a lock.
  // The LIDs stay plain fields: the host fabric reads `lid` per message,
  // and a std::atomic there would constrain how the compiler may load it.
  uint16_t lid;
  uint16_t sm_lid;
  std::atomic<uint8_t> port_state;
  uint8_t external_sm;
  uint16_t reserved2;
  pthread_mutex_t control;     // robust, process-shared: slot and arena allocation only
  std::atomic<uint32_t> next_pd_id;
  std::atomic<uint32_t> arena_hint;
  std::atomic<uint64_t> next_reg_seq;
  std::atomic<uint32_t> pending_reclaim;  // objects in kDead waiting for phase 2
  // The PMA's OpCode selectors (shm/op_select.h): 0 until a PMA Set applies
  // one, so the data path's test of it stays a load and a compare.
  std::atomic<uint32_t> op_select;
  PortCounters port;  // totals of processes that are gone
  PortQos qos;
  PortLink link;
  Vl15Buffer vl15;
  PortEventLog port_events;
  PortPKeys pkeys;
  SlotHighWater high_water;
};

}  // namespace softverbs::shm
