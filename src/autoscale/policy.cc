#include "autoscale/policy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::autoscale {
namespace {

bool Fresh(const Sample& s, const AutoscalePolicy& p, absl::Time now) {
  return s.present && std::isfinite(s.value) && s.value >= 0 && now - s.at <= p.stale_after &&
         s.at <= now + absl::Seconds(5);  // a sample from the future is a broken clock
}

int CeilDiv(double a, double b) {
  if (b <= 0) return 0;
  double q = a / b;
  // Guard against 3.0000000001 becoming 4 from floating-point noise.
  return static_cast<int>(std::ceil(q - 1e-9));
}

// Least-squares slope of demand over time, per second; 0 with too little history.
double Slope(const std::deque<std::pair<absl::Time, double>>& h, absl::Duration window) {
  if (h.size() < 3 || h.back().first - h.front().first < window / 4) {
    return 0;
  }
  double n = 0, st = 0, sv = 0, stt = 0, stv = 0;
  absl::Time t0 = h.front().first;
  for (const auto& [t, v] : h) {
    double x = absl::ToDoubleSeconds(t - t0);
    n += 1;
    st += x;
    sv += v;
    stt += x * x;
    stv += x * v;
  }
  double den = n * stt - st * st;
  return den <= 0 ? 0 : (n * stv - st * sv) / den;
}

// Minutes since the epoch, rounded down.
int64_t MinuteOf(absl::Time t) {
  return absl::ToInt64Minutes(absl::Floor(t - absl::UnixEpoch(), absl::Minutes(1)));
}

// The seasonal rule's lead: a cold start rounded up to minutes, plus one.
int64_t LeadMinutes(const AutoscalePolicy& p) {
  return absl::ToInt64Minutes(absl::Ceil(p.cold_start, absl::Minutes(1))) + 1;
}

// Minutes back the seasonal rule reads: the longest period x repeats (0 when off).
int64_t ReachMinutes(const AutoscalePolicy& p) {
  int64_t longest = 0;
  for (absl::Duration d : p.seasonal_periods) longest = std::max(longest, absl::ToInt64Minutes(d));
  return longest * p.seasonal_repeats;
}

// Minutes of load history the seasonal rule keeps (the size of AutoscaleState's ring).
int64_t HistoryMinutes(const AutoscalePolicy& p) {
  if (p.seasonal_periods.empty()) return 0;
  return ReachMinutes(p) + LeadMinutes(p) + 1;
}

// A minute's slot in the ring of `size` minutes.
size_t Slot(int64_t minute, int64_t size) {
  return static_cast<size_t>(((minute % size) + size) % size);
}

// Makes `st`'s ring one of `size` minutes (size > 0), keeping the latest minutes of its history
// that fit: a change of knobs reshapes the ring, and the load seen under the old ones is still
// the load. A ring grown keeps all it had (its earlier minutes are not known); one shrunk keeps
// its last `size` minutes.
void Reslot(AutoscaleState& st, int64_t size) {
  const int64_t was = static_cast<int64_t>(st.load_by_minute.size());
  if (was == size) return;
  std::vector<double> ring(static_cast<size_t>(size), 0);
  if (was == 0) {  // nothing seen yet
    st.load_by_minute = std::move(ring);
    return;
  }
  const int64_t from = std::max(st.first_minute, st.last_minute - size + 1);
  for (int64_t m = from; m <= st.last_minute; ++m) {
    ring[Slot(m, size)] = st.load_by_minute[Slot(m, was)];
  }
  st.load_by_minute = std::move(ring);
  st.first_minute = from;
}

// `from`'s per-minute load (its ring and the minutes it spans) in place of `to`'s; nothing else.
void TakeLoadHistory(const AutoscaleState& from, AutoscaleState& to) {
  to.load_by_minute = from.load_by_minute;
  to.first_minute = from.first_minute;
  to.last_minute = from.last_minute;
}

// The seasonal rule. Records `load` (busy replica-equivalents now) for the minute of `now`, then
// for each period asks: in every one of the last `seasonal_repeats` periods, what was the most
// load within a lead (a cold start, rounded up to minutes, plus one) after this moment's phase?
// It answers the least of those (a load that came back every time), provided the load now is at
// least `target_utilization` times the least it was at this phase then; 0 without enough
// history. `why` says which period answered.
double Seasonal(const AutoscalePolicy& p, AutoscaleState& st, absl::Time now, double load,
                std::string* why) {
  if (p.seasonal_periods.empty() || now == absl::InfiniteFuture() || now == absl::InfinitePast()) {
    return 0;
  }
  const int64_t lead = LeadMinutes(p);
  const int64_t size = HistoryMinutes(p);
  auto at = [&](int64_t m) -> double& { return st.load_by_minute[Slot(m, size)]; };
  const int64_t minute = MinuteOf(now);
  if (st.load_by_minute.empty() || minute < st.last_minute) {
    // First call, or a clock that went back: start the history afresh.
    st.load_by_minute.assign(size, 0);
    st.first_minute = minute;
    at(minute) = load;
    st.last_minute = minute;
  }
  Reslot(st, size);  // knobs of another span: the minutes that fit are kept
  if (minute > st.last_minute) {
    // Minutes without a decision (none is taken on missing data) count as no load.
    for (int64_t m = st.last_minute + 1; m < minute && m <= st.last_minute + size; ++m) at(m) = 0;
    at(minute) = load;
  } else {
    // A minute's load is the least seen within it: a level the whole minute held, not a spike.
    at(minute) = std::min(at(minute), load);
  }
  st.last_minute = minute;
  st.first_minute = std::max(st.first_minute, minute - size + 1);

  double best = 0;
  for (absl::Duration d : p.seasonal_periods) {
    const int64_t period = absl::ToInt64Minutes(d);
    // A period no longer than the lead would look ahead into its own next repeat.
    if (period <= lead) continue;
    if (minute - p.seasonal_repeats * period < st.first_minute) continue;  // too little history
    double ahead = HUGE_VAL, then = HUGE_VAL;
    for (int k = 1; k <= p.seasonal_repeats; ++k) {
      const int64_t phase = minute - k * period;
      double most = 0;
      for (int64_t m = phase; m <= phase + lead; ++m) most = std::max(most, at(m));
      ahead = std::min(ahead, most);
      then = std::min(then, at(phase));
    }
    // The pattern holds only while the load now is at least what it was at this phase then,
    // within the target's headroom: a recurring burst that has ended, or has not come today,
    // starts nothing.
    if (load < p.target_utilization * then || ahead <= best) continue;
    best = ahead;
    *why = absl::StrFormat(
        "; recurring: %.1f replicas busy within %s of this time in each of the last %d periods "
        "of %s",
        ahead, absl::FormatDuration(absl::Minutes(lead)), p.seasonal_repeats,
        absl::FormatDuration(d));
  }
  return best;
}

// What the scale-down window holds: the lowest of its recommendations that at least `quantile`
// of them do not exceed (at 1, the highest); 0 for an empty window.
int WindowHold(const std::deque<std::pair<absl::Time, int>>& window, double quantile) {
  if (window.empty()) return 0;
  if (quantile >= 1) {  // the default: no copy to take the highest
    int highest = 0;
    for (const auto& entry : window) highest = std::max(highest, entry.second);
    return highest;
  }
  std::vector<int> counts;
  counts.reserve(window.size());
  for (const auto& entry : window) counts.push_back(entry.second);
  // The k-th lowest, k = ceil(quantile x n) (at least 1).
  const size_t n = counts.size();
  const size_t k = std::clamp<size_t>(
      static_cast<size_t>(std::ceil(quantile * static_cast<double>(n) - 1e-9)), 1, n);
  std::nth_element(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   counts.end());
  return counts[k - 1];
}

// `past`'s entries from before `live_started` (all of them when `live` has not decided yet),
// then `live`'s: a time-ordered record (the window's recommendations, the trend's samples) as
// one process would have kept it.
template <typename T>
std::deque<std::pair<absl::Time, T>> PastThenLive(const std::deque<std::pair<absl::Time, T>>& past,
                                                  const std::deque<std::pair<absl::Time, T>>& live,
                                                  absl::Time live_started) {
  std::deque<std::pair<absl::Time, T>> out;
  for (const auto& entry : past) {
    if (live_started == absl::InfinitePast() || entry.first < live_started) out.push_back(entry);
  }
  out.insert(out.end(), live.begin(), live.end());
  return out;
}

// The scale-down window, the idle clock and the demand trend, when `past` reaches `live`'s start.
bool MergeWindow(const AutoscalePolicy& policy, const AutoscaleState& past, AutoscaleState& live) {
  const bool before_first = live.started == absl::InfinitePast();
  if (past.last_fresh == absl::InfinitePast() ||
      (!before_first && past.last_fresh < live.started - policy.stale_after)) {
    return false;
  }
  if (!live.busy_seen) live.last_busy = past.last_busy;
  live.recommendations = PastThenLive(past.recommendations, live.recommendations, live.started);
  // The demand trend's samples (the next decision drops those beyond trendWindow), and the queue
  // the last decision saw, against which a backlog counts as growing or draining.
  live.demand = PastThenLive(past.demand, live.demand, live.started);
  if (before_first) live.last_waiting = past.last_waiting;
  live.restart_hold = 0;
  live.last_fresh = std::max(live.last_fresh, past.last_fresh);
  return true;
}

}  // namespace

