// Copyright dreplay authors.

#include "verbs/ibverbs_errors.h"

#include <cerrno>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::verbs {
namespace {

using ::testing::HasSubstr;

TEST(IbvResultToStatusTest, ZeroIsOk) { EXPECT_TRUE(IbvResultToStatus(0, "ibv_modify_qp").ok()); }

TEST(IbvResultToStatusTest, ErrnoValueBecomesCodeAndNamesTheVerb) {
  const absl::Status s = IbvResultToStatus(EINVAL, "ibv_modify_qp(INIT->RTR)");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("ibv_modify_qp(INIT->RTR)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("errno 22"));
}

TEST(IbvResultToStatusTest, NegativeErrnoIsTreatedAsItsAbsoluteValue) {
  const absl::Status s = IbvResultToStatus(-ENOMEM, "ibv_post_send");
  EXPECT_TRUE(absl::IsResourceExhausted(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("errno 12"));
}

TEST(IbvResultToStatusTest, QueueFullMapsToResourceExhausted) {
  EXPECT_TRUE(absl::IsResourceExhausted(IbvResultToStatus(ENOMEM, "ibv_post_send")));
}

TEST(IbvResultToStatusTest, MissingDeviceMapsToNotFound) {
  EXPECT_TRUE(absl::IsNotFound(IbvResultToStatus(ENODEV, "ibv_query_port")));
}

TEST(IbvResultToStatusTest, PermissionProblemsMapToPermissionDenied) {
  EXPECT_TRUE(absl::IsPermissionDenied(IbvResultToStatus(EPERM, "ibv_reg_mr")));
  EXPECT_TRUE(absl::IsPermissionDenied(IbvResultToStatus(EACCES, "ibv_reg_mr")));
}

TEST(IbvResultToStatusTest, UnsupportedFeatureMapsToUnimplemented) {
  EXPECT_TRUE(absl::IsUnimplemented(IbvResultToStatus(EOPNOTSUPP, "ibv_query_gid_ex")));
}

TEST(IbvNullResultToStatusTest, UsesTheSavedErrno) {
  const absl::Status s = IbvNullResultToStatus(ENOMEM, "ibv_create_cq");
  EXPECT_TRUE(absl::IsResourceExhausted(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("ibv_create_cq"));
}

TEST(IbvNullResultToStatusTest, UnsetErrnoIsInternalAndSaysSo) {
  const absl::Status s = IbvNullResultToStatus(0, "ibv_reg_mr");
  EXPECT_TRUE(absl::IsInternal(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("without setting errno"));
}

TEST(IbvCheckPointerTest, PassesANonNullPointerThrough) {
  int x = 0;
  absl::StatusOr<int*> p = IbvCheckPointer(&x, "ibv_alloc_pd");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, &x);
}

TEST(IbvCheckPointerTest, TurnsNullIntoTheErrorOfTheCurrentErrno) {
  errno = ENOSYS;
  absl::StatusOr<int*> p = IbvCheckPointer<int>(nullptr, "ibv_open_device");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::IsUnimplemented(p.status()));
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("ibv_open_device"));
}

TEST(IbvCountToStatusTest, NonNegativeCountIsReturned) {
  absl::StatusOr<int> n = IbvCountToStatus(5, 0, "ibv_poll_cq");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 5);
  EXPECT_EQ(*IbvCountToStatus(0, EAGAIN, "ibv_poll_cq"), 0);
}

TEST(IbvCountToStatusTest, NegativeCountIsAnErrorNamingTheRawValue) {
  absl::StatusOr<int> n = IbvCountToStatus(-2, 0, "ibv_poll_cq");
  ASSERT_FALSE(n.ok());
  EXPECT_TRUE(absl::IsInternal(n.status()));
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("ibv_poll_cq returned -2"));
}

TEST(IbvCountToStatusTest, NegativeCountWithErrnoTakesItsCode) {
  absl::StatusOr<int> n = IbvCountToStatus(-1, EINVAL, "ibv_poll_cq");
  ASSERT_FALSE(n.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(n.status()));
}

TEST(FromIbvWcStatusTest, MapsEveryStatusDreplayDistinguishes) {
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_SUCCESS), WcStatus::kSuccess);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_LOC_LEN_ERR), WcStatus::kLocalLengthError);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_LOC_PROT_ERR), WcStatus::kLocalProtectionError);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_LOC_ACCESS_ERR), WcStatus::kLocalProtectionError);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_WR_FLUSH_ERR), WcStatus::kFlushed);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_REM_ACCESS_ERR), WcStatus::kRemoteAccessError);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_REM_INV_REQ_ERR), WcStatus::kRemoteInvalidRequest);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_REM_OP_ERR), WcStatus::kRemoteOperationError);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_RETRY_EXC_ERR), WcStatus::kRetryExceeded);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_RNR_RETRY_EXC_ERR), WcStatus::kRnrRetryExceeded);
}

TEST(FromIbvWcStatusTest, UnexpectedStatusesAreGeneralErrors) {
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_BAD_RESP_ERR), WcStatus::kGeneralError);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_MW_BIND_ERR), WcStatus::kGeneralError);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_FATAL_ERR), WcStatus::kGeneralError);
  EXPECT_EQ(FromIbvWcStatus(IBV_WC_GENERAL_ERR), WcStatus::kGeneralError);
}

TEST(WcFailureDetailTest, CarriesTheLibraryStringStatusNumberAndVendorSyndrome) {
  const std::string detail =
      WcFailureDetail("READ wr_id 7 on rxe0 qpn 0x11", IBV_WC_REM_ACCESS_ERR, 0x88);
  EXPECT_THAT(detail, HasSubstr("READ wr_id 7 on rxe0 qpn 0x11"));
  EXPECT_THAT(detail, HasSubstr(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)));
  EXPECT_THAT(detail, HasSubstr("ibv_wc_status 10"));
  EXPECT_THAT(detail, HasSubstr("vendor_err 0x88"));
}

}  // namespace
}  // namespace dreplay::verbs
