// Address handles: an address vector checked at creation, used by UD sends.
#pragma once

#include <infiniband/verbs.h>

#include "verbs/pd.h"

namespace softverbs::verbs {

struct Ah {
  ibv_ah ibv{};
  Pd* pd = nullptr;
  ibv_ah_attr attr{};

  static Ah* from(ibv_ah* a) { return reinterpret_cast<Ah*>(a); }
};

}  // namespace softverbs::verbs
