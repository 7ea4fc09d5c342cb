// Event channels and events.
#include <rdma/rdma_cma.h>

#include "abi/rdmacm/abi.h"
#include "cm/agent.h"
#include "cm/cm.h"
#include "cm/event_channel.h"

using softverbs::cm::EventChannel;

SV_EXPORT rdma_event_channel* rdma_create_event_channel() {
  softverbs::cm::Agent::get().contexts();
  EventChannel* ch = EventChannel::create();
  return ch != nullptr ? ch->pub() : nullptr;
}

SV_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel != nullptr) delete EventChannel::from(channel);
}

SV_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  return softverbs::cm::get_event(channel != nullptr ? EventChannel::from(channel) : nullptr, event);
}

SV_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) { return softverbs::cm::ack_event(event); }

SV_EXPORT int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  return softverbs::cm::migrate_id(id, channel != nullptr ? EventChannel::from(channel) : nullptr);
}
