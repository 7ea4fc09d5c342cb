#include "verbs/qp_state_table.h"

#include <gtest/gtest.h>

namespace softverbs::verbs {
namespace {

constexpr int kRcInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRcRtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRcRts =
    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

TEST(QpStateTable, RcConnectSequenceIsValid) {
  EXPECT_TRUE(check_qp_transition(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit).is_ok());
  EXPECT_TRUE(check_qp_transition(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr).is_ok());
  EXPECT_TRUE(check_qp_transition(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts).is_ok());
}

TEST(QpStateTable, MissingRequiredAttributeIsRejected) {
  EXPECT_EQ(check_qp_transition(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr & ~IBV_QP_DEST_QPN).code(), EINVAL);
  EXPECT_EQ(check_qp_transition(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts & ~IBV_QP_TIMEOUT).code(), EINVAL);
  EXPECT_EQ(check_qp_transition(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT).code(), EINVAL);
}

TEST(QpStateTable, AttributeNotAllowedForTransitionIsRejected) {
  EXPECT_EQ(check_qp_transition(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit | IBV_QP_SQ_PSN).code(), EINVAL);
  // UC has no RNR or atomics: the RC-only attributes are not allowed.
  const int uc_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  EXPECT_TRUE(check_qp_transition(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, uc_rtr).is_ok());
  EXPECT_EQ(check_qp_transition(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, uc_rtr | IBV_QP_MIN_RNR_TIMER).code(), EINVAL);
}

TEST(QpStateTable, SkippingStatesIsInvalid) {
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RTS).valid);
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RTR).valid);
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTS).valid);
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTR).valid);
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_RC, IBV_QPS_ERR, IBV_QPS_RTS).valid);
}

TEST(QpStateTable, ResetAndErrorReachableFromEveryState) {
  for (int s = IBV_QPS_RESET; s <= IBV_QPS_ERR; ++s) {
    EXPECT_TRUE(qp_transition_rule(IBV_QPT_RC, static_cast<ibv_qp_state>(s), IBV_QPS_RESET).valid || s == IBV_QPS_SQE);
    EXPECT_TRUE(check_qp_transition(IBV_QPT_UD, static_cast<ibv_qp_state>(s), IBV_QPS_ERR, IBV_QP_STATE).is_ok());
  }
}

TEST(QpStateTable, SqeOnlyForUnreliableTransports) {
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_RC, IBV_QPS_SQE, IBV_QPS_RTS).valid);
  EXPECT_TRUE(qp_transition_rule(IBV_QPT_UD, IBV_QPS_SQE, IBV_QPS_RTS).valid);
}

// The kernel's XRC_INI and XRC_TGT rows: each half requires its own side's
// attributes (what ibv_xsrq_pingpong passes), and the other half's are
// dropped before the check (perftest passes RC's whole sets).
TEST(QpStateTable, XrcHalvesTakeTheirOwnSidesAttributes) {
  const int xrc_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  for (ibv_qp_type t : {IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV})
    EXPECT_TRUE(check_qp_transition(t, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit).is_ok()) << t;
  EXPECT_TRUE(check_qp_transition(IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_RTR, xrc_rtr).is_ok());
  EXPECT_EQ(check_qp_transition(IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_RTR, xrc_rtr).code(), EINVAL);
  EXPECT_TRUE(check_qp_transition(IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr).is_ok());
  EXPECT_TRUE(check_qp_transition(IBV_QPT_XRC_SEND, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts).is_ok());
  const int tgt_rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
  EXPECT_TRUE(check_qp_transition(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS, tgt_rts).is_ok());
  EXPECT_EQ(check_qp_transition(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts).code(), EINVAL);
  EXPECT_EQ(drop_ignored_attrs(IBV_QPT_XRC_SEND, kRcRtr), xrc_rtr);
  EXPECT_EQ(drop_ignored_attrs(IBV_QPT_XRC_RECV, kRcRts), tgt_rts);
  EXPECT_EQ(drop_ignored_attrs(IBV_QPT_RC, kRcRts), kRcRts);
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_XRC_SEND, IBV_QPS_SQE, IBV_QPS_RTS).valid);
}

TEST(QpStateTable, UnknownTypeOrStateIsInvalid) {
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_RAW_PACKET, IBV_QPS_RESET, IBV_QPS_INIT).valid);
  EXPECT_FALSE(qp_transition_rule(IBV_QPT_RC, static_cast<ibv_qp_state>(42), IBV_QPS_INIT).valid);
}

}  // namespace
}  // namespace softverbs::verbs
