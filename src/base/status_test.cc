#include "base/status.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) {
    return absl::InvalidArgumentError("odd");
  }
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  TESSERA_ASSIGN_OR_RETURN(int h, Half(x));
  TESSERA_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  TESSERA_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacros, PropagateErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).message(), "odd");
}

TEST(Annotate, PrefixesKeepsCode) {
  absl::Status s = Annotate(absl::NotFoundError("no file"), "fleet.yaml");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "fleet.yaml: no file");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace tessera
