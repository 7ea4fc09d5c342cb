#include "verbs/mr.h"

#include <sys/mman.h>
#include <sys/random.h>

#include <cerrno>
#include <new>
#include <vector>

#include "shm/slot_high_water.h"
#include "shm/segment.h"
#include "transport/mem_ops.h"
#include "util/fault_in.h"
#include "util/proc_maps.h"
#include "verbs/context.h"
#include "verbs/device.h"
#include "verbs/dm.h"

namespace softverbs::verbs {
namespace {

// FLUSH_GLOBAL lets a peer's FLUSH reach the region (IBA 1.5; the responder
// answers one); FLUSH_PERSISTENT is refused, as Linux's rxe refuses it for
// memory that is not persistent: none here is.
constexpr unsigned kSupportedAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                      IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_ON_DEMAND |
                                      transport::kAccessFlushGlobal;

uint16_t random_tag() {
  uint16_t v = 0;
  while (v == 0)
    if (getrandom(&v, sizeof v, 0) != sizeof v) v = static_cast<uint16_t>(reinterpret_cast<uintptr_t>(&v) >> 4);
  return v;
}

Result<uint32_t> claim_slot(shm::Segment& seg) {
  static std::atomic<uint32_t> hint{1};
  shm::ControlLock lock(seg);
  const uint32_t start = hint.load(std::memory_order_relaxed);
  // The table's upper half is the windows' (verbs/mw.cc).
  for (uint32_t n = 0; n < shm::kFirstMwSlot; ++n) {
    const uint32_t slot = (start + n) % shm::kFirstMwSlot;
    if (slot == 0) continue;
    shm::SharedMr& m = seg.mr(slot);
    if (m.rkey.load(std::memory_order_relaxed) != 0 || m.lkey != 0) continue;
    m.lkey = 1;  // reserved until published
    shm::raise_high_water(seg.header().high_water.mrs, slot);
    hint.store(slot + 1, std::memory_order_relaxed);
    return slot;
  }
  return Status::error(ENOMEM);
}

void publish(shm::Segment& seg, Mr* mr, Pd* pd, uint64_t addr, uint64_t length, uint64_t iova, unsigned access,
             const Device& dev) {
  shm::SharedMr& m = seg.mr(mr->slot);
  uint32_t lkey, rkey;
  do {
    lkey = (static_cast<uint32_t>(random_tag()) << 16) | mr->slot;
    rkey = (static_cast<uint32_t>(random_tag()) << 16) | mr->slot;
  } while (lkey == rkey);
  m.lkey = lkey;
  m.owner = dev.self();
  m.pd_id = pd->id;
  m.access = access;
  m.addr = addr;
  m.length = length;
  m.iova = iova;
  m.reg_seq = seg.header().next_reg_seq.fetch_add(1, std::memory_order_relaxed);
  m.map_fd = mr->backing.fd;
  m.map_base = mr->backing.base;
  m.map_size = mr->backing.size;
  m.map_ino = mr->backing.ino;
  m.map_dev = mr->backing.dev;
  m.mw_type = 0;
  m.mw_qpn = 0;
  m.mw_mr_slot = 0;
  m.bound_windows.store(0, std::memory_order_relaxed);
  m.rkey.store(rkey, std::memory_order_release);
  mr->ibv.lkey = lkey;
  mr->ibv.rkey = rkey;
}

}  // namespace

Status check_access_flags(unsigned access) {
  access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if ((access & ~kSupportedAccess) != 0) return Status::error(EINVAL);
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 && (access & IBV_ACCESS_LOCAL_WRITE) == 0)
    return Status::error(EINVAL);
  return Status::ok();
}

