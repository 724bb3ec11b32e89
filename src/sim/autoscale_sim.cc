#include "sim/autoscale_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "autoscale/kube_defaults.h"
#include "base/clock.h"
#include "base/memory.h"
#include "base/parallel.h"
#include "base/random.h"
#include "base/ring_queue.h"
#include "sim/processor_sharing.h"

namespace tessera::sim {
namespace {

// Kubernetes' and KEDA's rules, shared by the two emulated baselines and by the HPA that
// applies Tessera's metric.
constexpr double kHpaSyncS = autoscale::kHpaSyncS;
constexpr double kHpaDownWindowS = autoscale::kHpaScaleDownWindowS;
constexpr double kKedaCooldownS = autoscale::kKedaCooldownPeriodS;
constexpr double kKedaPollS = autoscale::kKedaPollingIntervalS;
// What deploy/scaler ships: KEDA polls Tessera every 10 s and cools down 30 s before zero
// (Tessera's own idle timeout has already waited); HPA behavior without windows.
constexpr double kTesseraPollS = 10;
constexpr double kTesseraCooldownS = 30;
constexpr double kUtilWindowS = 60;  // utilisation and throughput as avg_over_time(...[1m])

double Gamma(Random& rng, double shape, double scale) {
  // Marsaglia and Tsang (2000); shape < 1 by the boost U^(1/shape).
  if (shape < 1) {
    double u = std::max(rng.UniformDouble(), 1e-300);
    return Gamma(rng, shape + 1, scale) * std::pow(u, 1.0 / shape);
  }
  double d = shape - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  while (true) {
    double x, v;
    do {
      // Box-Muller normal
      double u1 = std::max(rng.UniformDouble(), 1e-300), u2 = rng.UniformDouble();
      x = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    double u = std::max(rng.UniformDouble(), 1e-300);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v * scale;
  }
}

double Weibull(Random& rng, double shape, double scale) {
  double u = std::max(rng.UniformDouble(), 1e-300);
  return scale * std::pow(-std::log(u), 1.0 / shape);
}

// Queue waits at 10 ms resolution up to 10 minutes; beyond that kept exactly.
class WaitHistogram {
 public:
  void Add(double w) {
    size_t b = static_cast<size_t>(w * 100);
    if (b < kBuckets) {
      ++buckets_[b];
    } else {
      tail_.push_back(w);
    }
    ++n_;
  }
  int64_t count() const { return n_; }
  int64_t AtMost(double limit) const {
    int64_t c = 0;
    size_t lim = static_cast<size_t>(limit * 100);
    for (size_t b = 0; b < std::min(lim, kBuckets); ++b) c += buckets_[b];
    for (double w : tail_) c += w <= limit ? 1 : 0;
    return c;
  }
  double Quantile(double q) {
    if (n_ == 0) return 0;
    int64_t rank = static_cast<int64_t>(std::ceil(q * n_));
    int64_t c = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
      c += buckets_[b];
      if (c >= rank) return b / 100.0;  // the bucket's lower edge (10 ms resolution)
    }
    std::sort(tail_.begin(), tail_.end());
    return tail_[std::min<size_t>(rank - c - 1, tail_.size() - 1)];
  }

 private:
  static constexpr size_t kBuckets = 60000;
  std::vector<int64_t> buckets_ = std::vector<int64_t>(kBuckets, 0);
  std::vector<double> tail_;
  int64_t n_ = 0;
};

enum class Phase { kStarting, kReady, kDraining };

struct Replica {
  Phase phase = Phase::kStarting;
  double ready_at = 0;
  ProcessorSharingBatch active;
  RingQueue<std::pair<double, double>> busy;  // (time, busy seconds in the step)
  double busy_sum = 0;
  RingQueue<std::pair<double, double>> cpu;  // (time, core-seconds)
  double cpu_sum = 0;
};

// The HPA step shared by all three: tolerance, scale-up limit (100% or +4 per period), and
// the scale-down stabilisation window when `down_window_s` > 0.
class Hpa {
 public:
  // Scale-up at most max(current x (1 + up_percent / 100), current + up_pods) per sync (HPA's
  // default behavior: 100% or 4 pods per 15 s; selectPolicy Max).
  Hpa(double down_window_s, double tolerance, int up_percent = 100, int up_pods = 4)
      : down_window_s_(down_window_s),
        tolerance_(tolerance),
        up_percent_(up_percent),
        up_pods_(up_pods) {}
  int Apply(int current, int desired, double usage_ratio, double now) {
    if (std::abs(usage_ratio - 1) <= tolerance_) desired = current;
    recs_.emplace_back(now, desired);
    while (!recs_.empty() && now - recs_.front().first > down_window_s_) recs_.pop_front();
    if (desired < current) {
      int m = 0;
      for (const auto& [t, r] : recs_) m = std::max(m, r);
      return std::min(current, m);
    }
    return std::min(desired, std::max(current + current * up_percent_ / 100, current + up_pods_));
  }

