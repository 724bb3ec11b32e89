#include "cache/model_cache.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::cache {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Time T(int s) { return absl::FromUnixSeconds(1'700'000'000 + s); }

// Fills `id` with the given blobs at time `t`.
void Fill(CacheIndex& c, const std::string& id, std::map<std::string, int64_t> blobs, int t) {
  ASSERT_EQ(c.Request(id, "src-" + id, T(t)), RequestKind::kStartFill);
  int64_t total = 0;
  for (const auto& [d, b] : blobs) total += b;
  ASSERT_TRUE(c.Reserve(id, total, T(t)).ok());
  c.MarkReady(id, std::move(blobs), T(t));
}

TEST(CacheIndex, SingleFlightHitJoinAndRetryAfterFailure) {
  CacheIndex c(1000);
  EXPECT_EQ(c.Request("a", "s", T(0)), RequestKind::kStartFill);
  EXPECT_EQ(c.Request("a", "s", T(1)), RequestKind::kJoin);
  EXPECT_EQ(c.Request("a", "s", T(2)), RequestKind::kJoin);
  c.MarkFailed("a", "HTTP 503");
  EXPECT_EQ(c.Find("a")->state, ModelState::kFailed);
  EXPECT_EQ(c.Request("a", "s", T(3)), RequestKind::kStartFill);  // a failure is retried
  EXPECT_TRUE(c.Find("a")->error.empty());
  c.MarkReady("a", {{"d1", 100}}, T(4));
  EXPECT_EQ(c.Request("a", "s", T(5)), RequestKind::kHit);
  EXPECT_EQ(c.Find("a")->last_used, T(5));
}

TEST(CacheIndex, SharedBlobsCountOnce) {
  CacheIndex c(1000);
  Fill(c, "a", {{"shared", 300}, {"a1", 100}}, 0);
  Fill(c, "b", {{"shared", 300}, {"b1", 50}}, 1);
  EXPECT_EQ(c.used_bytes(), 450);
  ASSERT_TRUE(c.Remove("a", T(2)).ok());
  EXPECT_TRUE(c.BlobReferenced("shared"));
  EXPECT_FALSE(c.BlobReferenced("a1"));
  EXPECT_EQ(c.used_bytes(), 350);
}

TEST(CacheIndex, EvictsLeastRecentlyUsedButNeverLeasedOrFilling) {
  CacheIndex c(1000);
  Fill(c, "old", {{"o", 300}}, 0);
  Fill(c, "leased", {{"l", 300}}, 1);
  Fill(c, "recent", {{"r", 300}}, 2);
  ASSERT_TRUE(c.Lease("leased", "pod-1", absl::Minutes(1), T(3)).ok());
  EXPECT_EQ(c.Request("recent", "", T(4)), RequestKind::kHit);  // refreshes
  ASSERT_EQ(c.Request("new", "s", T(5)), RequestKind::kStartFill);
  absl::StatusOr<std::vector<std::string>> ev = c.Reserve("new", 350, T(5));
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_THAT(*ev, ElementsAre("old"));  // one eviction was enough
  EXPECT_EQ(c.used_bytes(), 950);
  // Nothing evictable is left that would make room for 400 more: a clear error, no eviction.
  ASSERT_EQ(c.Request("big", "s", T(6)), RequestKind::kStartFill);
  ev = c.Reserve("big", 400, T(6));
  ASSERT_FALSE(ev.ok());
  EXPECT_THAT(ev.status().message(), HasSubstr("leased or filling"));
  EXPECT_NE(c.Find("recent"), nullptr);
  // Once the lease expires, the leased model is evictable.
  c.MarkReady("new", {{"n", 350}}, T(7));
  ev = c.Reserve("big", 400, T(100));
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_THAT(*ev, ElementsAre("leased", "recent"));
  EXPECT_FALSE(c.Reserve("big", 2000, T(100)).ok());  // over the whole budget
}

TEST(CacheIndex, RemoveRefusedWhileLeasedOrFilling) {
  CacheIndex c(1000);
  ASSERT_EQ(c.Request("a", "s", T(0)), RequestKind::kStartFill);
  EXPECT_THAT(c.Remove("a", T(0)).message(), HasSubstr("filling"));
  c.MarkReady("a", {{"d", 10}}, T(1));
  ASSERT_TRUE(c.Lease("a", "p", absl::Seconds(30), T(1)).ok());
  ASSERT_TRUE(c.Lease("a", "p", absl::Seconds(30), T(20)).ok());  // renewal
  EXPECT_THAT(c.Remove("a", T(40)).message(), HasSubstr("leased"));
  EXPECT_TRUE(c.Remove("a", T(51)).ok());  // expired
  EXPECT_EQ(c.Remove("a", T(51)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.Lease("zz", "p", absl::Seconds(1), T(0)).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera::cache
