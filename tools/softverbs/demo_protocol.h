// softverbs-demo: what the client and the server process say to each other
// over their socketpair, and where things lie in each side's registered buffer.
//
// Both processes run the same binary on the same host, so messages are raw
// structs. The client drives: it sends one Command, the server answers one
// Reply. The server only ever touches its own buffer and queues.
#pragma once

#include <cstddef>
#include <cstdint>

#include "demo_status.h"

namespace softverbs::demo {

// --- Buffer layout (identical on both sides) --------------------------------
inline constexpr size_t kArea = 16 * 1024;
inline constexpr size_t kSendArea = 0 * kArea;      // SEND lands here (server RECV buffer)
inline constexpr size_t kSendImmArea = 1 * kArea;   // SEND_WITH_IMM; also WRITE_WITH_IMM's RECV
inline constexpr size_t kWriteArea = 2 * kArea;     // RDMA WRITE target
inline constexpr size_t kWriteImmArea = 3 * kArea;  // RDMA WRITE_WITH_IMM target
inline constexpr size_t kReadArea = 4 * kArea;      // RDMA READ source (server) / sink (client)
inline constexpr size_t kAtomicArea = 5 * kArea;    // the 64-bit atomic word / its result
inline constexpr size_t kPingRecvArea = 6 * kArea;  // ping-pong receive slots
inline constexpr size_t kPingSendArea = 7 * kArea;  // ping-pong send slots
inline constexpr size_t kMinBuffer = 8 * kArea;
static_assert(kAtomicArea % 8 == 0, "atomics need 8-byte alignment");

inline constexpr uint32_t kCheckLen = 10000;  // functional messages: several MTUs, not a power of 2
inline constexpr uint8_t kPoison = 0xEE;      // every buffer starts as this; guards check it
inline constexpr size_t kGuard = 64;          // bytes after a message that must stay untouched
inline constexpr int kPingDepth = 16;         // receive slots pre-posted for ping-pong
inline constexpr size_t kPingSlot = 64;
inline constexpr uint64_t kPingStop = ~uint64_t{0};  // ping payload that ends the loop

// --- Messages ----------------------------------------------------------------
// What one side needs to connect to the other and to address its buffer.
struct EndpointInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint16_t lid = 0;
  uint8_t pad[2] = {};
  uint8_t gid[16] = {};
  uint64_t addr = 0;
  uint64_t size = 0;
};

enum class Op : uint32_t {
  kPostRecv = 1,  // post one RECV of `len` bytes at `offset`, wr_id = value
  kExpectRecv,    // wait for one receive completion and check it (flags), data at offset/len/seed
  kCheckMem,      // check the pattern `seed` at offset/len, and the guard after it
  kFill,          // write the pattern `seed` at offset/len
  kSetU64,        // store `value` at offset
  kGetU64,        // load the u64 at offset -> Reply::v1
  kPingPong,      // SEND ping-pong: post receives, answer Reply, echo until kPingStop, answer
  kQuit,          // answer, tear down, exit 0
};

inline constexpr uint32_t kExpectImm = 1;        // completion must carry imm == Command::imm
inline constexpr uint32_t kExpectWriteImm = 2;   // opcode RECV_RDMA_WITH_IMM (else RECV)
inline constexpr uint32_t kCheckGuard = 4;       // also check the kGuard bytes after the data

struct Command {
  Op op = Op::kQuit;
  uint32_t len = 0;
  uint64_t offset = 0;
  uint64_t seed = 0;
  uint64_t value = 0;
  uint32_t imm = 0;
  uint32_t flags = 0;
};

struct Reply {
  int32_t ok = 0;
  uint32_t pad = 0;
  uint64_t v1 = 0;
  uint64_t v2 = 0;
  char message[256] = {};
};

// The server's first words: did it open the device, and where is it.
struct Hello {
  Reply status;
  EndpointInfo info;
};

Reply ok_reply(uint64_t v1 = 0, uint64_t v2 = 0);
Reply error_reply(const Status& status);

// --- Channel -----------------------------------------------------------------
// Whole-message blocking I/O on one stream socket. Not thread-safe.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  Status send(const void* data, size_t len);
  // timeout_ms < 0 waits forever. Fails on EOF ("peer closed").
  Status recv(void* data, size_t len, int timeout_ms);

  template <class T>
  Status send(const T& msg) { return send(&msg, sizeof msg); }
  template <class T>
  Status recv(T* msg, int timeout_ms) { return recv(msg, sizeof *msg, timeout_ms); }

  // Sends `cmd`, waits for the Reply; a Reply with ok == 0 becomes a failure
  // "server: <message>".
  Status call(const Command& cmd, Reply* reply, int timeout_ms);

 private:
  int fd_;
};

// --- Data patterns -----------------------------------------------------------
uint8_t pattern_byte(uint64_t seed, size_t i);
void fill_pattern(uint8_t* p, size_t len, uint64_t seed);
// Checks p[0..len) against the pattern and, when guard > 0, that the guard
// bytes after it still hold kPoison. `what` names the memory in the message.
Status check_pattern(const uint8_t* p, size_t len, uint64_t seed, size_t guard, const char* what);

}  // namespace softverbs::demo