namespace {

// `dm`: the region lies in that device memory, whose own export peers use.
Result<Mr*> register_region(Pd* pd, void* addr, size_t length, uint64_t iova, unsigned access, Dm* dm) {
  SV_RETURN_IF_ERROR(check_access_flags(access));
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  const bool odp = (access & IBV_ACCESS_ON_DEMAND) != 0;
  // Implicit ODP (ibv_reg_mr(3)): NULL, SIZE_MAX is the whole address space.
  const bool implicit = odp && addr == nullptr && length == SIZE_MAX;
  if (length == 0 || (length > shm::kMaxMrSize && !implicit) || a + length < a) return Status::error(EINVAL);
  // The kernel pins the pages here and fails with EFAULT when it cannot; ODP
  // pins nothing: its pages are faulted in at each access (util/fault_in.h).
  const bool writable = (access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0;
  if (!odp && !util::range_pinnable(a, length, writable)) return Status::error(EFAULT);
  if (access & IBV_ACCESS_ZERO_BASED) iova = 0;
  Device& dev = pd->ctx->device();
  shm::Segment& seg = dev.seg();
  auto* mr = new (std::nothrow) Mr();
  if (mr == nullptr) return Status::error(ENOMEM);
  Result<uint32_t> slot = claim_slot(seg);
  if (!slot.is_ok()) {
    delete mr;
    return slot.status();
  }
  mr->slot = slot.value();
  mr->pd = pd;
  mr->dm = dm;
  // ODP memory stays where it is, as the application maps it: peers reach it
  // by cma or bounce, which fail cleanly on a page that is not there.
  mr->backing = dm != nullptr ? dm->backing : odp ? fabric::RegionExport{} : fabric::export_region(a, length);
  if (dm != nullptr) dm->mrs.fetch_add(1, std::memory_order_relaxed);
  mr->ibv.context = pd->ctx->ibv();
  mr->ibv.pd = &pd->ibv;
  mr->ibv.addr = addr;
  mr->ibv.length = length;
  mr->ibv.handle = mr->slot;
  publish(seg, mr, pd, a, length, iova, access & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE), dev);
  pd->users.fetch_add(1, std::memory_order_relaxed);
  return mr;
}

}  // namespace

Result<Mr*> register_mr(Pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  return register_region(pd, addr, length, iova, access, nullptr);
}

Result<Mr*> register_dm_mr(Pd* pd, Dm* dm, uint64_t offset, size_t length, unsigned access) {
  // ibv_reg_dm_mr(3): a DM MR is zero-based; the application never learns
  // where the DM is mapped.
  if ((access & IBV_ACCESS_ZERO_BASED) == 0 || (access & IBV_ACCESS_ON_DEMAND) != 0) return Status::error(EINVAL);
  if (length == 0 || !dm->contains(offset, length)) return Status::error(EINVAL);
  Result<Mr*> mr = register_region(pd, dm->base + offset, length, 0, access, dm);
  if (mr.is_ok()) mr.value()->ibv.addr = nullptr;
  return mr;
}

Status advise_mr(Pd* pd, uint32_t advice, uint32_t flags, const ibv_sge* sg_list, uint32_t num_sge) {
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return Status::error(EOPNOTSUPP);
  if ((flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0) return Status::error(EINVAL);
  if (num_sge == 0 || sg_list == nullptr) return Status::error(EINVAL);
  const bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
  Device& dev = pd->ctx->device();
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& sge = sg_list[i];
    transport::MrRef ref;
    const transport::KeyCheck check = transport::check_key(dev.seg(), sge.lkey, false, dev.self(), pd->id, 0, sge.addr,
                                                           sge.length, write ? IBV_ACCESS_LOCAL_WRITE : 0, &ref);
    if (check != transport::KeyCheck::kOk) return Status::error(EFAULT);
    if (!transport::on_demand(*ref.mr)) return Status::error(EINVAL);
    // Without IBV_ADVISE_MR_FLAG_FLUSH the kernel may prefetch later; doing
    // it now is one of the behaviours allowed.
    if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT && !util::fault_in(ref.va, sge.length, write))
      return Status::error(EFAULT);
  }
  return Status::ok();
}

