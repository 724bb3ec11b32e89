#include "model/mig_geometry.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::model {
namespace {

const GpuModel& Model(const char* name) { return **GpuCatalog::Default().Lookup(name); }

MigInstance At(const GpuModel& m, const char* profile, int start) {
  int i = m.ProfileIndex(profile);
  EXPECT_GE(i, 0) << profile;
  return {i, start};
}

// Legal starts per class from `nvidia-smi mig -lgipp` (reference section 3), typed in
// independently: every (profile, start) pair in 0..7 is checked, alone on an empty GPU.
TEST(MigGeometry, SingleInstanceStartsMatchReferenceEverywhere) {
  const std::vector<std::set<int>> legal = {
      {0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5, 6}, {0, 2, 4, 6}, {0, 2, 4}, {0, 4}, {0}, {0}};
  for (const char* name :
       {"A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB", "B200"}) {
    const GpuModel& m = Model(name);
    for (int p = 0; p < 7; ++p) {
      for (int s = 0; s < 8; ++s) {
        bool ok = ValidateLayout(m, {{p, s}}).ok();
        EXPECT_EQ(ok, legal[p].count(s) == 1) << name << " " << m.profiles[p].name << "@" << s;
      }
    }
  }
  const GpuModel& a30 = Model("A30-24GB");
  const std::vector<std::set<int>> a30_legal = {{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 2}, {0, 2}, {0}};
  for (int p = 0; p < 5; ++p) {
    for (int s = 0; s < 4; ++s) {
      EXPECT_EQ(ValidateLayout(a30, {{p, s}}).ok(), a30_legal[p].count(s) == 1)
          << a30.profiles[p].name << "@" << s;
    }
  }
}

TEST(MigGeometry, ReferenceRules) {
  const GpuModel& m = Model("H100-80GB");
  // Seven 1g fit (slice 7 stays empty); an eighth does not.
  MigLayout seven;
  for (int s = 0; s < 7; ++s) seven.push_back(At(m, "1g.10gb", s));
  EXPECT_TRUE(ValidateLayout(m, seven).ok());
  // 2g cannot start at 6; double-memory 1g can.
  EXPECT_FALSE(ValidateLayout(m, {At(m, "2g.20gb", 6)}).ok());
  EXPECT_TRUE(ValidateLayout(m, {At(m, "1g.20gb", 6)}).ok());
  // 3g + 3g uses all memory.
  EXPECT_TRUE(ValidateLayout(m, {At(m, "3g.40gb", 0), At(m, "3g.40gb", 4)}).ok());
  // 3g at 0 rules out any 4g.
  EXPECT_FALSE(ValidateLayout(m, {At(m, "3g.40gb", 0), At(m, "4g.40gb", 0)}).ok());
  // 4g + 3g coexist (driver R510+), 7 SM slices.
  EXPECT_TRUE(ValidateLayout(m, {At(m, "4g.40gb", 0), At(m, "3g.40gb", 4)}).ok());
  // 3g at 4 or double-mem 1g at 6 blocks 7g.
  EXPECT_FALSE(ValidateLayout(m, {At(m, "3g.40gb", 4), At(m, "7g.80gb", 0)}).ok());
  EXPECT_FALSE(ValidateLayout(m, {At(m, "1g.20gb", 6), At(m, "7g.80gb", 0)}).ok());
  // mig-parted all-balanced.
  EXPECT_TRUE(ValidateLayout(m, {At(m, "2g.20gb", 0), At(m, "1g.10gb", 2), At(m, "1g.10gb", 3),
                                 At(m, "3g.40gb", 4)})
                  .ok());
  // At most one +me.
  EXPECT_FALSE(ValidateLayout(m, {At(m, "1g.10gb+me", 0), At(m, "1g.10gb+me", 1)}).ok());
  EXPECT_TRUE(ValidateLayout(m, {At(m, "1g.10gb+me", 0), At(m, "1g.10gb", 1)}).ok());
  // Compute: 3g + 2g + 2g = 7 SM over 8 memory slices, then a double-mem 1g has no SM left.
  EXPECT_TRUE(
      ValidateLayout(m, {At(m, "2g.20gb", 0), At(m, "2g.20gb", 2), At(m, "3g.40gb", 4)}).ok());
  EXPECT_FALSE(ValidateLayout(m, {At(m, "2g.20gb", 0), At(m, "1g.20gb", 2), At(m, "1g.20gb", 4),
                                  At(m, "4g.40gb", 0)})
                   .ok());
  // Max count: four double-mem 1g fit exactly (0, 2, 4, 6), four 2g never.
  EXPECT_TRUE(ValidateLayout(m, {At(m, "1g.20gb", 0), At(m, "1g.20gb", 2), At(m, "1g.20gb", 4),
                                 At(m, "1g.20gb", 6)})
                  .ok());
  absl::Status s = ValidateLayout(Model("L4"), {});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("does not support MIG"));
}

