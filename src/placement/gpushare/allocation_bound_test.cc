#include "placement/gpushare/allocation_bound.h"

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::placement::gpushare {
namespace {

// Optima worked out by hand: each GPU's waste that no placement avoids.
TEST(AllocationBound, KnownOptima) {
  // Ten 810s, three 190s: the 190s fill three of the 810s' GPUs.
  EXPECT_NEAR(BoundSharedAllocation({{810, 10}, {190, 3}}, 10).gpus, 8.67, 1e-9);
  // Three 470s on two GPUs: two share one GPU, the third has one alone (0.94 + 0.47).
  EXPECT_NEAR(BoundSharedAllocation({{470, 3}}, 2).gpus, 1.41, 1e-9);
  // Three 510s: one per GPU, whatever the order; the requests (1.53) would fit in two GPUs.
  EXPECT_NEAR(BoundSharedAllocation({{510, 3}}, 2).gpus, 1.02, 1e-9);
  // 650 + 320 leaves 30 per GPU; the 320s left over go three to a GPU.
  EXPECT_NEAR(BoundSharedAllocation({{650, 4}, {320, 10}}, 6).gpus, 4 * 0.97 + 2 * 0.96, 1e-9);
  // Whole GPUs: no more than there are.
  EXPECT_NEAR(BoundSharedAllocation({{1000, 5}}, 3).gpus, 3, 1e-9);
  EXPECT_NEAR(BoundSharedAllocation({{1000, 2}, {500, 3}}, 4).gpus, 3.5, 1e-9);
  // Nothing asked, or no GPUs; sizes outside 1..1000 are left out.
  EXPECT_EQ(BoundSharedAllocation({}, 8).gpus, 0);
  EXPECT_EQ(BoundSharedAllocation({{500, 4}}, 0).gpus, 0);
  EXPECT_NEAR(BoundSharedAllocation({{0, 4}, {1500, 2}, {250, 4}}, 3).gpus, 1, 1e-9);
}

// The certificate is what the bound is: prices >= 0, and the GPU's price the most one GPU holds
// at those prices (checked here by enumerating every filling).
TEST(AllocationBound, CertificateHoldsForEveryFilling) {
  // The default trace's GPU pods at 100% of the 6,212 GPUs (its counts x 1.0206, rounded).
  const std::map<int64_t, int64_t> shares = {
      {50, 7},    {110, 24},  {140, 1},  {160, 76}, {220, 63},  {230, 143},  {270, 4},
      {290, 1},   {320, 335}, {330, 7},  {350, 6},  {370, 48},  {440, 2},    {460, 131},
      {470, 765}, {480, 19},  {550, 73}, {590, 77}, {650, 258}, {810, 1100}, {1000, 4445}};
  const int64_t gpus = 6212;
  ShareBound b = BoundSharedAllocation(shares, gpus);
  // GLPK's optimum of the same program written out with all 6,960 fillings of one GPU
  // (glpsol --lp, 2026-12-06): the column generation finds it without listing them.
  EXPECT_NEAR(b.gpus, 6019.5625, 1e-3);
  double dual = b.per_gpu * static_cast<double>(gpus);
  std::vector<std::pair<int64_t, double>> sizes;
  for (const auto& [milli, n] : shares) {
    ASSERT_GE(b.price.at(milli), 0);
    dual += b.price.at(milli) * static_cast<double>(n);
    sizes.push_back({milli, static_cast<double>(milli) / 1000 - b.price.at(milli)});
  }
  EXPECT_NEAR(b.gpus, dual, 1e-6);
  double most = 0;
  std::function<void(size_t, int64_t, double)> fill = [&](size_t k, int64_t left, double value) {
    most = std::max(most, value);
    for (size_t j = k; j < sizes.size(); ++j) {
      if (sizes[j].first <= left) fill(j, left - sizes[j].first, value + sizes[j].second);
    }
  };
  fill(0, 1000, 0);
  EXPECT_LE(most, b.per_gpu + 1e-9);
  // Below what the requests alone allow: the 810s' slivers cost.
  double requested = 0;
  for (const auto& [milli, n] : shares) requested += static_cast<double>(milli * n) / 1000;
  EXPECT_LT(b.gpus, std::min(static_cast<double>(gpus), requested) - 10);
  EXPECT_GT(b.columns, static_cast<int>(shares.size()));
}

// Starting from another call's fillings gives the same bound: only the rounds it takes change.
TEST(AllocationBound, StartsFromTheFillingsOfALikeCall) {
  std::map<int64_t, int64_t> shares = {{160, 74}, {320, 328}, {470, 750}, {650, 253}, {810, 1078}};
  std::vector<Filling> fillings;
  ShareBound first = BoundSharedAllocation(shares, 900, &fillings);
  EXPECT_EQ(static_cast<int>(fillings.size()), first.columns);
  shares[810] += 40;
  shares[110] = 3;                 // a size the fillings lack
  fillings.push_back({{810, 2}});  // one that is not a filling: left out
  ShareBound warm = BoundSharedAllocation(shares, 900, &fillings);
  ShareBound cold = BoundSharedAllocation(shares, 900);
  EXPECT_NEAR(warm.gpus, cold.gpus, 1e-6);
  EXPECT_GT(warm.gpus, first.gpus);
}

// Never below a real placement: on small random instances, the best placement of the shares
// (every share to a GPU or left out, tried exhaustively) allocates no more than the bound.
TEST(AllocationBound, NeverBelowTheBestPlacement) {
  std::mt19937 rng(7);
  const std::vector<int64_t> menu = {160, 230, 320, 470, 510, 650, 810, 1000};
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t gpus = 1 + static_cast<int64_t>(rng() % 3);
    std::vector<int64_t> items(2 + rng() % 5);
    std::map<int64_t, int64_t> shares;
    for (int64_t& item : items) {
      item = menu[rng() % menu.size()];
      ++shares[item];
    }
    std::vector<int64_t> free(static_cast<size_t>(gpus), 1000);
    int64_t best = 0;
    std::function<void(size_t, int64_t)> place = [&](size_t i, int64_t used) {
      if (i == items.size()) {
        best = std::max(best, used);
        return;
      }
      place(i + 1, used);  // left out
      for (int64_t& f : free) {
        if (f < items[i]) continue;
        f -= items[i];
        place(i + 1, used + items[i]);
        f += items[i];
      }
    };
    place(0, 0);
    ShareBound b = BoundSharedAllocation(shares, gpus);
    EXPECT_GE(b.gpus + 1e-9, static_cast<double>(best) / 1000) << "trial " << trial;
    EXPECT_LE(b.gpus, static_cast<double>(gpus) + 1e-9);
  }
}

}  // namespace
}  // namespace tessera::placement::gpushare
