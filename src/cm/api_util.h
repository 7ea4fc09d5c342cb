// Helpers the librdmacm calls share (api.cc, api_connect.cc, api_qp.cc).
// Unless said otherwise they REQUIRE Agent::mu held.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "cm/agent.h"
#include "cm/id.h"
#include "wire/cm_mad.h"
#include "wire/cma_hdr.h"

namespace softverbs::cm {

// Private data a consumer may pass (IBA's sizes; a REQ's first 36 bytes are
// the CMA header).
inline constexpr size_t kReqUserBytes = wire::cm::Req::kPrivateBytes - wire::cm::CmaHeader::kBytes;  // 56
inline constexpr uint8_t kMaxRdAtomic = 16;  // softverbs' max_qp_rd_atom and max_qp_init_rd_atom
inline constexpr uint8_t kDefaultAckTimeout = 18;  // ~1 s: the transport's local ACK timeout

// -1 with errno `err`. No lock needed.
int fail(int err);
uint32_t random24();
uint64_t new_tid(Device* d);
// Sync mode: waits for the id's event (REQUIRES: mu not held).
int complete(CmId* id);
// complete() for a caller that holds the CM's lock: the wait must not.
int complete_unlocked(std::unique_lock<std::mutex>& lock, CmId* id);
void unbind(CmId* id);
// Takes the address's port in the port table of `devs` (every device for a
// wildcard address).
int bind_on(CmId* id, const sockaddr* addr, const std::vector<Device*>& devs);
bool family_ok(const sockaddr* sa);
// rdma_destroy_id: the id's QP, if still there, leaves its groups.
void leave_all_multicast(CmId* id);
void send_mad_rej(CmId* id, uint16_t reason, const void* data, size_t len);
void send_dreq(CmId* id, bool expect_answer);
int sidr_request(CmId* id, const rdma_conn_param* param);
void sidr_reply(CmId* id, uint8_t status, uint32_t qpn, const void* data, size_t len);

}  // namespace softverbs::cm
