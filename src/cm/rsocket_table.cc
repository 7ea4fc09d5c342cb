// The rsocket table: index (the CM channel's fd) -> Rsocket, read without a
// lock by every r* call.
#include <atomic>
#include <mutex>

#include "cm/rsocket.h"

namespace softverbs::cm {
namespace rsimpl {

namespace {

// index -> Rsocket, two levels of 1024 so a lookup takes no lock.
constexpr int kPageBits = 10;
constexpr int kPages = 1024;
std::atomic<std::atomic<Rsocket*>*> g_pages[kPages];
std::mutex g_pages_mu;

std::atomic<Rsocket*>* slot(int index, bool create) {
  if (index < 0 || index >= (kPages << kPageBits)) return nullptr;
  std::atomic<Rsocket*>* page = g_pages[index >> kPageBits].load(std::memory_order_acquire);
  if (page == nullptr && create) {
    std::lock_guard<std::mutex> lock(g_pages_mu);
    page = g_pages[index >> kPageBits].load(std::memory_order_acquire);
    if (page == nullptr) {
      page = new std::atomic<Rsocket*>[1 << kPageBits]();
      g_pages[index >> kPageBits].store(page, std::memory_order_release);
    }
  }
  return page == nullptr ? nullptr : &page[index & ((1 << kPageBits) - 1)];
}

}  // namespace

bool insert(Rsocket* rs) {
  std::atomic<Rsocket*>* s = slot(rs->index, true);
  if (s == nullptr) return false;
  s->store(rs, std::memory_order_release);
  return true;
}

void remove(Rsocket* rs) {
  std::atomic<Rsocket*>* s = slot(rs->index, false);
  if (s != nullptr) s->store(nullptr, std::memory_order_release);
}

}  // namespace rsimpl

using namespace rsimpl;

Rsocket* rs_lookup(int index) {
  std::atomic<Rsocket*>* s = slot(index, false);
  return s == nullptr ? nullptr : s->load(std::memory_order_acquire);
}

}  // namespace softverbs::cm