absl::Duration SeasonalHistory(const AutoscalePolicy& policy) {
  return absl::Minutes(HistoryMinutes(policy));
}

absl::Duration SeasonalReach(const AutoscalePolicy& policy) {
  return absl::Minutes(ReachMinutes(policy));
}

absl::Duration HistoryToRebuild(const AutoscalePolicy& policy) {
  return std::max(SeasonalHistory(policy), absl::Hours(24));
}

bool MergeHistory(const AutoscalePolicy& policy, const AutoscaleState& past, AutoscaleState& live) {
  if (live.batch_per_replica <= 0) live.batch_per_replica = past.batch_per_replica;
  const bool carried = MergeWindow(policy, past, live);
  MergeLoadHistory(policy, past, live);
  return carried;
}

void MergeLoadHistory(const AutoscalePolicy& policy, const AutoscaleState& past_state,
                      AutoscaleState& live) {
  const int64_t size = HistoryMinutes(policy);
  if (size == 0 || past_state.load_by_minute.empty()) return;
  // Either history may have been kept under knobs of another span: both are taken into this
  // policy's ring.
  AutoscaleState past;
  TakeLoadHistory(past_state, past);
  Reslot(past, size);
  if (live.load_by_minute.empty()) {  // no decision yet: the past is all there is
    TakeLoadHistory(past, live);
    return;
  }
  Reslot(live, size);
  const int64_t from = std::max(past.first_minute, live.last_minute - size + 1);
  const int64_t to = std::min(past.last_minute, live.last_minute);
  for (int64_t m = from; m <= to; ++m) {
    const double then = past.load_by_minute[Slot(m, size)];
    double& slot = live.load_by_minute[Slot(m, size)];
    // Before live's first minute its slot is empty (the ring starts zeroed, and nothing since has
    // wrapped onto it).
    slot = m < live.first_minute ? then : std::min(slot, then);
  }
  if (from <= to) live.first_minute = std::min(live.first_minute, from);
}

