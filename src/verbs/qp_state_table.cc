#include "verbs/qp_state_table.h"

#include <array>

namespace softverbs::verbs {
namespace {

// QP types the table knows, as indices. XRC_SEND is the kernel's XRC_INI,
// XRC_RECV its XRC_TGT (IBA Annex A14: each takes RC's attributes of its
// own half: the requester's for the one, the responder's for the other).
enum TypeIndex { kRc, kUc, kUd, kXrcSend, kXrcRecv, kTypes };

struct Cell {
  bool valid;
  int required[kTypes];
  int optional[kTypes];
};

constexpr int kStates = IBV_QPS_ERR + 1;
using Table = std::array<std::array<Cell, kStates>, kStates>;

constexpr int PKEY = IBV_QP_PKEY_INDEX, PORT = IBV_QP_PORT, ACCESS = IBV_QP_ACCESS_FLAGS, QKEY = IBV_QP_QKEY,
              AV = IBV_QP_AV, MTU = IBV_QP_PATH_MTU, DQPN = IBV_QP_DEST_QPN, RQPSN = IBV_QP_RQ_PSN,
              DRD = IBV_QP_MAX_DEST_RD_ATOMIC, RNRT = IBV_QP_MIN_RNR_TIMER, ALT = IBV_QP_ALT_PATH,
              TMO = IBV_QP_TIMEOUT, RETRY = IBV_QP_RETRY_CNT, RNRR = IBV_QP_RNR_RETRY, SQPSN = IBV_QP_SQ_PSN,
              IRD = IBV_QP_MAX_QP_RD_ATOMIC, CUR = IBV_QP_CUR_STATE, MIG = IBV_QP_PATH_MIG_STATE,
              SQDN = IBV_QP_EN_SQD_ASYNC_NOTIFY;

constexpr Cell any() { return {true, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}}; }

constexpr Table build() {
  Table t{};
  for (int s = 0; s < kStates; ++s) {
    t[s][IBV_QPS_RESET] = any();  // IBA 10.3.1: every state may go to Reset and Error
    t[s][IBV_QPS_ERR] = any();
  }
  //                              RC                  UC                  UD                 XRC_SEND            XRC_RECV
  t[IBV_QPS_RESET][IBV_QPS_INIT] = {
      true, {PKEY | PORT | ACCESS, PKEY | PORT | ACCESS, PKEY | PORT | QKEY, PKEY | PORT | ACCESS, PKEY | PORT | ACCESS},
      {0, 0, 0, 0, 0}};
  t[IBV_QPS_INIT][IBV_QPS_INIT] = {
      true, {0, 0, 0, 0, 0},
      {PKEY | PORT | ACCESS, PKEY | PORT | ACCESS, PKEY | PORT | QKEY, PKEY | PORT | ACCESS, PKEY | PORT | ACCESS}};
  t[IBV_QPS_INIT][IBV_QPS_RTR] = {
      true,
      {AV | MTU | DQPN | RQPSN | DRD | RNRT, AV | MTU | DQPN | RQPSN, 0, AV | MTU | DQPN | RQPSN,
       AV | MTU | DQPN | RQPSN | DRD | RNRT},
      {ALT | ACCESS | PKEY, ALT | ACCESS | PKEY, PKEY | QKEY, ALT | ACCESS | PKEY, ALT | ACCESS | PKEY}};
  t[IBV_QPS_RTR][IBV_QPS_RTS] = {
      true,
      {TMO | RETRY | RNRR | SQPSN | IRD, SQPSN, SQPSN, TMO | RETRY | RNRR | SQPSN | IRD, TMO | SQPSN},
      {CUR | ALT | ACCESS | RNRT | MIG, CUR | ALT | ACCESS | MIG, CUR | QKEY, CUR | ALT | ACCESS | MIG,
       CUR | ALT | ACCESS | RNRT | MIG}};
  t[IBV_QPS_RTS][IBV_QPS_RTS] = {
      true, {0, 0, 0, 0, 0},
      {CUR | ACCESS | ALT | MIG | RNRT, CUR | ACCESS | ALT | MIG, CUR | QKEY, CUR | ACCESS | ALT | MIG,
       CUR | ACCESS | ALT | MIG | RNRT}};
  t[IBV_QPS_RTS][IBV_QPS_SQD] = {true, {0, 0, 0, 0, 0}, {SQDN, SQDN, SQDN, SQDN, SQDN}};
  t[IBV_QPS_SQD][IBV_QPS_RTS] = {
      true, {0, 0, 0, 0, 0},
      {CUR | ALT | ACCESS | RNRT | MIG, CUR | ALT | ACCESS | MIG, CUR | QKEY, CUR | ALT | ACCESS | MIG,
       CUR | ALT | ACCESS | RNRT | MIG}};
  t[IBV_QPS_SQD][IBV_QPS_SQD] = {
      true,
      {0, 0, 0, 0, 0},
      {PORT | AV | TMO | RETRY | RNRR | IRD | DRD | ALT | ACCESS | PKEY | RNRT | MIG,
       AV | ALT | ACCESS | PKEY | MIG, PKEY | QKEY, PORT | AV | TMO | RETRY | RNRR | IRD | ALT | ACCESS | PKEY | MIG,
       PORT | AV | TMO | DRD | ALT | ACCESS | PKEY | RNRT | MIG}};
  // IBA 10.3.1: SQE exists for UC and UD only (an RC or XRC send error goes to Error).
  t[IBV_QPS_SQE][IBV_QPS_RTS] = {true, {0, 0, 0, 0, 0}, {0, CUR | ACCESS, CUR | QKEY, 0, 0}};
  return t;
}

constexpr Table kTable = build();

int type_index(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC: return kRc;
    case IBV_QPT_UC: return kUc;
    case IBV_QPT_UD: return kUd;
    case IBV_QPT_XRC_SEND: return kXrcSend;
    case IBV_QPT_XRC_RECV: return kXrcRecv;
    default: return -1;
  }
}

}  // namespace

QpTransitionRule qp_transition_rule(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next) {
  const int ti = type_index(type);
  if (ti < 0 || cur < 0 || cur >= kStates || next < 0 || next >= kStates) return {};
  const Cell& c = kTable[cur][next];
  if (!c.valid) return {};
  if ((type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV) && cur == IBV_QPS_SQE) return {};
  return {true, c.required[ti], c.optional[ti]};
}

int drop_ignored_attrs(ibv_qp_type type, int mask) {
  switch (type) {
    case IBV_QPT_XRC_SEND: return mask & ~(DRD | RNRT);
    case IBV_QPT_XRC_RECV: return mask & ~(IRD | RETRY | RNRR);
    default: return mask;
  }
}

Status check_qp_transition(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, int mask) {
  const QpTransitionRule r = qp_transition_rule(type, cur, next);
  if (!r.valid) return Status::error(EINVAL);
  const int given = mask & ~IBV_QP_STATE;
  if ((given & r.required) != r.required) return Status::error(EINVAL);
  if ((given & ~(r.required | r.optional)) != 0) return Status::error(EINVAL);
  return Status::ok();
}

}  // namespace softverbs::verbs
