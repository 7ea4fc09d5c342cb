// What the files of libibumad.so.3 share: the export macro and the device
// the library answers for (the one libibverbs.so.1 would open: same
// environment, same segment).
#pragma once

#include <infiniband/umad.h>

#include <string>

#include "shm/segment.h"

#define SV_UMAD_EXPORT extern "C" __attribute__((visibility("default")))

namespace softverbs::umad {

// The device's segment, attached (created, as libibverbs would) on first
// use; nullptr when the environment names no valid device. Thread-safe.
const shm::Segment* segment();
// The CA name, or nullptr when `name` (nullptr or "" for the default CA)
// is not ours.
const char* resolve_ca(const char* name);
// How many CAs are listed: the device's, and with a topology its other CAs
// (softverbs1…, mad/ca_devices.h), whose ports are described but cannot be
// opened for MADs.
unsigned listed_cas();
// The listed CA `name` names (0 for nullptr or ""), or -1.
int listed_ca(const char* name);
// The port number `portnum` means (0: the first active one), or -1.
int resolve_port(int portnum);
// umad_debug's level: 1 and up log what the library does to stderr.
int debug_level();
void set_debug_level(int level);

}  // namespace softverbs::umad
