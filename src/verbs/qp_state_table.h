// The QP state machine as data (IBA 10.3.1, Table 96 / kernel qp_state_table):
// for each [current][next] state, whether the transition is valid and which
// attributes it requires and allows, per QP type.
#pragma once

#include <infiniband/verbs.h>

#include "util/status.h"

namespace softverbs::verbs {

struct QpTransitionRule {
  bool valid = false;
  int required = 0;  // ibv_qp_attr_mask bits that must be present
  int optional = 0;  // bits that may be present
};

QpTransitionRule qp_transition_rule(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next);

// EINVAL unless `mask` fits the rule for cur → next (IBV_QP_STATE aside).
Status check_qp_transition(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, int mask);

// `mask` without the attributes a QP of `type` ignores: an XRC QP's other
// half's (XRC_SEND: the responder's; XRC_RECV: the requester's), which the
// kernel's uverbs drops before its table is checked, so that programs may
// pass RC's sets (perftest does).
int drop_ignored_attrs(ibv_qp_type type, int mask);

}  // namespace softverbs::verbs
