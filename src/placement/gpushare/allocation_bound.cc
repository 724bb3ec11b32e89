#include "placement/gpushare/allocation_bound.h"

#include <algorithm>
#include <vector>

#include "placement/gpushare/cluster_state.h"

namespace tessera::placement::gpushare {
namespace {

constexpr int64_t kCapacity = kGpuMilli;  // what one filling holds
constexpr double kEps = 1e-9;

// Maximises c.x subject to A x <= b, x >= 0, for b >= 0 (the origin is feasible), by the simplex
// method on a dense tableau with Bland's rule (no cycling in exact arithmetic; a cap on the pivots
// guards against rounding). Column j of A is 1 (the GPU row) over fills[j] (one row per share
// size). Returns the duals of the rows (>= 0 up to rounding); the caller checks them rather than
// trusting them (BoundSharedAllocation), so a capped run costs tightness, never validity.
std::vector<double> SolveLp(const std::vector<std::vector<int64_t>>& fills,
                            const std::vector<double>& c, const std::vector<double>& b) {
  const size_t m = b.size();
  const size_t n = fills.size();
  const size_t width = n + m + 1;  // structurals, slacks, right-hand side
  std::vector<std::vector<double>> t(m, std::vector<double>(width, 0));
  std::vector<size_t> basis(m);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) t[i][j] = i == 0 ? 1 : static_cast<double>(fills[j][i - 1]);
    t[i][n + i] = 1;
    t[i][width - 1] = b[i];
    basis[i] = n + i;
  }
  std::vector<double> reduced(width, 0);  // c - y A
  for (size_t j = 0; j < n; ++j) reduced[j] = c[j];
  for (size_t pivots = 0; pivots < 100 * (m + n + 1); ++pivots) {
    size_t enter = width;
    for (size_t j = 0; j + 1 < width; ++j) {
      if (reduced[j] > kEps) {
        enter = j;
        break;
      }
    }
    if (enter == width) break;
    size_t leave = m;
    double best = 0;
    for (size_t i = 0; i < m; ++i) {
      if (t[i][enter] <= kEps) continue;
      const double ratio = t[i][width - 1] / t[i][enter];
      if (leave == m || ratio < best - kEps || (ratio <= best + kEps && basis[i] < basis[leave])) {
        leave = i;
        best = ratio;
      }
    }
    if (leave == m) break;  // unbounded: not with a GPU row over every column
    const double pivot = t[leave][enter];
    for (double& v : t[leave]) v /= pivot;
    for (size_t i = 0; i < m; ++i) {
      const double f = t[i][enter];
      if (i == leave || f == 0) continue;
      for (size_t j = 0; j < width; ++j) t[i][j] -= f * t[leave][j];
    }
    const double f = reduced[enter];
    for (size_t j = 0; j + 1 < width; ++j) reduced[j] -= f * t[leave][j];
    basis[leave] = enter;
  }
  std::vector<double> duals(m);
  for (size_t i = 0; i < m; ++i) duals[i] = -reduced[n + i];
  return duals;
}

// The most one GPU can hold, counting a share of size[k] milli as value[k], with at most
// limit[k] shares of each size (a bounded knapsack over 1000 milli, by binary splitting). Sets
// *fill to the counts of the best filling.
double BestFilling(const std::vector<int64_t>& size, const std::vector<double>& value,
                   const std::vector<int64_t>& limit, std::vector<int64_t>* fill) {
  struct Piece {
    size_t k;
    int64_t count;
  };
  std::vector<Piece> pieces;
  for (size_t k = 0; k < size.size(); ++k) {
    if (value[k] <= 0) continue;  // a share worth nothing here never helps a filling
    int64_t left = std::min(limit[k], kCapacity / size[k]);
    for (int64_t chunk = 1; left > 0; chunk *= 2) {
      const int64_t take = std::min(chunk, left);
      pieces.push_back({k, take});
      left -= take;
    }
  }
  std::vector<double> best(kCapacity + 1, 0);
  std::vector<std::vector<bool>> taken(pieces.size(), std::vector<bool>(kCapacity + 1, false));
  for (size_t p = 0; p < pieces.size(); ++p) {
    const int64_t w = pieces[p].count * size[pieces[p].k];
    const double v = static_cast<double>(pieces[p].count) * value[pieces[p].k];
    for (int64_t cap = kCapacity; cap >= w; --cap) {
      if (best[cap - w] + v > best[cap]) {
        best[cap] = best[cap - w] + v;
        taken[p][cap] = true;
      }
    }
  }
  fill->assign(size.size(), 0);
  int64_t cap = kCapacity;
  for (size_t p = pieces.size(); p-- > 0;) {
    if (!taken[p][cap]) continue;
    (*fill)[pieces[p].k] += pieces[p].count;
    cap -= pieces[p].count * size[pieces[p].k];
  }
  return best[kCapacity];
}

}  // namespace