// Every multiset of profiles with up to max_instances instances: FindPlacement finds a layout
// (which ValidateLayout accepts and whose counts match) exactly when brute force over all
// start assignments finds one.
void CheckPlacementExhaustively(const GpuModel& m) {
  const int n = static_cast<int>(m.profiles.size());
  // All legal layouts by brute force over (profile, start) sets, canonical order.
  std::set<std::vector<int>> feasible;
  std::vector<std::pair<int, int>> slots;
  for (int p = 0; p < n; ++p) {
    for (int s = 0; s < m.mig_memory_slices; ++s) slots.push_back({p, s});
  }
  // A layout uses each (profile, start) at most once: enumerate subsets of slots up to size 7
  // by DFS with validation pruning.
  MigLayout cur;
  std::function<void(size_t)> dfs = [&](size_t from) {
    feasible.insert(LayoutCounts(m, cur));
    for (size_t i = from; i < slots.size(); ++i) {
      cur.push_back({slots[i].first, slots[i].second});
      if (ValidateLayout(m, cur).ok()) dfs(i + 1);
      cur.pop_back();
    }
  };
  dfs(0);
  // Every count vector with entries 0..max_count and total <= max_instances.
  std::vector<int> counts(n, 0);
  int checked = 0;
  std::function<void(int, int)> all = [&](int i, int total) {
    if (i == n) {
      ++checked;
      std::optional<MigLayout> layout = FindPlacement(m, counts);
      ASSERT_EQ(layout.has_value(), feasible.count(counts) == 1) << m.name;
      if (layout) {
        EXPECT_TRUE(ValidateLayout(m, *layout).ok()) << FormatLayout(m, *layout);
        EXPECT_EQ(LayoutCounts(m, *layout), counts);
      }
      return;
    }
    for (int c = 0; c <= m.profiles[i].max_count && total + c <= m.mig_max_instances; ++c) {
      counts[i] = c;
      all(i + 1, total + c);
    }
    counts[i] = 0;
  };
  all(0, 0);
  EXPECT_GT(checked, 50);
}

TEST(MigGeometry, FindPlacementExhaustiveH100) { CheckPlacementExhaustively(Model("H100-80GB")); }
TEST(MigGeometry, FindPlacementExhaustiveA30) { CheckPlacementExhaustively(Model("A30-24GB")); }
TEST(MigGeometry, FindPlacementExhaustiveA100_40) {
  CheckPlacementExhaustively(Model("A100-40GB"));
}

TEST(MigGeometry, MaximalLayoutsAreLegalMaximalAndComplete) {
  for (const char* name : {"H100-80GB", "A30-24GB"}) {
    const GpuModel& m = Model(name);
    std::vector<MigLayout> layouts = EnumerateMaximalLayouts(m);
    ASSERT_FALSE(layouts.empty());
    std::set<std::string> seen;
    for (const MigLayout& l : layouts) {
      ASSERT_TRUE(ValidateLayout(m, l).ok()) << FormatLayout(m, l);
      EXPECT_TRUE(seen.insert(FormatLayout(m, l)).second) << "duplicate " << FormatLayout(m, l);
      for (int p = 0; p < static_cast<int>(m.profiles.size()); ++p) {
        for (int s = 0; s < m.mig_memory_slices; ++s) {
          MigLayout more = l;
          more.push_back({p, s});
          EXPECT_FALSE(ValidateLayout(m, more).ok())
              << FormatLayout(m, l) << " + " << m.profiles[p].name << "@" << s;
        }
      }
    }
    // Known maximal layouts are among them.
    if (m.name == "H100-80GB") {
      EXPECT_TRUE(seen.count("7g.80gb@0"));
      EXPECT_TRUE(seen.count("3g.40gb@0 3g.40gb@4"));
      EXPECT_TRUE(seen.count("4g.40gb@0 3g.40gb@4"));
      EXPECT_TRUE(seen.count("2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4"));
      EXPECT_FALSE(seen.count("3g.40gb@0"));  // not maximal
    } else {
      EXPECT_TRUE(seen.count("4g.24gb@0"));
      EXPECT_TRUE(seen.count("2g.12gb@0 2g.12gb@2"));
    }
  }
  EXPECT_TRUE(EnumerateMaximalLayouts(Model("T4")).empty());
}

TEST(MigGeometry, FormatLayout) {
  const GpuModel& m = Model("H200-141GB");
  EXPECT_EQ(FormatLayout(m, {At(m, "3g.71gb", 0), At(m, "2g.35gb", 4)}), "3g.71gb@0 2g.35gb@4");
}

}  // namespace
}  // namespace tessera::model