 private:
  double down_window_s_;
  double tolerance_;
  int up_percent_;
  int up_pods_;
  std::deque<std::pair<double, int>> recs_;
};

// The work of the requests arriving at or after `warmup_s` (what is measured), replica-seconds.
double MeasuredWork(const std::vector<SimRequest>& requests, double warmup_s) {
  double work = 0;
  for (const SimRequest& r : requests) work += r.arrival >= warmup_s ? r.work : 0;
  return work;
}

// Whether `t` falls in one of `outages` (sorted by start; a handful, so a scan).
bool InOutage(const std::vector<Outage>& outages, double t) {
  for (const Outage& o : outages) {
    if (t < o.start_s) return false;
    if (t < o.start_s + o.length_s) return true;
  }
  return false;
}

constexpr std::pair<KedaFallback::Behavior, const char*> kBehaviors[] = {
    {KedaFallback::Behavior::kStatic, "static"},
    {KedaFallback::Behavior::kCurrentReplicas, "currentReplicas"},
    {KedaFallback::Behavior::kCurrentReplicasIfHigher, "currentReplicasIfHigher"},
    {KedaFallback::Behavior::kCurrentReplicasIfLower, "currentReplicasIfLower"}};

}  // namespace

int KedaFallback::Replicas(int current) const {
  switch (behavior) {
    case Behavior::kStatic:
      return replicas;
    case Behavior::kCurrentReplicas:
      return current;
    case Behavior::kCurrentReplicasIfHigher:
      return std::max(current, replicas);
    case Behavior::kCurrentReplicasIfLower:
      return std::min(current, replicas);
  }
  return replicas;
}

absl::StatusOr<KedaFallback> KedaFallback::Parse(const std::string& text) {
  KedaFallback f;
  if (text == "none") {
    f.enabled = false;
    return f;
  }
  auto bad = [&](absl::string_view part, absl::string_view expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keda-fallback ", text, ": ", part, ": expected ", expected));
  };
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, '=');
    const auto& [key, value] = kv;
    if (key == "replicas" || key == "failureThreshold") {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < (key == "replicas" ? 0 : 1)) {
        return bad(part, key == "replicas" ? "a count of 0 or more" : "a count of 1 or more");
      }
      (key == "replicas" ? f.replicas : f.failure_threshold) = n;
    } else if (key == "behavior") {
      bool known = false;
      for (const auto& [b, name] : kBehaviors) {
        if (value == name) {
          f.behavior = b;
          known = true;
        }
      }
      if (!known) {
        return bad(part,
                   "static, currentReplicas, currentReplicasIfHigher or currentReplicasIfLower");
      }
    } else {
      return bad(part,
                 "none, or replicas=N, behavior=B and failureThreshold=N separated by commas "
                 "(the ScaledObject's fallback fields)");
    }
  }
  return f;
}

std::string KedaFallback::ToString() const {
  if (!enabled) return "none";
  const char* name = "static";
  for (const auto& [b, n] : kBehaviors) {
    if (b == behavior) name = n;
  }
  return absl::StrCat("replicas=", replicas, ",behavior=", name,
                      ",failureThreshold=", failure_threshold);
}

absl::StatusOr<std::vector<Outage>> ParseOutages(const std::string& text, const std::string& flag) {
  std::vector<Outage> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const std::pair<absl::string_view, absl::string_view> se = absl::StrSplit(part, '+');
    absl::Duration start, length;
    if (!absl::ParseDuration(se.first, &start) || !absl::ParseDuration(se.second, &length) ||
        start < absl::ZeroDuration() || length <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", text, ": ", part,
          ": expected START+LENGTH from the replay's start, such as 30m+10m (LENGTH above 0)"));
    }
    out.push_back({absl::ToDoubleSeconds(start), absl::ToDoubleSeconds(length)});
  }
  std::sort(out.begin(), out.end(),
            [](const Outage& a, const Outage& b) { return a.start_s < b.start_s; });
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].start_s < out[i - 1].start_s + out[i - 1].length_s) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", text, ": two outages overlap (merge them into one)"));
    }
  }
  return out;
}

