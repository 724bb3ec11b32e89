#include "base/units.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ParseBytes, BinaryAndDecimalSuffixes) {
  EXPECT_EQ(*ParseBytes("18Gi"), 18 * kGiB);
  EXPECT_EQ(*ParseBytes("512Mi"), 512 * kMiB);
  EXPECT_EQ(*ParseBytes("4Ki"), 4096);
  EXPECT_EQ(*ParseBytes("2Ti"), 2 * kTiB);
  EXPECT_EQ(*ParseBytes("80G"), int64_t{80'000'000'000});
  EXPECT_EQ(*ParseBytes("1k"), 1000);
  EXPECT_EQ(*ParseBytes("3M"), 3'000'000);
  EXPECT_EQ(*ParseBytes("1234"), 1234);
  EXPECT_EQ(*ParseBytes("0"), 0);
  EXPECT_EQ(*ParseBytes(" 1Gi "), kGiB);
}

TEST(ParseBytes, FractionsAndExponents) {
  EXPECT_EQ(*ParseBytes("1.5Gi"), 3 * kGiB / 2);
  EXPECT_EQ(*ParseBytes("0.5Ki"), 512);
  EXPECT_EQ(*ParseBytes("1e9"), 1'000'000'000);
  EXPECT_EQ(*ParseBytes("2.5e3"), 2500);
  // Exa suffix is not an exponent.
  EXPECT_EQ(*ParseBytes("1E"), int64_t{1'000'000'000'000'000'000});
  // Fractional bytes round up: a memory need is a minimum.
  EXPECT_EQ(*ParseBytes("1.5"), 2);
}

TEST(ParseBytes, RejectsBadInputWithReason) {
  for (const char* bad : {"18Gx", "-1Gi", "", "Gi", "1.2.3", "abc", "1 Gi", "1gi", "--1"}) {
    absl::StatusOr<int64_t> r = ParseBytes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("expected"), absl::string_view::npos) << bad;
  }
  EXPECT_NE(ParseBytes("18Gx").status().message().find("unknown suffix \"Gx\""),
            absl::string_view::npos);
  EXPECT_EQ(ParseBytes("99999999Ei").status().code(), absl::StatusCode::kOutOfRange);
}

TEST(FormatBytes, ExactAndApproximate) {
  EXPECT_EQ(FormatBytes(18 * kGiB), "18Gi");
  EXPECT_EQ(FormatBytes(1536 * kMiB), "1536Mi");
  EXPECT_EQ(FormatBytes(0), "0");
  EXPECT_EQ(FormatBytes(1000), "1000");
  EXPECT_EQ(FormatBytes(2 * kTiB), "2Ti");
  EXPECT_EQ(FormatGiB(18 * kGiB), "18.0 GiB");
  // Round trip of every exact form.
  for (int64_t b : {kKiB, 3 * kMiB, 7 * kGiB, 5 * kTiB}) {
    EXPECT_EQ(*ParseBytes(FormatBytes(b)), b);
  }
}

TEST(ParseMilliGpu, DecimalsAndMilli) {
  EXPECT_EQ(*ParseMilliGpu("0.2"), 200);
  EXPECT_EQ(*ParseMilliGpu("1"), 1000);
  EXPECT_EQ(*ParseMilliGpu("2"), 2000);
  EXPECT_EQ(*ParseMilliGpu("250m"), 250);
  EXPECT_EQ(*ParseMilliGpu("0.125"), 125);
  // Finer than a milli rounds up.
  EXPECT_EQ(*ParseMilliGpu("0.3333"), 334);
  EXPECT_EQ(*ParseMilliGpu("0"), 0);
  for (const char* bad : {"-0.2", "", "x", "0.2g", "1/2"}) {
    EXPECT_FALSE(ParseMilliGpu(bad).ok()) << bad;
  }
}

TEST(FormatMilliGpu, Decimal) {
  EXPECT_EQ(FormatMilliGpu(250), "0.25");
  EXPECT_EQ(FormatMilliGpu(2000), "2");
  EXPECT_EQ(FormatMilliGpu(1500), "1.5");
  EXPECT_EQ(FormatMilliGpu(333), "0.333");
}

}  // namespace
}  // namespace tessera