ShareBound BoundSharedAllocation(const std::map<int64_t, int64_t>& shares, int64_t gpus,
                                 std::vector<Filling>* fillings) {
  std::vector<int64_t> size, count;
  double requested = 0;
  for (const auto& [milli, n] : shares) {
    if (milli < 1 || milli > kCapacity || n <= 0) continue;
    size.push_back(milli);
    count.push_back(n);
    requested += static_cast<double>(milli * n) / static_cast<double>(kCapacity);
  }
  ShareBound out;
  if (size.empty() || gpus <= 0) return out;
  const size_t s = size.size();
  // Rows: the GPUs, then the shares of each size. Columns: ways of filling one GPU.
  std::vector<double> b = {static_cast<double>(gpus)};
  for (int64_t n : count) b.push_back(static_cast<double>(n));
  std::vector<std::vector<int64_t>> fills;  // counts by size index
  std::vector<double> worth;                // GPUs' worth each fills
  auto add = [&](std::vector<int64_t> fill) {
    double w = 0;
    for (size_t k = 0; k < s; ++k) {
      w += static_cast<double>(fill[k] * size[k]) / static_cast<double>(kCapacity);
    }
    fills.push_back(std::move(fill));
    worth.push_back(w);
  };
  for (size_t k = 0; k < s; ++k) {
    std::vector<int64_t> one(s, 0);
    one[k] = 1;
    add(std::move(one));
  }
  // The fillings given, those that are fillings here (their shares asked for, within the
  // counts and one GPU) and not singletons already added.
  for (size_t f = 0; fillings != nullptr && f < fillings->size(); ++f) {
    std::vector<int64_t> fill(s, 0);
    int64_t used = 0, items = 0;
    bool fits = true;
    for (const auto& [milli, n] : (*fillings)[f]) {
      auto it = std::lower_bound(size.begin(), size.end(), milli);
      if (it == size.end() || *it != milli || n < 0 || n > count[it - size.begin()]) {
        fits = false;
        break;
      }
      fill[it - size.begin()] = n;
      used += n * milli;
      items += n;
    }
    if (fits && used <= kCapacity && items > 1) add(std::move(fill));
  }
  std::vector<double> value(s);
  std::vector<int64_t> fill;
  std::vector<double> duals;
  // Column generation: a filling worth more than a GPU's price at the current duals improves the
  // restricted program; none does at its optimum. Each round adds one, and there are finitely
  // many; the cap only guards against rounding.
  for (int round = 0; round < 10000; ++round) {
    duals = SolveLp(fills, worth, b);
    for (size_t k = 0; k < s; ++k) {
      value[k] = static_cast<double>(size[k]) / static_cast<double>(kCapacity) - duals[k + 1];
    }
    if (BestFilling(size, value, count, &fill) <= duals[0] + kEps) break;
    // Rounding: the program already has it.
    if (std::find(fills.begin(), fills.end(), fill) != fills.end()) break;
    add(fill);
  }
  // The certificate, checked rather than trusted: prices clamped to >= 0, and the GPU's price
  // recomputed as the most any filling holds at those prices, so that weak duality makes it an
  // upper bound whatever rounding the simplex suffered.
  double bound = 0;
  for (size_t k = 0; k < s; ++k) {
    const double price = std::max(0.0, duals[k + 1]);
    out.price[size[k]] = price;
    value[k] = static_cast<double>(size[k]) / static_cast<double>(kCapacity) - price;
    bound += price * static_cast<double>(count[k]);
  }
  out.per_gpu = std::max(0.0, BestFilling(size, value, count, &fill));
  bound += out.per_gpu * static_cast<double>(gpus);
  out.gpus = std::min({bound, static_cast<double>(gpus), requested});
  out.columns = static_cast<int>(fills.size());
  if (fillings != nullptr) {
    fillings->clear();
    for (const std::vector<int64_t>& counts : fills) {
      Filling f;
      for (size_t k = 0; k < s; ++k) {
        if (counts[k] > 0) f[size[k]] = counts[k];
      }
      fillings->push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace tessera::placement::gpushare