Status deregister_mr(Mr* mr) {
  shm::Segment& seg = mr->pd->ctx->device().seg();
  shm::SharedMr& m = seg.mr(mr->slot);
  // ibv_alloc_mw(3): deregistration fails while a window is bound to the
  // region. A bind racing with us counts itself first, then re-checks the key
  // (transport/mw_ops.cc), so one of the two backs off.
  if (m.bound_windows.load(std::memory_order_seq_cst) != 0) return Status::error(EBUSY);
  m.rkey.store(0, std::memory_order_seq_cst);
  if (m.bound_windows.load(std::memory_order_seq_cst) != 0) {
    m.rkey.store(mr->ibv.rkey, std::memory_order_seq_cst);
    return Status::error(EBUSY);
  }
  {
    shm::ControlLock lock(seg);
    m.lkey = 0;
  }
  fabric::quiesce_local_access();  // no responder still copies from or into it
  if (mr->dm != nullptr)
    mr->dm->mrs.fetch_sub(1, std::memory_order_release);
  else if (mr->backing.fd >= 0)
    fabric::unexport_region(mr->backing);
  mr->pd->users.fetch_sub(1, std::memory_order_relaxed);
  delete mr;
  return Status::ok();
}

Result<Mr*> import_mr(Pd* pd, uint32_t handle) {
  shm::Segment& seg = pd->ctx->device().seg();
  if (handle >= shm::kFirstMwSlot) return Status::error(EINVAL);  // windows are not importable
  const shm::SharedMr& m = seg.mr(handle);
  const uint32_t rkey = m.rkey.load(std::memory_order_acquire);
  // Slot 0 and a slot being published (lkey 1) or gone (keys 0) name nothing.
  if (handle == 0 || rkey == 0 || m.lkey <= 1 || m.pd_id != pd->id) return Status::error(EINVAL);
  auto* mr = new (std::nothrow) Mr();
  if (mr == nullptr) return Status::error(ENOMEM);
  mr->pd = pd;
  mr->slot = handle;
  mr->imported = true;
  mr->ibv.context = pd->ctx->ibv();
  mr->ibv.pd = &pd->ibv;
  mr->ibv.addr = nullptr;
  mr->ibv.length = m.length;
  mr->ibv.lkey = m.lkey;
  mr->ibv.rkey = rkey;
  mr->ibv.handle = handle;
  return mr;
}

Status reregister_mr(Mr* mr, int flags, Pd* pd, void* addr, size_t length, unsigned access) {
  if (flags == 0 || (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
                               IBV_REREG_MR_CHANGE_ACCESS)) != 0)
    return Status::error(EINVAL);
  // A DM MR's translation is the DM's; rdma-core offers no rereg for it.
  if (mr->dm != nullptr) return Status::error(EINVAL);
  shm::SharedMr& m = mr->pd->ctx->device().seg().mr(mr->slot);
  if (m.bound_windows.load(std::memory_order_seq_cst) != 0) return Status::error(EBUSY);  // as dereg
  Pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
  void* new_addr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : mr->ibv.addr;
  size_t new_len = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : mr->ibv.length;
  unsigned new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? access : m.access;
  if (new_pd == nullptr) return Status::error(EINVAL);
  SV_RETURN_IF_ERROR(check_access_flags(new_access));
  Result<Mr*> fresh = register_mr(new_pd, new_addr, new_len, reinterpret_cast<uint64_t>(new_addr), new_access);
  if (!fresh.is_ok()) return fresh.status();
  // Swap the new registration into the caller's ibv_mr, retire the old one.
  Mr old = *mr;
  *mr = *fresh.value();
  fresh.value()->slot = old.slot;
  fresh.value()->pd = old.pd;
  fresh.value()->backing = old.backing;
  return deregister_mr(fresh.value());
}

}  // namespace softverbs::verbs
