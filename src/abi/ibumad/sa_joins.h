// The port's multicast memberships at the SA, shared by the processes that
// joined through it (issue 18). The SA keeps one MCMemberRecord per group
// and port GID (IBA 15.2.5.17: a second join ORs its JoinState in, a Delete
// takes bits out), so when two processes of one port join a group and both
// leave, the second Delete finds no member and is refused (status 0x0200).
// The kernel's ib_sa multicast module (drivers/infiniband/core/multicast.c)
// avoids this for its users by holding one SA membership per port and
// group and counting its members; libibumad does the same for the MADs
// its programs send: every join goes to the SA, and a leave goes there
// only for the JoinState bits no other live process of the port holds;
// when none is left to take out, the Delete is answered here.
//
// Registry: `<segment>.sa-joins/`, one file per process (named by its pid)
// of lines "MGID PortGID JoinState" (hex), its owner's shared flock held for
// life; a file whose flock can be taken exclusively belongs to a dead
// process and does not count. Changes and scans serialise on `.lock`.
//
// Thread-safety: both functions may be called from any thread.
#pragma once

#include <cstdint>

namespace softverbs::umad {

// A join (SubnAdmSet of an MCMemberRecord) is being sent: this process
// holds the record's JoinState bits of (MGID, PortGID) from now on.
void note_sa_join(const uint8_t* mad);

// A leave (SubnAdmDelete) is being sent: drops this process's bits and
// returns those of the record's JoinState that no other live process of the
// port holds (0: nothing for the SA to take out).
uint8_t sa_leave_bits(const uint8_t* mad);

}  // namespace softverbs::umad