std::map<std::string, double> PolicySpec::Params() const {
  if (kind == "tessera") {
    return {{"target_utilization", tessera.target_utilization},
            {"target_queue_per_replica", tessera.target_queue_per_replica},
            {"utilization_band", tessera.utilization_band},
            {"min_replicas", tessera.min_replicas},
            {"max_replicas", tessera.max_replicas},
            {"idle_timeout_s", absl::ToDoubleSeconds(tessera.idle_timeout)},
            {"cold_start_s", absl::ToDoubleSeconds(tessera.cold_start)},
            {"scale_down_window_s", absl::ToDoubleSeconds(tessera.scale_down_window)},
            {"scale_down_quantile", tessera.scale_down_quantile}};
  }
  if (kind == "keda-queue") {
    return {{"target_queue_per_replica", keda_target_queue}, {"min_replicas", min_replicas}};
  }
  if (kind == "fixed") {
    return {{"replicas", std::max(1, min_replicas)}};
  }
  if (kind == "clairvoyant") {
    // Simulate adds the cold start it planned with (a simulation option, not a policy knob).
    return {{"target_utilization", clairvoyant_utilization}, {"window_s", clairvoyant_window_s}};
  }
  return {{"target_cpu_utilization", hpa_cpu_target}, {"min_replicas", std::max(1, min_replicas)}};
}

namespace {

// Independent copies of a trace whose rows are in time order, in time order: copy c of row i
// arrives at at(c, i) = begin + fmod(arrival_i - begin + shift[c], span), which rises with i but
// for one wrap, so each copy is two runs in order (the rows from the wrap on, shifted later; the
// rows before it, wrapped to the start). A heap merges the runs, ordered by time and then by row
// and copy: the order a stable sort of the rows' copies, each row's in turn, would give, without
// that sort's O(n log n) moves and buffer. `extra`: whether row i has copy `whole` (the fraction).
std::vector<SimRequest> MergeIndependentCopies(const std::vector<TokenRow>& rows,
                                               const ServingModel& m,
                                               const std::vector<double>& shift, double begin,
                                               double span, int whole,
                                               const std::vector<bool>& extra, size_t total) {
  auto at = [&](int c, size_t i) {
    return begin + std::fmod(rows[i].arrival_s - begin + shift[c], span);
  };
  struct Run {
    double at;
    size_t row, end;
    int copy;
  };
  // Min-heap on (time, row, copy): the greater of two runs is the one whose next copy comes later.
  auto later = [](const Run& a, const Run& b) {
    if (a.at != b.at) return a.at > b.at;
    if (a.row != b.row) return a.row > b.row;
    return a.copy > b.copy;
  };
  const bool has_extra = !extra.empty();
  // The first row of [row, end) that has copy c (the fractional copy skips rows without it).
  auto first_with = [&](int c, size_t row, size_t end) {
    if (c == whole) {
      while (row < end && !extra[row]) ++row;
    }
    return row;
  };
  std::vector<Run> heap;
  for (int c = 0; c <= whole - (has_extra ? 0 : 1); ++c) {
    // The wrap: the first row whose shifted time passes the span.
    const size_t wrap =
        static_cast<size_t>(std::partition_point(rows.begin(), rows.end(),
                                                 [&](const TokenRow& r) {
                                                   return r.arrival_s - begin + shift[c] < span;
                                                 }) -
                            rows.begin());
    for (auto [from, to] : {std::pair{wrap, rows.size()}, std::pair{size_t{0}, wrap}}) {
      const size_t row = first_with(c, from, to);
      if (row < to) heap.push_back({at(c, row), row, to, c});
    }
  }
  std::make_heap(heap.begin(), heap.end(), later);
  std::vector<SimRequest> out;
  ReserveLarge(out, total);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Run& run = heap.back();
    const TokenRow& r = rows[run.row];
    out.push_back({run.at, m.Work(r.context, r.generated), m.Cpu(r.context, r.generated)});
    run.row = first_with(run.copy, run.row + 1, run.end);
    if (run.row < run.end) {
      run.at = at(run.copy, run.row);
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
    }
  }
  return out;
}

}  // namespace