absl::Status AutoscalePolicy::Validate() const {
  auto bad = [](absl::string_view knob, absl::string_view want) {
    return absl::InvalidArgumentError(absl::StrCat(knob, ": expected ", want));
  };
  if (!(target_queue_per_replica > 0)) return bad("targetQueuePerReplica", "a number above 0");
  if (!(target_utilization > 0 && target_utilization <= 1)) {
    return bad("targetUtilization", "a fraction above 0 and at most 1");
  }
  if (!(utilization_band >= 0 && utilization_band < target_utilization)) {
    return bad("utilizationBand", "at least 0 and below targetUtilization");
  }
  if (min_replicas < 0) return bad("minReplicas", "0 or more");
  if (max_replicas < std::max(1, min_replicas)) {
    return bad("maxReplicas", "at least 1 and at least minReplicas");
  }
  if (activation_threshold < 0) return bad("activationThreshold", "0 or more");
  if (scale_up_step < 1) return bad("scaleUpStep", "1 or more");
  if (scale_up_ratio < 0) return bad("scaleUpRatio", "0 or more");
  if (scale_down_step < 1) return bad("scaleDownStep", "1 or more");
  if (scale_down_ratio < 0 || scale_down_ratio > 1) return bad("scaleDownRatio", "0 to 1");
  if (!(scale_down_quantile > 0 && scale_down_quantile <= 1)) {
    return bad("scaleDownQuantile", "a fraction above 0 and at most 1");
  }
  for (auto [knob, d] : {std::pair{"idleTimeout", idle_timeout},
                         {"scaleDownWindow", scale_down_window},
                         {"coldStart", cold_start},
                         {"trendWindow", trend_window}}) {
    if (d < absl::ZeroDuration()) return bad(knob, "a duration of 0 or more");
  }
  if (stale_after <= absl::ZeroDuration()) return bad("staleAfter", "a duration above 0");
  if (seasonal_repeats < 1) return bad("seasonalRepeats", "1 or more");
  for (absl::Duration d : seasonal_periods) {
    if (d <= absl::ZeroDuration() || d % absl::Minutes(1) != absl::ZeroDuration()) {
      return bad("seasonalPeriods", "durations of whole minutes, above 0");
    }
    if (d * seasonal_repeats > absl::Hours(24 * 31)) {
      return bad("seasonalPeriods",
                 "periods x seasonalRepeats of at most 31 days (the history kept)");
    }
  }
  return absl::OkStatus();
}

