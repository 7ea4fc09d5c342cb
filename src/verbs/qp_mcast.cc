// ibv_attach_mcast / ibv_detach_mcast: the QP's membership in the port's
// multicast groups lives in the segment (shm/mcast_groups.h), where every
// sender on this host finds it; a RoCE port also joins the IP group.
#include <cerrno>

#include "fabric/fabrics.h"
#include "shm/mcast_groups.h"
#include "verbs/context.h"
#include "verbs/device.h"
#include "verbs/port_config.h"
#include "verbs/qp.h"

namespace softverbs::verbs {
namespace {

// ibv_attach_mcast(3), and the kernel's checks before a driver sees it
// (ib_attach_mcast): UD only, a multicast GID, and on InfiniBand a multicast
// LID (a RoCE port ignores the LID, RoCE annex A16/A17).
Status check(const ibv_qp& qp, const ibv_gid* gid, uint16_t lid) {
  if (gid == nullptr || qp.qp_type != IBV_QPT_UD || !shm::is_multicast_gid(gid->raw)) return Status::error(EINVAL);
  if (!port_config().roce && !shm::is_multicast_lid(lid)) return Status::error(EINVAL);
  return Status::ok();
}

}  // namespace

Status Qp::attach_mcast(const ibv_gid* gid, uint16_t lid) {
  SV_RETURN_IF_ERROR(check(ex_.qp_base, gid, lid));
  Device& dev = ctx_->device();
  std::lock_guard lock(modify_mu_);  // one membership change of this QP at a time
  const shm::McastChange c = shm::mcast_attach(dev.seg(), gid->raw, lid, shared_->qpn);
  if (c.error != 0) return Status::error(c.error);
  if (c.added) {
    if (Status s = fabric::join_multicast(dev, gid->raw); !s.is_ok()) {
      shm::mcast_detach(dev.seg(), gid->raw, shared_->qpn);
      return s;
    }
  }
  return Status::ok();
}

Status Qp::detach_mcast(const ibv_gid* gid, uint16_t lid) {
  SV_RETURN_IF_ERROR(check(ex_.qp_base, gid, lid));
  Device& dev = ctx_->device();
  std::lock_guard lock(modify_mu_);
  if (const int e = shm::mcast_detach(dev.seg(), gid->raw, shared_->qpn); e != 0) return Status::error(e);
  fabric::leave_multicast(gid->raw);
  return Status::ok();
}

void Qp::detach_all_mcast() {
  if (shared_->qp_type != IBV_QPT_UD) return;
  Device& dev = ctx_->device();
  std::lock_guard lock(modify_mu_);
  shm::mcast_detach_all(dev.seg(), shared_->qpn, [](const uint8_t* mgid) { fabric::leave_multicast(mgid); });
}

}  // namespace softverbs::verbs
