// The requester: turns a QP's posted send WQEs into requests on its fabric,
// in order, honouring fences and the retry schedule (IBA 9.7.2 / 10.8.3).
#pragma once

#include "transport/send_side.h"

namespace softverbs::transport {

// REQUIRES: side.lock held. Sends what may be sent now.
void progress(SendSide& side);
// REQUIRES: side.lock held. A scheduled retry is due.
void on_timer(SendSide& side);

}  // namespace softverbs::transport