Decision DecideReplicas(const AutoscalePolicy& p, const Signals& s, AutoscaleState& state,
                        absl::Time now) {
  if (!state.initialised) {
    // A past merged in before the first decision (MergeHistory) counts only if it reaches now.
    const bool past_reaches_now = state.last_fresh >= now - p.stale_after;
    if (state.started == absl::InfinitePast()) {
      state.started = now;
      if (!past_reaches_now) {
        // Idle time counts from the first look, not from the epoch.
        state.last_busy = now;
        state.recommendations.clear();
        state.demand.clear();
        state.last_waiting = 0;
      }
    }
    // Start from the replicas the service has once they are known (a scaler restarted while
    // Prometheus is unreachable must not later step from the count it held at), and hold them
    // for one scale-down window: the recommendations that would justify releasing them are gone
    // with the previous process (unless its history, replayed, brought them back).
    if (Fresh(s.ready, p, now)) {
      state.initialised = true;
      state.current = static_cast<int>(s.ready.value) +
                      (Fresh(s.starting, p, now) ? static_cast<int>(s.starting.value) : 0);
      if (!past_reaches_now) {
        state.restart_hold = state.current;
        state.restart_hold_at = now;
      }
    }
  }
  Decision d;
  const int floor = std::max(p.min_replicas, 0);
  auto clamp = [&](int r) { return std::clamp(r, floor, p.max_replicas); };

  // Missing or stale data: hold, never lower, never zero.
  if (!Fresh(s.waiting, p, now) || !Fresh(s.running, p, now) || !Fresh(s.ready, p, now)) {
    std::string which;
    for (auto [name, sample] :
         {std::pair{"waiting", &s.waiting}, {"running", &s.running}, {"ready", &s.ready}}) {
      if (!Fresh(*sample, p, now)) absl::StrAppend(&which, which.empty() ? "" : ", ", name);
    }
    state.last_busy = now;  // unknown demand restarts the idle clock
    state.busy_seen = true;
    d.replicas = clamp(std::max(state.current, 1));
    d.reason = absl::StrCat("holding at ", d.replicas, ": no fresh ", which,
                            " data (never lower or zero on missing data)");
    d.data_ok = false;
    state.current = d.replicas;
    return d;
  }

  const double waiting = s.waiting.value;
  const double running = s.running.value;
  const double ready = s.ready.value;
  const double starting = Fresh(s.starting, p, now) ? s.starting.value : 0;
  const double demand = waiting + running;
  struct LastWaiting {
    AutoscaleState& st;
    double value;
    ~LastWaiting() { st.last_waiting = value; }
  } remember{state, waiting};
  state.last_fresh = now;
  // Busy: requests waiting or running now, or completed lately. The gauges are instants, and a
  // service taking a short request every minute shows none running at almost every sample; the
  // completion rate (a counter's rate over its window) sees every request.
  const bool completing = Fresh(s.throughput, p, now) && s.throughput.value > 0;
  if (demand > 0 || completing) {
    state.last_busy = now;
    state.busy_seen = true;
  }

  // Demand trend, projected one cold start ahead (only upwards: a falling trend is left to the
  // scale-down window).
  state.demand.emplace_back(now, demand);
  while (!state.demand.empty() && now - state.demand.front().first > p.trend_window) {
    state.demand.pop_front();
  }
  double slope = Slope(state.demand, p.trend_window);
  // At most double: a burst's steep edge must not be extrapolated into a flood.
  double projected =
      demand + std::min(demand, std::max(0.0, slope) * absl::ToDoubleSeconds(p.cold_start));

  // Queue rule: replicas run `per_replica` requests at once plus the queue target. What one
  // replica runs when full is seen only while requests wait; below that, the load spreads thin
  // over many replicas and its running count says nothing about what each could take.
  double per_replica = ready > 0 ? running / ready : 0;
  if (waiting > 0 && per_replica > 0) state.batch_per_replica = per_replica;
  per_replica = std::max(per_replica, state.batch_per_replica);
  int by_queue = CeilDiv(projected, per_replica + p.target_queue_per_replica);
  // Busy replica-equivalents now, for the seasonal rule: the queue rule's count unrounded and
  // without the trend, or the busy share of the ready replicas, whichever is more.
  double load = demand / (per_replica + p.target_queue_per_replica);
  std::string why = absl::StrFormat("queue: %.0f waiting + %.0f running", waiting, running);
  if (slope > 0 && projected > demand + 0.5) {
    absl::StrAppend(&why, absl::StrFormat(" (%.0f projected in %s)", projected,
                                          absl::FormatDuration(p.cold_start)));
  }
  absl::StrAppend(&why, " -> ", by_queue);
  // A backlog the running replicas clear before a new one could start is not a reason to add
  // one: it would arrive idle (and be paid for) after the burst.
  bool transient = false;
  if (Fresh(s.throughput, p, now) && s.throughput.value > 0 && ready > 0) {
    double drain_s = waiting / s.throughput.value;
    // Transient only while the queue is not growing: a growing one is not draining at all.
    transient = drain_s < absl::ToDoubleSeconds(p.cold_start) && waiting <= state.last_waiting;
    if (transient && waiting > 0) {
      absl::StrAppend(&why,
                      absl::StrFormat(" (backlog drains in %.0fs, before a cold start)", drain_s));
    }
  }

  // Utilisation rule (guard-rail): busy replica-equivalents over the target, outside the band.
  int by_util = 0;
  if (Fresh(s.utilization, p, now) && ready > 0) {
    double util = std::min(1.0, s.utilization.value);
    load = std::max(load, util * ready);
    if (std::abs(util - p.target_utilization) <= p.utilization_band) {
      by_util = static_cast<int>(ready + starting);
      absl::StrAppend(&why, absl::StrFormat("; utilisation %.2f in band -> %d", util, by_util));
    } else {
      by_util = CeilDiv(util * ready, p.target_utilization);
      absl::StrAppend(&why, absl::StrFormat("; utilisation %.2f -> %d", util, by_util));
    }
  }
  int want = std::max(by_queue, by_util);
  if (transient && want > state.current) {
    want = state.current;  // saturation that ends before a replica could start
  }

  std::string season_why;
  const double season = Seasonal(p, state, now, load, &season_why);

  // From zero: activation; while recently busy: at least one.
  bool idle_long = now - state.last_busy >= p.idle_timeout;
  if (state.current == 0 && ready + starting == 0) {
    if (waiting > p.activation_threshold || running > 0) {
      want = std::max(want, 1);
      absl::StrAppend(&why, "; activation from zero");
    } else {
      want = 0;
    }
  } else if (want == 0 && !idle_long) {
    want = 1;
    absl::StrAppend(&why, "; idle for less than ", absl::FormatDuration(p.idle_timeout),
                    ", keeping one");
  }
  // Recurring load: started a cold start ahead, sized to the target utilisation, but only when
  // it would saturate what the rules above ask (one replica per busy replica-equivalent);
  // a recurring level those replicas absorb is left to the rules.
  if (season > want) {
    want = CeilDiv(season, p.target_utilization);
    absl::StrAppend(&why, season_why);
  }
  want = clamp(want);

  // Scale-down window: the highest recommendation within it (or its scaleDownQuantile). One made
  // while no replica serves is left out: that queue is the backlog of the cold start (nothing
  // could take it), and the replicas it started are held only by what the queue asks once they
  // serve it. Otherwise a wake-up from zero, whose first minute's queue asks for a replica per
  // few waiting requests, holds all of them for the whole window after a backlog one replica
  // clears in seconds.
  const bool serving = ready > 0;
  if (serving) state.recommendations.emplace_back(now, want);
  while (!state.recommendations.empty() &&
         now - state.recommendations.front().first > p.scale_down_window) {
    state.recommendations.pop_front();
  }
  int held = WindowHold(state.recommendations, p.scale_down_quantile);
  // Below the highest, never below what this decision asks (at 1 it is in the window already).
  if (serving) held = std::max(held, want);
  if (state.restart_hold > 0 && now - state.restart_hold_at <= p.scale_down_window) {
    held = std::max(held, state.restart_hold);
  }

  int next = state.current;
  if (want == 0 && idle_long && state.current > 0) {
    // Idle for the whole timeout: that is the stabilisation for zero; no window on top.
    next = 0;
    d.reason = absl::StrCat("scale to zero: no request waiting, running or completed for ",
                            absl::FormatDuration(p.idle_timeout));
  } else if (want > state.current) {
    int limit =
        state.current +
        std::max(p.scale_up_step, static_cast<int>(std::ceil(p.scale_up_ratio * state.current)));
    next = std::min(want, limit);
    d.reason = absl::StrCat("scale up to ", next, ": ", why);
  } else if (held < state.current && !serving) {
    // Nor does it lower the count before one serves: nothing has shown yet what they serve.
    d.reason = absl::StrCat("hold at ", next, ": ", why, "; none ready yet, the replicas ",
                            "starting are kept until one serves");
  } else if (held < state.current) {
    next = std::max(
        held,
        state.current - std::max(p.scale_down_step,
                                 static_cast<int>(std::ceil(p.scale_down_ratio * state.current))));
    if (next == 0 && !idle_long) next = 1;
    d.reason = absl::StrCat("scale down to ", next, ": ", why, "; ",
                            p.scale_down_quantile < 1
                                ? absl::StrCat("quantile ", p.scale_down_quantile, " of the last ")
                                : "highest in the last ",
                            absl::FormatDuration(p.scale_down_window), " is ", held);
  } else {
    d.reason = absl::StrCat("hold at ", next, ": ", why);
  }
  d.replicas = clamp(next);
  state.current = d.replicas;
  return d;
}

}  // namespace tessera::autoscale