std::vector<SimRequest> ScaleRequests(const std::vector<TokenRow>& rows, const ServingModel& m,
                                      double rate_scale, uint64_t seed, RateMode mode) {
  Random rng(seed);
  std::vector<SimRequest> out;
  int whole = static_cast<int>(std::floor(rate_scale));
  double frac = rate_scale - whole;
  ReserveLarge(out, rows.size() * static_cast<size_t>(whole + (frac > 0 ? 1 : 0)));
  // kIndependent: copy c of the trace starts at shift[c] into it and wraps around its span.
  std::vector<double> shift;
  double begin = 0, span = 0;
  if (mode == RateMode::kIndependent && !rows.empty()) {
    auto [lo, hi] = std::minmax_element(
        rows.begin(), rows.end(),
        [](const TokenRow& a, const TokenRow& b) { return a.arrival_s < b.arrival_s; });
    begin = lo->arrival_s;
    span = hi->arrival_s - begin + 1;  // one second past the last arrival, so it wraps to 0
    shift.push_back(0);
    for (int c = 1; c <= whole; ++c) shift.push_back(rng.UniformDouble() * span);
    const auto by_time = [](const TokenRow& a, const TokenRow& b) {
      return a.arrival_s < b.arrival_s;
    };
    if (std::is_sorted(rows.begin(), rows.end(), by_time)) {
      // The same draws as below, in the same order: whether each row has the fractional copy.
      std::vector<bool> extra;
      size_t total = rows.size() * static_cast<size_t>(whole);
      if (frac > 0) {
        extra.resize(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
          extra[i] = rng.Bernoulli(frac);
          total += extra[i] ? 1 : 0;
        }
      }
      return MergeIndependentCopies(rows, m, shift, begin, span, whole, extra, total);
    }
  }
  for (const TokenRow& r : rows) {
    int copies = whole + (rng.Bernoulli(frac) ? 1 : 0);
    for (int c = 0; c < copies; ++c) {
      double at = r.arrival_s;
      if (!shift.empty()) {
        at = begin + std::fmod(r.arrival_s - begin + shift[c], span);
      } else if (!(whole == 1 && frac == 0)) {
        at += rng.UniformDouble();
      }
      out.push_back({at, m.Work(r.context, r.generated), m.Cpu(r.context, r.generated)});
    }
  }
  auto earlier = [](const SimRequest& a, const SimRequest& b) { return a.arrival < b.arrival; };
  // The trace as recorded (one copy, no jitter) is in order already: no copy of it to sort.
  if (!std::is_sorted(out.begin(), out.end(), earlier)) {
    std::stable_sort(out.begin(), out.end(), earlier);
  }
  return out;
}

std::vector<SimRequest> SynthesizeRequests(const std::vector<RateWindow>& windows,
                                           const ServingModel& m, double rate_scale,
                                           int64_t context, int64_t generated, uint64_t seed) {
  Random rng(seed);
  std::vector<SimRequest> out;
  // Room for the requests the windows' rates expect, and a little more: a replay of weeks is
  // tens of millions of them, which growing by doubling copies, and faults in, several times.
  double expected = 0;
  for (const RateWindow& w : windows) expected += std::max(0.0, w.rate * rate_scale * w.length_s);
  if (expected < 1e10) ReserveLarge(out, static_cast<size_t>(expected * 1.01) + 1024);
  double work = m.Work(context, generated), cpu = m.Cpu(context, generated);
  for (const RateWindow& w : windows) {
    if (w.rate <= 0) continue;
    // Gaps from the fitted distribution, rescaled so the window's mean rate is kept (and
    // multiplied by rate_scale).
    double mean_gap = w.distribution == "Gamma" ? w.p1 * w.p2 : w.p2 * std::tgamma(1 + 1 / w.p1);
    double stretch = (1.0 / (w.rate * rate_scale)) / std::max(mean_gap, 1e-9);
    double t = w.start_s;
    while (true) {
      double gap = w.distribution == "Gamma" ? Gamma(rng, w.p1, w.p2) : Weibull(rng, w.p1, w.p2);
      t += gap * stretch;
      if (t >= w.start_s + w.length_s) break;
      out.push_back({t, work, cpu});
    }
  }
  return out;
}

double MeanBusyReplicas(const std::vector<SimRequest>& requests, double warmup_s) {
  double span = requests.empty() ? 0 : requests.back().arrival - warmup_s;
  return span > 0 ? MeasuredWork(requests, warmup_s) / span : 0;
}

std::vector<int> ClairvoyantPlan(const std::vector<SimRequest>& requests, double cold_start_s,
                                 double utilization, double window_s) {
  if (requests.empty()) return {};
  const int window = std::max(1, static_cast<int>(std::lround(window_s)));
  const int lead = static_cast<int>(std::ceil(cold_start_s)) + 1;
  const size_t seconds = static_cast<size_t>(std::ceil(requests.back().arrival)) + 1;
  // Work arriving up to each second (prefix sums), then replicas needed per second.
  std::vector<double> upto(seconds + window + 1, 0);
  for (const SimRequest& r : requests) upto[static_cast<size_t>(r.arrival) + 1] += r.work;
  for (size_t i = 1; i < upto.size(); ++i) upto[i] += upto[i - 1];
  std::vector<int> need(seconds + lead + 1, 0);
  for (size_t i = 0; i < seconds; ++i) {
    double rate = (upto[i + window] - upto[i]) / window;
    need[i] = static_cast<int>(std::ceil(rate / utilization - 1e-9));
  }
  // Sliding maximum of need over [t, t + lead] (a deque of candidate seconds, need decreasing).
  std::vector<int> plan(seconds, 0);
  std::deque<size_t> cand;
  size_t pushed = 0;
  for (size_t t = 0; t < seconds; ++t) {
    for (; pushed <= t + lead && pushed < need.size(); ++pushed) {
      while (!cand.empty() && need[cand.back()] <= need[pushed]) cand.pop_back();
      cand.push_back(pushed);
    }
    while (cand.front() < t) cand.pop_front();
    plan[t] = need[cand.front()];
  }
  return plan;
}

