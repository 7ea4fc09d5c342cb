// The port's IsSM capability under an external SM, as the kernel's issm
// device gives it (Documentation/infiniband/user_mad.rst): a process that
// holds the port's issm file open is a subnet manager, and the port's
// PortInfo:CapabilityMask bit 1 (IsSM, IBV_PORT_SM) says so until it closes
// the file or dies. opensm opens it with open(path, O_NONBLOCK) when it
// binds (libvendor/osm_vendor_ibumad.c, osm_vendor_set_sm).
//
// With no kernel module the file is a FIFO beside the device's segment
// (<segment>.issm1, made by umad_get_issm_path): a read-only open with
// O_NONBLOCK always succeeds at once, and an open for writing with
// O_NONBLOCK succeeds while some process still holds a read end and fails
// with ENXIO once none does (fifo(7)). So whoever reports the capability
// mask asks the kernel, and a holder that dies drops its end with nobody
// cleaning up after it. Unlike the kernel's device, a second holder is not
// refused (the kernel answers EAGAIN/blocks); both hold the bit.
//
// Cost: an open and a close, only where the mask is reported under an
// external SM (PortInfo, ibv_query_port, umad_get_port); the data path
// never asks.
#pragma once

#include <string>

namespace softverbs::verbs {

// The issm file of the device whose segment is `segment_path` (port 1).
std::string issm_path(const std::string& segment_path);

// Makes the FIFO if it is not there. 0, or the errno of mkfifo.
int make_issm(const std::string& path);

// Whether a process holds `path` open for reading (a missing file, or one
// that is not a FIFO, is held by nobody).
bool issm_held(const std::string& path);

}  // namespace softverbs::verbs