SimResult Simulate(const std::vector<SimRequest>& requests, const ServingModel& model,
                   const SimOptions& opt, const PolicySpec& spec) {
  double cpu_start = ThreadCpuSeconds();
  SimResult res;
  res.policy = spec.kind;
  res.params = spec.Params();
  if (spec.kind == "tessera" && opt.scaler_poll_s > 0)
    res.params["poll_interval_s"] = opt.scaler_poll_s;
  const double dt = opt.dt_s;
  const bool clairvoyant = spec.kind == "clairvoyant";
  std::vector<int> plan;
  if (clairvoyant) {
    res.params["cold_start_s"] = opt.cold_start_s;
    plan = ClairvoyantPlan(requests, opt.cold_start_s, spec.clairvoyant_utilization,
                           spec.clairvoyant_window_s);
  }
  // A running service: its floor (at least one replica) is up at the start; `fixed`: all of them;
  // `clairvoyant`: what its plan has alive at the start.
  const int floor_replicas = std::max(1, spec.kind == "tessera" ? spec.tessera.min_replicas
                                         : clairvoyant          ? (plan.empty() ? 0 : plan[0])
                                                                : spec.min_replicas);
  std::vector<Replica> reps(floor_replicas);
  for (Replica& r : reps) r.phase = Phase::kReady;
  // Kept as replicas change phase and requests come and go, so that a step does not count them
  // over every replica (a step is 50 ms; a replay of weeks is tens of millions of steps).
  int n_starting = 0, n_draining = 0, n_running = 0;
  // The windows only the policy that reads them keeps: the GPU's busy time and the completions
  // for tessera's utilisation and throughput signals, the CPU's for hpa-cpu. (Kept by every
  // policy, they grew by an entry a step for the whole replay, since only a reader trims them.)
  const bool track_busy = spec.kind == "tessera", track_cpu = spec.kind == "hpa-cpu";
  RingQueue<int> queue;
  size_t next = 0;
  WaitHistogram waits;
  const double total_work = MeasuredWork(requests, opt.warmup_s);

  autoscale::AutoscaleState tstate;
  // Tessera's HPA as deploy/scaler/scaledobject.yaml sets it: no windows of its own, scale-up
  // up to 1000% or 100 pods per 15 s (Tessera's steps are the limit); the others HPA's defaults.
  Hpa hpa = spec.kind == "tessera" ? Hpa(0, opt.hpa_tolerance, 1000, 100)
                                   : Hpa(kHpaDownWindowS, opt.hpa_tolerance);
  double last_active = 0;
  // The clairvoyant plan is followed every second; the others decide at HPA's sync period.
  const double sync_period = clairvoyant ? 1 : kHpaSyncS;
  double next_sync = sync_period;
  double next_poll = spec.kind == "tessera" ? kTesseraPollS : kKedaPollS;
  const double poll_period = next_poll;
  int tessera_decision = 1;
  // With a scaler poll interval, tessera decides on its own clock as the running scaler does:
  // each decision steps from its previous one, and HPA applies the latest at its sync.
  const double decide_period = spec.kind == "tessera" ? opt.scaler_poll_s : 0;
  double next_decide = decide_period > 0 ? decide_period : std::numeric_limits<double>::infinity();
  double provisioned_s = 0;
  int64_t cold_starts = 0;
  int peak = 1;
  RingQueue<std::pair<double, int>> completions;  // (time, completed in the step)
  int completions_sum = 0;
  // Prometheus outages: the policies that read it through KEDA lose their reads; KEDA counts
  // the failed ones in a row at each HPA read, and past the threshold hands HPA its fallback.
  const bool via_prometheus = spec.kind == "tessera" || spec.kind == "keda-queue";
  auto prometheus_down = [&](double at) {
    return via_prometheus && !opt.outages.empty() && InOutage(opt.outages, at);
  };
  // No scaler replica reachable: neither GetMetrics nor IsActive is answered.
  auto scaler_down = [&](double at) {
    return spec.kind == "tessera" && !opt.scaler_outages.empty() &&
           InOutage(opt.scaler_outages, at);
  };
  int failed_reads = 0;
  bool tessera_fresh = true;  // whether tessera's latest decision had its data (GetMetrics OK)
  // HPA's replicas once a read of the metric failed: nullopt while it keeps the count (no
  // fallback, or not yet past the threshold), else the fallback's, within HPA's bounds.
  auto fallback_replicas = [&](int current) -> std::optional<int> {
    ++failed_reads;
    if (!opt.fallback.enabled || failed_reads <= opt.fallback.failure_threshold) {
      return std::nullopt;
    }
    const int lowest =
        std::max(1, spec.kind == "tessera" ? spec.tessera.min_replicas : spec.min_replicas);
    const int highest = spec.kind == "tessera" ? spec.tessera.max_replicas : opt.max_replicas;
    return std::clamp(opt.fallback.Replicas(current), lowest, std::max(lowest, highest));
  };

  auto alive = [&] { return static_cast<int>(reps.size()) - n_draining; };
  auto set_replicas = [&](int want, double now) {
    want = std::clamp(want, 0, opt.max_replicas);
    int have = alive();
    while (have < want) {
      Replica r;
      r.phase = Phase::kStarting;
      r.ready_at = now + opt.cold_start_s;
      reps.push_back(std::move(r));
      ++n_starting;
      cold_starts += now >= opt.warmup_s ? 1 : 0;
      ++have;
    }
    while (have > want) {
      // Newest starting replica first, else the ready one with the fewest requests.
      int pick = -1;
      for (int i = static_cast<int>(reps.size()) - 1; i >= 0 && pick < 0; --i) {
        if (reps[i].phase == Phase::kStarting) pick = i;
      }
      if (pick < 0) {
        for (int i = 0; i < static_cast<int>(reps.size()); ++i) {
          if (reps[i].phase == Phase::kReady &&
              (pick < 0 || reps[i].active.size() < reps[pick].active.size())) {
            pick = i;
          }
        }
      }
      if (reps[pick].phase == Phase::kStarting) {
        reps.erase(reps.begin() + pick);
        --n_starting;
      } else {
        reps[pick].phase = Phase::kDraining;
        ++n_draining;
      }
      --have;
    }
    if (now >= opt.warmup_s) peak = std::max(peak, have);
  };
  auto window_mean = [&](bool cpu, double now) {
    double sum = 0;
    int n = 0;
    for (Replica& r : reps) {
      if (r.phase != Phase::kReady) continue;
      auto& h = cpu ? r.cpu : r.busy;
      double& s = cpu ? r.cpu_sum : r.busy_sum;
      while (!h.empty() && now - h.front().first > kUtilWindowS) {
        s -= h.front().second;
        h.pop_front();
      }
      double span = std::min(kUtilWindowS, now - (r.ready_at));
      if (span <= 0) continue;
      sum += s / span;
      ++n;
    }
    return n == 0 ? 0.0 : sum / n;
  };
  // What tessera's queries would read now.
  auto tessera_signals = [&](double t, int waiting, int running, int ready, int starting) {
    absl::Time now = absl::FromUnixSeconds(0) + absl::Seconds(t);
    autoscale::Signals s;
    s.waiting = autoscale::Sample::At(waiting, now);
    s.running = autoscale::Sample::At(running, now);
    s.ready = autoscale::Sample::At(ready, now);
    s.starting = autoscale::Sample::At(starting, now);
    s.utilization = autoscale::Sample::At(window_mean(false, t), now);
    while (!completions.empty() && t - completions.front().first > kUtilWindowS) {
      completions_sum -= completions.front().second;
      completions.pop_front();
    }
    s.throughput = autoscale::Sample::At(completions_sum / kUtilWindowS, now);
    // Prometheus down: every query fails, so every signal is missing.
    return prometheus_down(t) ? autoscale::Signals{} : s;
  };
  // A scaler restarted: a fresh state, with or without the history its backfill rebuilds. Its
  // first decision takes the replicas there as the real one does (holding them for a window, its
  // idle clock from then, unless the history merged brings back what the old process had).
  double next_restart = opt.scaler_restart_every_s > 0 ? opt.scaler_restart_every_s : HUGE_VAL;
  bool restarted = false;
  auto restart_if_due = [&](double t) {
    while (t >= next_restart) {
      autoscale::AutoscaleState fresh;
      if (opt.scaler_backfill) autoscale::MergeHistory(spec.tessera, tstate, fresh);
      tstate = std::move(fresh);
      restarted = true;
      next_restart += opt.scaler_restart_every_s;
    }
  };
  auto tessera_decide = [&](double t, int waiting, int running, int ready, int starting) {
    restart_if_due(t);
    tessera_fresh = !prometheus_down(t);
    return autoscale::DecideReplicas(spec.tessera,
                                     tessera_signals(t, waiting, running, ready, starting), tstate,
                                     absl::FromUnixSeconds(0) + absl::Seconds(t))
        .replicas;
  };

  double t = 0;
  while (true) {
    // Arrivals and readiness.
    while (next < requests.size() && requests[next].arrival <= t) queue.push_back(next++);
    if (n_starting > 0) {
      for (Replica& r : reps) {
        if (r.phase == Phase::kStarting && r.ready_at <= t) {
          r.phase = Phase::kReady;
          --n_starting;
        }
      }
    }
    // Dispatch to the least-loaded ready replica with a free batch slot.
    while (!queue.empty()) {
      int best = -1;
      for (int i = 0; i < static_cast<int>(reps.size()); ++i) {
        if (reps[i].phase == Phase::kReady &&
            static_cast<int>(reps[i].active.size()) < model.max_batch &&
            (best < 0 || reps[i].active.size() < reps[best].active.size())) {
          best = i;
        }
      }
      if (best < 0) break;
      int q = queue.front();
      queue.pop_front();
      if (requests[q].arrival >= opt.warmup_s) waits.Add(std::max(0.0, t - requests[q].arrival));
      reps[best].active.Add(requests[q].work);
      ++n_running;
      if (track_cpu) {
        reps[best].cpu.emplace_back(t, requests[q].cpu);
        reps[best].cpu_sum += requests[q].cpu;
      }
    }
    const bool any_active = n_running > 0;
    if (next >= requests.size() && queue.empty() && !any_active && t >= opt.end_s) break;

    // Idle: jump to the next event (arrival, readiness, controller tick or the trace's end).
    double step = dt;
    if (!any_active && queue.empty()) {
      double until = std::min({next_sync, next_poll, next_decide});
      if (next < requests.size()) until = std::min(until, requests[next].arrival);
      if (t < opt.end_s) until = std::min(until, opt.end_s);
      for (const Replica& r : reps) {
        if (r.phase == Phase::kStarting) until = std::min(until, r.ready_at);
      }
      step = std::max(dt, until - t);
    }
    // Serve (processor sharing within each replica).
    for (Replica& r : reps) {
      if (r.active.empty()) continue;
      double share = step / r.active.size();
      if (track_busy) {
        r.busy.emplace_back(t, step);
        r.busy_sum += step;
      }
      if (const int done = r.active.Serve(share); done > 0) {
        n_running -= done;
        if (track_busy) {
          completions.emplace_back(t, done);
          completions_sum += done;
        }
      }
    }
    // Only the part of the step after the warm-up counts; so does the count held across it.
    const double measured = std::max(0.0, t + step - std::max(t, opt.warmup_s));
    provisioned_s += measured * reps.size();
    if (measured > 0) peak = std::max(peak, alive());
    if (n_draining > 0) {
      const auto gone = std::remove_if(reps.begin(), reps.end(), [](const Replica& r) {
        return r.phase == Phase::kDraining && r.active.empty();
      });
      n_draining -= static_cast<int>(reps.end() - gone);
      reps.erase(gone, reps.end());
    }
    t += step;

    // Controllers.
    const int starting_n = n_starting, running = n_running;
    const int ready = static_cast<int>(reps.size()) - n_starting - n_draining;
    const int waiting = static_cast<int>(queue.size());
    int current = alive();
    if (t >= next_decide) {
      next_decide += decide_period;
      // At zero the running scaler's last decision was 0 (KEDA scaled to zero on it).
      if (current == 0) tstate.current = 0;
      tessera_decision = tessera_decide(t, waiting, running, ready, starting_n);
    }
    if (spec.kind == "fixed") {
      // Static provisioning: no controller.
    } else if (t >= next_sync) {
      next_sync += sync_period;
      if (clairvoyant) {
        // Past the plan's end (the last arrival), hold until the last request is served.
        size_t second = static_cast<size_t>(t);
        // Past it with nothing left to serve, foresight knows that nothing comes: none.
        int want = second < plan.size() ? plan[second] : waiting > 0 || running > 0 ? current : 0;
        set_replicas(waiting > 0 ? std::max(want, 1) : want, t);
      } else if (spec.kind == "tessera") {
        if (decide_period <= 0) {
          // One decision per sync, stepping from the replicas there (a restarted scaler's first
          // decision with them finds them itself; at zero IsActive's may have come first).
          restart_if_due(t);
          if (!restarted || tstate.initialised) {
            tstate.current = current;
            tstate.initialised = true;
          }
          restarted = false;
          tessera_decision = tessera_decide(t, waiting, running, ready, starting_n);
        }
        if (scaler_down(t)) {
          // GetMetricSpec fails before GetMetrics is asked: no metric, and no failed read counted
          // (kedacore/keda#8056). HPA keeps the count.
        } else if (!tessera_fresh) {
          // GetMetrics answers UNAVAILABLE: KEDA's fallback, or HPA keeps the count.
          if (current >= 1) {
            if (std::optional<int> n = fallback_replicas(current)) {
              set_replicas(hpa.Apply(current, *n, static_cast<double>(*n) / current, t), t);
            }
          }
        } else {
          failed_reads = 0;
          if (current >= 1 && tessera_decision >= 1) {
            // HPA with target AverageValue 1: desired = the metric (Tessera's count).
            set_replicas(hpa.Apply(current, tessera_decision,
                                   static_cast<double>(tessera_decision) / current, t),
                         t);
          }
        }
      } else if (current >= 1 && prometheus_down(t)) {
        // keda-queue's Prometheus trigger fails: KEDA's fallback, or HPA keeps the count (its
        // stabilisation window still holds the recommendations before the outage).
        if (std::optional<int> n = fallback_replicas(current)) {
          set_replicas(std::max(floor_replicas,
                                hpa.Apply(current, *n, static_cast<double>(*n) / current, t)),
                       t);
        }
      } else if (current >= 1) {
        failed_reads = 0;
        int desired = 0;
        double ratio = 1;
        if (spec.kind == "keda-queue") {
          desired = static_cast<int>(std::ceil(waiting / spec.keda_target_queue - 1e-9));
          ratio = waiting / (spec.keda_target_queue * current);
        } else {
          double util = window_mean(true, t) / model.cpu_request_cores +
                        model.cpu_idle_cores / model.cpu_request_cores;
          desired = static_cast<int>(std::ceil(current * util / spec.hpa_cpu_target - 1e-9));
          ratio = util / spec.hpa_cpu_target;
        }
        set_replicas(std::max(floor_replicas, hpa.Apply(current, std::max(desired, 1), ratio, t)),
                     t);
      }
    }
    if (t >= next_poll && spec.kind != "hpa-cpu" && spec.kind != "fixed" && !clairvoyant) {
      next_poll += poll_period;
      // keda-queue's trigger fails its activity check: KEDA neither wakes the service nor counts
      // down to zero (at zero, no fallback either: kedacore/keda#7239).
      // Nor when no scaler replica answers IsActive.
      const bool check_failed = (spec.kind == "keda-queue" && prometheus_down(t)) || scaler_down(t);
      // KEDA: IsActive each polling interval; 0 -> 1 on activity, -> 0 after the cooldown.
      bool active = spec.kind == "tessera" ? tessera_decision > 0 : waiting > 0;
      if (spec.kind == "tessera" && current == 0 && decide_period <= 0) {
        // IsActive asks Tessera afresh (the scaler decides on every poll).
        absl::Time now = absl::FromUnixSeconds(0) + absl::Seconds(t);
        autoscale::Signals s;
        if (!prometheus_down(t)) {
          s.waiting = autoscale::Sample::At(waiting, now);
          s.running = autoscale::Sample::At(running, now);
          s.ready = autoscale::Sample::At(0, now);
          s.starting = autoscale::Sample::At(0, now);
        }
        restart_if_due(t);
        tessera_fresh = !prometheus_down(t);
        tstate.current = 0;
        tessera_decision = autoscale::DecideReplicas(spec.tessera, s, tstate, now).replicas;
        active = tessera_decision > 0;
      }
      int min_keda = spec.kind == "tessera" ? spec.tessera.min_replicas : spec.min_replicas;
      double cooldown = spec.kind == "tessera" ? kTesseraCooldownS : kKedaCooldownS;
      if (check_failed) {
        // Nothing changes until the check answers again.
      } else if (active) {
        last_active = t;
        if (current == 0)
          set_replicas(std::max(1, spec.kind == "tessera" ? tessera_decision : 1), t);
      } else if (current > 0 && min_keda == 0 && t - last_active >= cooldown) {
        set_replicas(0, t);
      }
    }
  }

  res.requests = waits.count();
  res.gpu_hours = provisioned_s / 3600;
  res.busy_gpu_hours = total_work / 3600;
  res.utilization = res.gpu_hours > 0 ? res.busy_gpu_hours / res.gpu_hours : 0;
  res.slo_attainment =
      res.requests > 0 ? static_cast<double>(waits.AtMost(opt.slo_wait_s)) / res.requests : 1;
  res.p50_wait_s = waits.Quantile(0.5);
  res.p99_wait_s = waits.Quantile(0.99);
  res.over_60s = res.requests - waits.AtMost(60);
  res.cold_starts = cold_starts;
  res.peak_replicas = peak;
  res.cpu_seconds = ThreadCpuSeconds() - cpu_start;
  return res;
}

std::vector<SimResult> SimulateAll(const std::vector<SimRequest>& requests,
                                   const ServingModel& model, const SimOptions& options,
                                   const std::vector<PolicySpec>& policies, int jobs) {
  std::vector<SimResult> out(policies.size());
  ParallelFor(policies.size(), static_cast<size_t>(std::max(jobs, 1)),
              [&](size_t i) { out[i] = Simulate(requests, model, options, policies[i]); });
  return out;
}

}  // namespace tessera::sim
