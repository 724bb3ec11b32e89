#include "cmd/sim_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "adapters/io/files.h"
#include "adapters/k8s/yaml_reader.h"
#include "adapters/keda/scaler_config.h"
#include "adapters/trace/llm_traces.h"
#include "base/memory.h"
#include "base/status.h"
#include "nlohmann/json.hpp"
#include "sim/autoscale_sim.h"

namespace tessera::cmd {
namespace {

int Fail(const std::string& message) {
  std::cerr << "tessera sim autoscale: " << message << "\n";
  return 1;
}

// `text` as a fraction above 0 and at most 1 into `*out`; "" leaves `*out` as it is.
bool Fraction(const std::string& flag, const std::string& text, const char* example, double* out,
              std::string* error) {
  if (text.empty()) return true;
  if (!absl::SimpleAtod(text, out) || !(*out > 0 && *out <= 1)) {
    *error = absl::StrCat(flag, " ", text, ": expected a fraction above 0 and at most 1", example);
    return false;
  }
  return true;
}

bool Duration(const std::string& flag, const std::string& text, absl::Duration* out,
              std::string* error) {
  if (!absl::ParseDuration(text, out) || *out < absl::ZeroDuration()) {
    *error = absl::StrCat(flag, " ", text, ": expected a duration such as 60s, 2m or 1h30m");
    return false;
  }
  return true;
}

// The warm baselines every dynamic policy is also swept over (its main knob at its default): a
// service's floor of replicas is the other knob its owner sets, and --sweep gives each policy the
// same floors so that no frontier gains from one the others lack.
// A floor of one is the warm baseline of a latency-critical service that must not meet a cold
// start; HPA's own minimum. (hpa-cpu's main knob already runs at its floor of one.)
constexpr int kSweptFloors[] = {1, 2, 4, 8, 16, 24, 32};
constexpr int kSweptStatic[] = {1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 32, 40};
// --recommend's second stage: the scale-down windows and quantiles tried around the point the
// grid chose (every grid point holds as the base knobs do).
constexpr absl::Duration kRefinedWindows[] = {absl::Minutes(5), absl::Minutes(10),
                                              absl::Minutes(20), absl::Minutes(30)};
constexpr double kRefinedQuantiles[] = {1, 0.9, 0.85};
// Both grids go on with these until they reach 8 times the trace's mean busy replicas (the Azure
// traces' bursts reach about 6 times their mean): a service that needs 100 replicas gets floors
// and static counts of its size, one that needs 5 the grids above.
constexpr int kSweptLarger[] = {48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512};

// `grid`, then kSweptLarger's counts until one reaches `reach`, none above `ceiling`.
std::vector<int> Counts(absl::Span<const int> grid, double reach, int ceiling) {
  std::vector<int> out;
  for (int n : grid) {
    if (n <= ceiling) out.push_back(n);
  }
  for (int n : kSweptLarger) {
    // (A ceiling that dropped some of `grid` is below every larger count too.)
    if (n > ceiling || (!out.empty() && out.back() >= reach)) break;
    out.push_back(n);
  }
  return out;
}

// Each policy's main knob, then (dynamic policies) its floor, for --sweep. `mean_busy`: the
// trace's mean busy replicas, which sizes the floors and static counts.
std::vector<sim::PolicySpec> Grid(const sim::PolicySpec& base, bool sweep, double mean_busy,
                                  int ceiling) {
  if (!sweep) return {base};
  std::vector<sim::PolicySpec> out;
  const double reach = 8 * mean_busy;
  auto floors = [&] {
    for (int n : Counts(kSweptFloors, reach, ceiling)) {
      // A floor above a configured ceiling is not a configuration the scaler would accept.
      if (base.kind == "tessera" && n > base.tessera.max_replicas) continue;
      if (base.kind == "hpa-cpu" && n <= 1) continue;  // its main knob's runs
      sim::PolicySpec s = base;
      s.min_replicas = n;
      s.tessera.min_replicas = n;
      out.push_back(s);
    }
  };
  if (base.kind == "tessera") {
    // Its two main knobs, each from the defaults: the utilisation target, then the queue target.
    for (double u : {0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95}) {
      sim::PolicySpec s = base;
      s.tessera.target_utilization = u;
      s.tessera.utilization_band = std::min(s.tessera.utilization_band, u / 2);
      out.push_back(s);
    }
    for (double q : {1.0, 16.0, 32.0, 64.0, 128.0, 256.0}) {
      sim::PolicySpec s = base;
      s.tessera.target_queue_per_replica = q;
      out.push_back(s);
    }
    floors();
  } else if (base.kind == "keda-queue") {
    for (double q : {0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0}) {
      sim::PolicySpec s = base;
      s.keda_target_queue = q;
      out.push_back(s);
    }
    floors();
  } else if (base.kind == "clairvoyant") {
    // Perfect foresight at every planned utilisation (above 1: fewer replicas than the window's
    // mean work, leaning on the batch and the SLO's wait), over short to long averaging windows
    // (a longer one lets a burst's requests wait longer for capacity).
    for (double w : {2.0, 5.0, 10.0, 20.0, 30.0}) {
      for (double u : {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 2.0, 3.0}) {
        sim::PolicySpec s = base;
        s.clairvoyant_utilization = u;
        s.clairvoyant_window_s = w;
        out.push_back(s);
      }
    }
  } else if (base.kind == "fixed") {
    for (int n : Counts(kSweptStatic, reach, ceiling)) {
      sim::PolicySpec s = base;
      s.min_replicas = n;
      out.push_back(s);
    }
  } else {
    for (double c : {0.0125, 0.0135, 0.015, 0.0175, 0.02, 0.03, 0.05, 0.1, 0.7}) {
      sim::PolicySpec s = base;
      s.hpa_cpu_target = c;
      out.push_back(s);
    }
    floors();
  }
  return out;
}

// "20m for 30m, 2h for 5m", for the header.
std::string Spans(const std::vector<sim::Outage>& outages) {
  std::vector<std::string> spans;
  spans.reserve(outages.size());
  for (const sim::Outage& o : outages) {
    spans.push_back(absl::StrCat(absl::FormatDuration(absl::Seconds(o.start_s)), " for ",
                                 absl::FormatDuration(absl::Seconds(o.length_s))));
  }
  return absl::StrJoin(spans, ", ");
}

std::string ParamText(const sim::SimResult& r) {
  if (r.policy == "tessera") {
    std::string text =
        absl::StrFormat("util=%g queue/replica=%g min=%g", r.params.at("target_utilization"),
                        r.params.at("target_queue_per_replica"), r.params.at("min_replicas"));
    // The scale-down hold, where it is not the policy's default (--recommend tries others).
    const autoscale::AutoscalePolicy defaults;
    const double window_s = r.params.at("scale_down_window_s");
    const double quantile = r.params.at("scale_down_quantile");
    if (window_s != absl::ToDoubleSeconds(defaults.scale_down_window) ||
        quantile != defaults.scale_down_quantile) {
      absl::StrAppend(&text,
                      " down=", absl::FormatDuration(absl::Seconds(static_cast<int64_t>(window_s))),
                      "@", quantile);
    }
    return text;
  }
  if (r.policy == "clairvoyant") {
    return absl::StrFormat("util=%g window=%gs", r.params.at("target_utilization"),
                           r.params.at("window_s"));
  }
  std::string text;
  const std::pair<const char*, const char*> shown[] = {
      {"target_queue_per_replica", "queue/replica"},
      {"target_cpu_utilization", "cpu"},
      {"replicas", "replicas"},
      {"min_replicas", "min"}};
  for (const auto& [key, label] : shown) {
    auto it = r.params.find(key);
    if (it != r.params.end()) {
      absl::StrAppend(&text, text.empty() ? "" : " ", label, absl::StrFormat("=%g", it->second));
    }
  }
  return text;
}

// A run's figures as the JSON's "runs" hold them.
nlohmann::json RunJson(const sim::SimResult& r) {
  return {{"policy", r.policy},           {"params", r.params},
          {"gpu_hours", r.gpu_hours},     {"busy_gpu_hours", r.busy_gpu_hours},
          {"utilization", r.utilization}, {"slo_attainment", r.slo_attainment},
          {"p50_wait_s", r.p50_wait_s},   {"p99_wait_s", r.p99_wait_s},
          {"requests", r.requests},       {"over_60s", r.over_60s},
          {"cold_starts", r.cold_starts}};
}

// For --recommend, among candidates[from, to) (each a spec and its index into `results`): the
// position of the cheapest run reaching `target` (ties: the higher attainment), and of the highest
// attainment; nullopt where there is none.
struct Choice {
  std::optional<size_t> cheapest;
  std::optional<size_t> highest;
};
Choice Choose(const std::vector<sim::SimResult>& results,
              const std::vector<std::pair<sim::PolicySpec, size_t>>& candidates, size_t from,
              size_t to, double target) {
  Choice c;
  for (size_t k = from; k < to; ++k) {
    const sim::SimResult& r = results[candidates[k].second];
    if (!c.highest || r.slo_attainment > results[candidates[*c.highest].second].slo_attainment) {
      c.highest = k;
    }
    if (r.slo_attainment < target) continue;
    const sim::SimResult* best = c.cheapest ? &results[candidates[*c.cheapest].second] : nullptr;
    if (best == nullptr || r.gpu_hours < best->gpu_hours ||
        (r.gpu_hours == best->gpu_hours && r.slo_attainment > best->slo_attainment)) {
      c.cheapest = k;
    }
  }
  return c;
}

std::string Figures(const sim::SimResult& r) {
  return absl::StrFormat("%.2f GPU-hours, %.1f%% utilisation, %.2f%% SLO", r.gpu_hours,
                         100 * r.utilization, 100 * r.slo_attainment);
}

// The knobs --recommend chooses, as ScalerConfig fields: each name and its value as written there
// ("0.95", "5m"; %g keeps 6 digits, which every grid value fits).
std::vector<std::pair<std::string, std::string>> ChosenKnobs(const autoscale::AutoscalePolicy& p) {
  auto number = [](double v) { return absl::StrFormat("%g", v); };
  return {{"targetUtilization", number(p.target_utilization)},
          {"utilizationBand", number(p.utilization_band)},
          {"targetQueuePerReplica", number(p.target_queue_per_replica)},
          {"minReplicas", absl::StrCat(p.min_replicas)},
          {"scaleDownWindow", absl::FormatDuration(p.scale_down_window)},
          {"scaleDownQuantile", number(p.scale_down_quantile)}};
}

// --write-config: the --config file's `text` with the knobs --recommend chooses (`chosen`) set on
// service `index` where they differ from its own (`was`), and what changed ("targetUtilization
// 0.75 -> 0.95"). The edited text is decoded again and must give the service `chosen`'s knobs.
absl::StatusOr<std::pair<std::string, std::vector<std::string>>> ConfigWithKnobs(
    const std::string& file, const std::string& text, size_t index,
    const autoscale::AutoscalePolicy& was, const autoscale::AutoscalePolicy& chosen) {
  const std::vector<std::pair<std::string, std::string>> before = ChosenKnobs(was);
  const std::vector<std::pair<std::string, std::string>> after = ChosenKnobs(chosen);
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> changes;
  for (size_t i = 0; i < after.size(); ++i) {
    if (before[i].second == after[i].second) continue;
    values.push_back(after[i]);
    changes.push_back(absl::StrCat(after[i].first, " ", before[i].second, " -> ", after[i].second));
  }
  TESSERA_ASSIGN_OR_RETURN(std::string edited,
                           adapters::SetListItemScalars(file, text, "services", index, values));
  absl::StatusOr<adapters::ScalerConfig> check = adapters::DecodeScalerConfig(file, edited);
  if (!check.ok()) {
    return absl::InternalError(
        absl::StrCat("the edited config does not decode: ", check.status().message()));
  }
  if (ChosenKnobs(check->services.at(index).policy) != after) {
    return absl::InternalError(
        "the edited config does not give the service the knobs chosen (an entry the edit did not "
        "reach?)");
  }
  return std::make_pair(std::move(edited), std::move(changes));
}

}  // namespace

int RunSimAutoscale(const SimAutoscaleFlags& f) {
  std::string error;
  absl::Duration cold_start, slo_wait, idle_timeout, down_window, warmup,
      duration = absl::InfiniteDuration();
  if (!Duration("--cold-start", f.cold_start, &cold_start, &error) ||
      !Duration("--warmup", f.warmup, &warmup, &error) ||
      !Duration("--slo-wait", f.slo_wait, &slo_wait, &error) ||
      !Duration("--idle-timeout", f.idle_timeout.empty() ? "10m" : f.idle_timeout, &idle_timeout,
                &error) ||
      !Duration("--scale-down-window", f.scale_down_window.empty() ? "10m" : f.scale_down_window,
                &down_window, &error) ||
      (!f.duration.empty() && !Duration("--duration", f.duration, &duration, &error))) {
    return Fail(error);
  }
  if (duration <= absl::ZeroDuration()) {
    return Fail(absl::StrCat("--duration ", f.duration, ": expected more than 0s"));
  }
  if (f.jobs < 0) {
    return Fail(absl::StrCat("--jobs ", f.jobs, ": expected 0 (one per hardware thread) or more"));
  }
  const int jobs =
      f.jobs > 0 ? f.jobs : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  if (const int most = sim::SimOptions().max_replicas;
      f.min_replicas < 0 || f.min_replicas > most) {
    return Fail(absl::StrCat("--min-replicas ", f.min_replicas, ": expected 0 to ", most,
                             " (the simulator's most replicas)"));
  }
  double down_quantile = 1;
  double recommend = 0;  // 0: no recommendation asked for
  if (!Fraction("--scale-down-quantile", f.scale_down_quantile, "", &down_quantile, &error) ||
      !Fraction("--recommend", f.recommend, " (0.99: 99% of requests wait at most --slo-wait)",
                &recommend, &error)) {
    return Fail(error);
  }
  if (recommend > 0) {
    const std::vector<std::string> names = absl::StrSplit(f.policies, ',', absl::SkipEmpty());
    if (std::find(names.begin(), names.end(), "tessera") == names.end()) {
      return Fail(absl::StrCat("--recommend: needs tessera in --policy (", f.policies,
                               "): it chooses tessera's knobs"));
    }
  }
  absl::Duration holdout = absl::ZeroDuration();  // 0: choose and measure on the whole replay
  if (!f.holdout.empty()) {
    if (recommend == 0) {
      return Fail("--holdout: needs --recommend (the held-out part measures the knobs it chooses)");
    }
    if (!Duration("--holdout", f.holdout, &holdout, &error)) return Fail(error);
    if (holdout <= absl::ZeroDuration()) {
      return Fail(absl::StrCat("--holdout ", f.holdout, ": expected more than 0s"));
    }
  }
  std::optional<std::vector<absl::Duration>> seasonal_periods;  // unset: the defaults
  if (!f.seasonal_periods.empty()) {
    seasonal_periods.emplace();
    if (f.seasonal_periods != "none") {
      for (absl::string_view part : absl::StrSplit(f.seasonal_periods, ',')) {
        absl::Duration d;
        if (!Duration("--seasonal-periods", std::string(part), &d, &error)) return Fail(error);
        seasonal_periods->push_back(d);
      }
    }
  }
  absl::Duration restarts = absl::ZeroDuration();  // 0: the scaler never restarts
  if (!f.scaler_restarts.empty()) {
    if (!Duration("--scaler-restarts", f.scaler_restarts, &restarts, &error)) return Fail(error);
    if (restarts < absl::Minutes(1)) {
      return Fail(absl::StrCat("--scaler-restarts ", f.scaler_restarts,
                               ": expected at least 1m (how often the scaler restarts)"));
    }
  }
  std::vector<sim::Outage> outages;
  if (!f.outages.empty()) {
    absl::StatusOr<std::vector<sim::Outage>> parsed = sim::ParseOutages(f.outages);
    if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
    outages = *std::move(parsed);
  }
  std::vector<sim::Outage> scaler_outages;
  if (!f.scaler_outages.empty()) {
    absl::StatusOr<std::vector<sim::Outage>> parsed =
        sim::ParseOutages(f.scaler_outages, "--scaler-outage");
    if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
    scaler_outages = *std::move(parsed);
  }
  sim::KedaFallback fallback;
  if (!f.keda_fallback.empty()) {
    if (outages.empty()) {
      return Fail("--keda-fallback: needs --outage (the fallback applies only while reads fail)");
    }
    absl::StatusOr<sim::KedaFallback> parsed = sim::KedaFallback::Parse(f.keda_fallback);
    if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
    fallback = *parsed;
  }
  if (!f.scaler_backfill.empty() && f.scaler_backfill != "on" && f.scaler_backfill != "off") {
    return Fail(absl::StrCat("--scaler-backfill ", f.scaler_backfill, ": expected on or off"));
  }
  // Waiting requests enter a batch at the end of a fluid step: a bound below one measures the
  // step, not the policy.
  const absl::Duration step = absl::Seconds(sim::SimOptions().dt_s);
  if (slo_wait < step) {
    return Fail(absl::StrCat("--slo-wait ", f.slo_wait, ": expected at least ",
                             absl::FormatDuration(step), " (the simulator admits requests every ",
                             absl::FormatDuration(step), " step)"));
  }
  if (!(f.rate_scale > 0 && f.rate_scale <= 1000)) {
    return Fail("--rate-scale: expected a number above 0 and at most 1000");
  }
  if (!(f.hpa_tolerance >= 0 && f.hpa_tolerance < 1)) {
    return Fail("--hpa-tolerance: expected a fraction of at least 0 and below 1");
  }
  if (f.rate_mode != "dense" && f.rate_mode != "independent") {
    return Fail(absl::StrCat("--rate-mode ", f.rate_mode, ": expected dense or independent"));
  }
  const bool independent = f.rate_mode == "independent";
  if (!f.json_file.empty()) {
    if (absl::Status s = adapters::CheckWritable(f.json_file); !s.ok()) {
      return Fail(absl::StrCat("--json: ", s.message()));
    }
  }
  if (!f.write_config.empty()) {
    if (recommend == 0 || f.config_file.empty()) {
      return Fail(
          "--write-config: needs --recommend and --config (it writes the config with the knobs "
          "chosen for its service)");
    }
    if (absl::Status s = adapters::CheckWritable(f.write_config); !s.ok()) {
      return Fail(absl::StrCat("--write-config: ", s.message()));
    }
  }
  // tessera's knobs from a service of a scaler config: the same policy the scaler would run.
  std::optional<adapters::ServiceConfig> configured;
  std::string config_text;                     // --config as read, for --write-config
  size_t configured_index = 0;                 // its service's place in `services`
  bool backfill = f.scaler_backfill != "off";  // with --config, its prometheus.backfill
  absl::Duration poll = absl::ZeroDuration();  // 0: tessera decides once per HPA sync
  if (!f.poll_interval.empty()) {
    if (!Duration("--poll-interval", f.poll_interval, &poll, &error)) return Fail(error);
    if (poll < absl::Milliseconds(100)) {
      return Fail(absl::StrCat("--poll-interval ", f.poll_interval,
                               ": expected at least 100ms (as the scaler's pollInterval)"));
    }
  }
  if (!f.config_file.empty()) {
    const std::tuple<const char*, const std::string*, const char*> tessera_flags[] = {
        {"--idle-timeout", &f.idle_timeout, "idleTimeout"},
        {"--scale-down-window", &f.scale_down_window, "scaleDownWindow"},
        {"--scale-down-quantile", &f.scale_down_quantile, "scaleDownQuantile"},
        {"--seasonal-periods", &f.seasonal_periods, "seasonalPeriods"},
        {"--poll-interval", &f.poll_interval, "prometheus.pollInterval"},
        {"--scaler-backfill", &f.scaler_backfill, "prometheus.backfill"}};
    for (const auto& [flag, value, knob] : tessera_flags) {
      if (!value->empty()) {
        return Fail(absl::StrCat(flag, " with --config: tessera's knobs come from the config (set ",
                                 knob, " there)"));
      }
    }
    absl::StatusOr<std::string> text = adapters::ReadFile(f.config_file);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    config_text = *std::move(text);
    absl::StatusOr<adapters::ScalerConfig> config =
        adapters::DecodeScalerConfig(f.config_file, config_text);
    if (!config.ok()) return Fail(std::string(config.status().message()));
    if (f.service.empty() && config->services.size() != 1) {
      return Fail(absl::StrCat("--config ", f.config_file, " has ", config->services.size(),
                               " services (", config->ServiceNames(),
                               "): choose one with --service"));
    }
    const adapters::ServiceConfig* service =
        f.service.empty() ? &config->services.front() : config->Find(f.service);
    if (service == nullptr) {
      return Fail(absl::StrCat("--service ", f.service, ": not in ", f.config_file,
                               " (its services: ", config->ServiceNames(), ")"));
    }
    configured = *service;
    configured_index = static_cast<size_t>(service - config->services.data());
    poll = config->poll_interval;
    backfill = config->backfill;
  } else if (!f.service.empty()) {
    return Fail("--service: needs --config (the scaler config the service is read from)");
  }
  if (independent && f.format != "azure") {
    return Fail(
        absl::StrCat("--rate-mode ", f.rate_mode,
                     ": applies to --format azure only (servegen and prom-range arrivals are "
                     "synthesised at K times each window's rate)"));
  }
  absl::StatusOr<std::string> text = adapters::ReadFile(f.trace);
  if (!text.ok()) return Fail(std::string(text.status().message()));

  sim::ServingModel model;
  std::vector<sim::SimRequest> requests;
  double horizon = absl::ToDoubleSeconds(duration);
  // Where the trace ends, when it says (its windows do, and --duration; an Azure trace otherwise
  // ends at its last arrival).
  double trace_end = 0;
  // The replay holds every request in memory (about 130 bytes each, measured: docs/
  // autoscaling.md), so a trace and scale beyond 100 million requests (about 13 GB) are refused
  // before synthesis rather than killed minutes into it. `peak` says where most come from.
  constexpr double kMaxRequests = 1e8;
  auto too_many = [&](double expected, const std::string& peak) -> std::optional<int> {
    if (expected <= kMaxRequests) return std::nullopt;
    return Fail(absl::StrFormat(
        "--trace %s: the replay would hold about %.3g requests (%s x --rate-scale %g), more "
        "than the simulator's %.0f; replay less of it (--duration) or at a lower --rate-scale",
        f.trace, expected, peak, f.rate_scale, kMaxRequests));
  };
  // Expected arrivals of rate windows, and the window with the most.
  auto windows_expected = [&](const std::vector<sim::RateWindow>& w, auto describe) {
    double total = 0, most = -1;
    std::string peak;
    for (size_t i = 0; i < w.size(); ++i) {
      double n = w[i].rate * w[i].length_s * f.rate_scale;
      total += n;
      if (n > most) {
        most = n;
        peak = describe(i);
      }
    }
    return std::pair{total, peak};
  };
  if (f.format == "azure") {
    auto rows = adapters::ParseAzureLlmTrace(f.trace, *text);
    if (!rows.ok()) return Fail(std::string(rows.status().message()));
    *text = std::string();  // parsed: hundreds of MB for a one-week file, not kept for the runs
    std::vector<sim::TokenRow> tr;
    ReserveLarge(tr, rows->size());
    for (const adapters::LlmRequestRow& r : *rows) {
      if (r.arrival_s < horizon) tr.push_back({r.arrival_s, r.context_tokens, r.generated_tokens});
    }
    // Cut by --duration, the trace ends at the cut; otherwise at its last arrival.
    if (!rows->empty() && rows->back().arrival_s >= horizon) trace_end = horizon;
    *rows = std::vector<adapters::LlmRequestRow>();
    if (auto failed = too_many(static_cast<double>(tr.size()) * f.rate_scale,
                               absl::StrCat(tr.size(), " rows"))) {
      return *failed;
    }
    requests =
        sim::ScaleRequests(tr, model, f.rate_scale, f.seed,
                           independent ? sim::RateMode::kIndependent : sim::RateMode::kDense);
  } else if (f.format == "servegen") {
    auto windows = adapters::ParseServeGenTrace(f.trace, *text);
    if (!windows.ok()) return Fail(std::string(windows.status().message()));
    std::vector<sim::RateWindow> w;
    for (size_t i = 0; i < windows->size(); ++i) {
      const adapters::ServeGenWindow& g = (*windows)[i];
      if (g.start_s >= horizon) break;
      double len = i + 1 < windows->size() ? (*windows)[i + 1].start_s - g.start_s : 600;
      // --duration ends the replay inside a window too, not after it.
      w.push_back(
          {g.start_s, std::min(len, horizon - g.start_s), g.rate, g.distribution, g.p1, g.p2});
    }
    auto [expected, peak] = windows_expected(w, [&](size_t i) {
      return absl::StrFormat("most from line %d: %g requests/s for %gs", i + 1, w[i].rate,
                             w[i].length_s);
    });
    if (auto failed = too_many(expected, peak)) return *failed;
    requests = sim::SynthesizeRequests(w, model, f.rate_scale, f.context_tokens, f.generated_tokens,
                                       f.seed);
    if (!w.empty()) trace_end = w.back().start_s + w.back().length_s;
  } else if (f.format == "prom-range") {
    auto steps = adapters::ParsePromRangeRate(f.trace, *text);
    if (!steps.ok()) return Fail(std::string(steps.status().message()));
    // Poisson arrivals at each step's rate (exponential gaps: Gamma with shape 1).
    std::vector<sim::RateWindow> w;
    for (const adapters::RateStep& st : *steps) {
      if (st.start_s >= horizon) break;
      w.push_back(
          {st.start_s, std::min(st.length_s, horizon - st.start_s), st.rate, "Gamma", 1.0, 1.0});
    }
    auto [expected, peak] = windows_expected(w, [&](size_t i) {
      return absl::StrFormat("most from data.result[0].values[%d]: %g requests/s for %gs", i,
                             w[i].rate, w[i].length_s);
    });
    if (auto failed = too_many(expected, peak)) return *failed;
    requests = sim::SynthesizeRequests(w, model, f.rate_scale, f.context_tokens, f.generated_tokens,
                                       f.seed);
    if (!w.empty()) trace_end = w.back().start_s + w.back().length_s;
  } else {
    return Fail(absl::StrCat("--format ", f.format, ": expected azure, servegen or prom-range"));
  }

  sim::SimOptions opt;
  opt.cold_start_s = absl::ToDoubleSeconds(cold_start);
  opt.slo_wait_s = absl::ToDoubleSeconds(slo_wait);
  opt.warmup_s = absl::ToDoubleSeconds(warmup);
  opt.hpa_tolerance = f.hpa_tolerance;
  opt.scaler_poll_s = absl::ToDoubleSeconds(poll);
  opt.scaler_restart_every_s = absl::ToDoubleSeconds(restarts);
  opt.scaler_backfill = backfill;
  opt.end_s = trace_end;
  opt.outages = outages;
  opt.scaler_outages = scaler_outages;
  opt.fallback = fallback;
  if (requests.empty()) {
    // An idle service is a result (what its floor of replicas costs: bench/servegen-frontiers
    // counts such clients), but its SLO attainment is that of no requests: say so.
    std::cerr << "tessera sim autoscale: warning: --trace " << f.trace << ": no request to replay"
              << (f.duration.empty() ? ""
                                     : absl::StrCat(" in its first ", f.duration, " (--duration)"))
              << " at --rate-scale " << f.rate_scale
              << ": the runs measure an idle service (GPU-hours; an SLO attainment of 100% of no "
                 "requests)\n";
  } else if (opt.warmup_s > requests.back().arrival) {
    return Fail(absl::StrCat("--warmup ", f.warmup,
                             ": leaves no request to measure (the trace's last ", "arrival is at ",
                             absl::FormatDuration(absl::Seconds(requests.back().arrival)), ")"));
  }

  // With --holdout the table and the choice are made on the replay before its last part (as a
  // replay cut there by --duration would be), and that part is measured after.
  double cut = 0;
  std::vector<sim::SimRequest> tuning;
  const std::vector<sim::SimRequest>* table_requests = &requests;
  sim::SimOptions table_opt = opt;
  if (holdout > absl::ZeroDuration()) {
    const double end = opt.end_s > 0 ? opt.end_s : requests.empty() ? 0 : requests.back().arrival;
    cut = end - absl::ToDoubleSeconds(holdout);
    if (cut <= opt.warmup_s) {
      return Fail(absl::StrCat("--holdout ", f.holdout,
                               ": leaves nothing to choose on (the replay ends at ",
                               absl::FormatDuration(absl::Seconds(end)),
                               opt.warmup_s > 0 ? absl::StrCat(", --warmup ", f.warmup) : "", ")"));
    }
    for (const sim::SimRequest& r : requests) {
      if (r.arrival < cut) tuning.push_back(r);
    }
    // As an idle service above: a result (what the floors cost), said to be one of no requests.
    if (tuning.empty() || tuning.size() == requests.size()) {
      std::cerr << "tessera sim autoscale: warning: --holdout " << f.holdout
                << ": no request arrives " << (tuning.empty() ? "before the last " : "in the last ")
                << f.holdout << " of the replay: "
                << (tuning.empty() ? "every point attains 100% of none, and the choice is the "
                                     "cheapest"
                                   : "the held-out part measures GPU-hours only")
                << "\n";
    }
    table_requests = &tuning;
    table_opt.end_s = cut;
  }
  const double mean_busy = sim::MeanBusyReplicas(*table_requests, table_opt.warmup_s);
  std::vector<sim::SimResult> results;
  // --recommend: tessera's base knobs and its swept points (index into `results`).
  sim::PolicySpec tessera_base;
  std::optional<sim::SimResult> base_result;
  std::vector<std::pair<sim::PolicySpec, size_t>> candidates;
  std::vector<sim::PolicySpec> specs;  // every policy's runs, in --policy order
  Choice grid_choice;  // among tessera's grid points (the candidates before the holds)
  int refined = 0;     // of the candidates, the window and quantile tried around the grid's choice
  int refined_rejected = 0;  // of those cheaper than the grid's choice, missing a half's target
  for (absl::string_view name : absl::StrSplit(f.policies, ',', absl::SkipEmpty())) {
    sim::PolicySpec base;
    base.kind = std::string(name);
    if (base.kind != "tessera" && base.kind != "keda-queue" && base.kind != "hpa-cpu" &&
        base.kind != "fixed" && base.kind != "clairvoyant") {
      return Fail(absl::StrCat("--policy ", name,
                               ": expected tessera, keda-queue, hpa-cpu, fixed or clairvoyant"));
    }
    base.min_replicas = f.min_replicas;
    if (configured && base.kind == "tessera") {
      // Every knob as the scaler would run it, its expected coldStart included (the simulated
      // replicas take --cold-start: the two differ when the estimate is wrong). Its floor is up
      // at the start like every policy's; its ceiling bounded by the simulator's.
      base.tessera = configured->policy;
      base.tessera.max_replicas = std::min(base.tessera.max_replicas, opt.max_replicas);
      base.tessera.min_replicas = std::min(base.tessera.min_replicas, base.tessera.max_replicas);
      base.min_replicas = base.tessera.min_replicas;
    } else {
      base.tessera.min_replicas = f.min_replicas;
      base.tessera.cold_start = cold_start;
      base.tessera.idle_timeout = idle_timeout;
      base.tessera.scale_down_window = down_window;
      base.tessera.scale_down_quantile = down_quantile;
      if (seasonal_periods) base.tessera.seasonal_periods = *seasonal_periods;
      base.tessera.max_replicas = opt.max_replicas;
    }
    if (absl::Status s = base.tessera.Validate(); !s.ok()) return Fail(std::string(s.message()));
    const bool choosing = recommend > 0 && base.kind == "tessera";
    for (const sim::PolicySpec& spec :
         Grid(base, f.sweep || choosing, mean_busy, opt.max_replicas)) {
      if (choosing) candidates.emplace_back(spec, specs.size());
      specs.push_back(spec);
    }
    if (choosing) tessera_base = base;
  }
  // Every run is independent of the others: all of them at once, on up to --jobs threads.
  results = sim::SimulateAll(*table_requests, model, table_opt, specs, jobs);
  if (!candidates.empty()) {
    // Then how long the chosen point holds a burst's replicas: the scale-down window and its
    // quantile around the cheapest point reaching the target (or the highest, when none does).
    // The grid's points all hold as the base knobs do (by default the window's highest); on a
    // load that many independent users smooth, holding less of it is cheaper, on one whose bursts
    // return within the window it is dearer (docs/autoscaling.md, "Holding a quantile of the
    // window"), so it is measured, not assumed.
    grid_choice = Choose(results, candidates, 0, candidates.size(), recommend);
    const sim::PolicySpec around =
        candidates[grid_choice.cheapest ? *grid_choice.cheapest : *grid_choice.highest].first;
    std::vector<sim::PolicySpec> holds;
    for (absl::Duration window : kRefinedWindows) {
      for (double quantile : kRefinedQuantiles) {
        sim::PolicySpec s = around;
        s.tessera.scale_down_window = window;
        s.tessera.scale_down_quantile = quantile;
        if (s.Params() != around.Params()) holds.push_back(s);
      }
    }
    std::vector<sim::SimResult> held =
        sim::SimulateAll(*table_requests, model, table_opt, holds, jobs);
    // Listed right after tessera's grid (candidates index only tessera's runs, all before it).
    const size_t at = candidates.back().second + 1;
    for (size_t k = 0; k < holds.size(); ++k) candidates.emplace_back(holds[k], at + k);
    results.insert(results.begin() + static_cast<std::ptrdiff_t>(at),
                   std::make_move_iterator(held.begin()), std::make_move_iterator(held.end()));
    refined = static_cast<int>(holds.size());
    // The base knobs are usually one of the sweep's points (the defaults are): that run, else
    // their own.
    const std::map<std::string, double> knobs = tessera_base.Params();
    for (const auto& [spec, i] : candidates) {
      if (spec.Params() == knobs) base_result = results[i];
    }
    if (!base_result) {
      base_result = sim::Simulate(*table_requests, model, table_opt, tessera_base);
    }
  }

  std::printf(
      "%s: %zu requests%s, cold start %s, SLO: queue wait <= %s%s\n", f.trace.c_str(),
      requests.size(),
      independent ? absl::StrFormat(" (%g independent copies)", f.rate_scale).c_str() : "",
      f.cold_start.c_str(), f.slo_wait.c_str(),
      opt.warmup_s > 0 ? absl::StrCat("; measured after a ", f.warmup, " warm-up").c_str() : "");
  if (cut > 0) {
    std::printf("runs below on the replay's first %s; its last %s (--holdout) measured after\n",
                absl::FormatDuration(absl::Seconds(cut)).c_str(), f.holdout.c_str());
  }
  if (configured) {
    const autoscale::AutoscalePolicy& p = configured->policy;
    std::printf(
        "tessera: service %s of %s (targetQueuePerReplica %g, targetUtilization %g +/- %g, "
        "replicas %d-%d, idleTimeout %s, scaleDownWindow %s at quantile %g, coldStart %s; "
        "deciding every %s as its pollInterval says)\n",
        configured->name.c_str(), f.config_file.c_str(), p.target_queue_per_replica,
        p.target_utilization, p.utilization_band, p.min_replicas, p.max_replicas,
        absl::FormatDuration(p.idle_timeout).c_str(),
        absl::FormatDuration(p.scale_down_window).c_str(), p.scale_down_quantile,
        absl::FormatDuration(p.cold_start).c_str(), absl::FormatDuration(poll).c_str());
  } else if (poll > absl::ZeroDuration()) {
    std::printf("tessera: deciding every %s, as a scaler polling at that interval\n",
                absl::FormatDuration(poll).c_str());
  }
  if (restarts > absl::ZeroDuration()) {
    std::printf(
        "tessera: the scaler restarts every %s, its history (recurring load, batch, window, idle "
        "clock, trend) %s\n",
        absl::FormatDuration(restarts).c_str(),
        opt.scaler_backfill ? "rebuilt from Prometheus" : "lost");
  }
  if (!outages.empty()) {
    std::printf(
        "Prometheus unreachable from %s (tessera and keda-queue read it through KEDA; KEDA's "
        "fallback: %s)\n",
        Spans(outages).c_str(), fallback.ToString().c_str());
  }
  if (!scaler_outages.empty()) {
    std::printf(
        "no tessera scaler replica reachable from %s (KEDA's fallback never applies then, "
        "kedacore/keda#8056: HPA keeps the count, nothing wakes from zero)\n",
        Spans(scaler_outages).c_str());
  }
  int params_width = 32;
  for (const sim::SimResult& r : results) {
    params_width = std::max(params_width, static_cast<int>(ParamText(r).size()));
  }
  std::printf("%-11s %-*s %9s %9s %6s %8s %7s %7s %7s %6s %5s\n", "policy", params_width, "params",
              "GPU-h", "busy GPU-h", "util", "SLO", "p50 s", "p99 s", ">60s", "cold", "peak");
  for (const sim::SimResult& r : results) {
    std::printf("%-11s %-*s %9.2f %9.2f %5.1f%% %7.2f%% %7.2f %7.2f %7lld %6lld %5d\n",
                r.policy.c_str(), params_width, ParamText(r).c_str(), r.gpu_hours, r.busy_gpu_hours,
                100 * r.utilization, 100 * r.slo_attainment, r.p50_wait_s, r.p99_wait_s,
                static_cast<long long>(r.over_60s), static_cast<long long>(r.cold_starts),
                r.peak_replicas);
  }
  if (f.sweep) {
    std::printf("\nfrontier (GPU-hours to reach an SLO attainment; '-' = never reached):\n%-11s",
                "policy");
    const double levels[] = {0.90, 0.95, 0.98, 0.99, 0.995};
    for (double l : levels) std::printf(" %8.1f%%", 100 * l);
    std::printf("\n");
    std::vector<std::string> kinds;
    for (const sim::SimResult& r : results) {
      if (std::find(kinds.begin(), kinds.end(), r.policy) == kinds.end()) kinds.push_back(r.policy);
    }
    for (const std::string& k : kinds) {
      std::printf("%-11s", k.c_str());
      for (double l : levels) {
        double best = -1;
        for (const sim::SimResult& r : results) {
          if (r.policy == k && r.slo_attainment >= l && (best < 0 || r.gpu_hours < best)) {
            best = r.gpu_hours;
          }
        }
        if (best < 0) {
          std::printf(" %9s", "-");
        } else {
          std::printf(" %9.2f", best);
        }
      }
      std::printf("\n");
    }
  }
  // --recommend: the fewest GPU-hours among tessera's points that reach the attainment asked.
  nlohmann::json recommendation;
  const sim::SimResult* best = nullptr;
  std::string write_error;  // --write-config: why the config was not written
  const sim::SimResult* highest = nullptr;
  if (recommend > 0) {
    // The grid's choice, or a hold around it that is cheaper and passes the halves' check.
    const size_t grid_points = candidates.size() - refined;
    const Choice holds_choice =
        Choose(results, candidates, grid_points, candidates.size(), recommend);
    const sim::PolicySpec* best_spec = nullptr;
    if (grid_choice.cheapest) {
      best = &results[candidates[*grid_choice.cheapest].second];
      best_spec = &candidates[*grid_choice.cheapest].first;
    }
    highest = &results[candidates[*grid_choice.highest].second];
    if (holds_choice.highest && results[candidates[*holds_choice.highest].second].slo_attainment >
                                    highest->slo_attainment) {
      highest = &results[candidates[*holds_choice.highest].second];
    }
    // A window or quantile that holds less than the grid's choice replaces it only when it also
    // reaches the target on each half of the span on its own: holding less is cheaper by
    // releasing replicas a later burst may want, and a point that reaches the target by the luck
    // of where the span's bursts fell rarely does so on both halves (measured on the Azure
    // trace's held-out parts: docs/autoscaling.md, "Choosing knobs on your own trace").
    const double span_start = table_opt.warmup_s;
    const double span_end = table_opt.end_s > 0       ? table_opt.end_s
                            : table_requests->empty() ? span_start
                                                      : table_requests->back().arrival;
    const double mid = (span_start + span_end) / 2;
    std::vector<size_t> order;  // the holds to check, cheapest first
    for (size_t k = grid_points; k < candidates.size(); ++k) {
      const sim::SimResult& r = results[candidates[k].second];
      if (r.slo_attainment >= recommend && (best == nullptr || r.gpu_hours < best->gpu_hours)) {
        order.push_back(k);
      }
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return results[candidates[a].second].gpu_hours < results[candidates[b].second].gpu_hours;
    });
    if (!order.empty()) {
      std::vector<sim::SimRequest> first_half;  // only when there is a hold to check: a copy
      for (const sim::SimRequest& r : *table_requests) {
        if (r.arrival < mid) first_half.push_back(r);
      }
      sim::SimOptions first_opt = table_opt;
      first_opt.end_s = mid;
      sim::SimOptions second_opt = table_opt;
      second_opt.warmup_s = mid;
      for (size_t k : order) {
        const sim::PolicySpec& spec = candidates[k].first;
        const sim::SimResult first = sim::Simulate(first_half, model, first_opt, spec);
        const sim::SimResult second = sim::Simulate(*table_requests, model, second_opt, spec);
        if (first.slo_attainment >= recommend && second.slo_attainment >= recommend) {
          best = &results[candidates[k].second];
          best_spec = &spec;
          break;
        }
        ++refined_rejected;
      }
    }
    std::printf(
        "\nrecommendation for >= %g%% SLO attainment (tessera's %zu swept points, then %d "
        "scale-down windows and quantiles around the cheapest%s):\n",
        100 * recommend, candidates.size() - refined, refined,
        cut > 0 ? absl::StrCat(" on the replay's first ", absl::FormatDuration(absl::Seconds(cut)))
                      .c_str()
                : "");
    if (refined_rejected > 0) {
      std::printf(
          "  (%d cheaper scale-down hold%s reached it over the span but not on each half of it: "
          "not chosen)\n",
          refined_rejected, refined_rejected == 1 ? "" : "s");
    }
    recommendation = {{"slo_target", recommend}, {"rejected_on_halves", refined_rejected},
                      {"halves_split_s", mid},   {"params", nullptr},
                      {"chosen", nullptr},       {"base", RunJson(*base_result)}};
    if (best == nullptr) {
      std::printf("  none reaches it; the highest: %s, %s; the base knobs (%s): %s\n",
                  ParamText(*highest).c_str(), Figures(*highest).c_str(),
                  ParamText(*base_result).c_str(), Figures(*base_result).c_str());
    } else {
      recommendation["params"] = best->params;
      recommendation["chosen"] = RunJson(*best);
      std::printf("  %s: %s\n  the base knobs (%s): %s\n", ParamText(*best).c_str(),
                  Figures(*best).c_str(), ParamText(*base_result).c_str(),
                  Figures(*base_result).c_str());
      if (cut > 0) {
        // The whole replay, measured from the cut on: the state at the cut is the one each set
        // of knobs built up before it, as a scaler rebuilds it from Prometheus.
        sim::SimOptions held_opt = opt;
        held_opt.warmup_s = cut;
        const bool same = best_spec->Params() == tessera_base.Params();
        std::vector<sim::PolicySpec> both = {*best_spec};
        if (!same) both.push_back(tessera_base);
        const std::vector<sim::SimResult> runs =
            sim::SimulateAll(requests, model, held_opt, both, jobs);
        const sim::SimResult& chosen = runs[0];
        const sim::SimResult& base_held = same ? runs[0] : runs[1];
        std::printf("  held out, the last %s: the choice %s; the base knobs %s\n",
                    f.holdout.c_str(), Figures(chosen).c_str(), Figures(base_held).c_str());
        recommendation["held_out"] = {
            {"from_s", cut}, {"chosen", RunJson(chosen)}, {"base", RunJson(base_held)}};
        if (chosen.slo_attainment < recommend) {
          write_error = absl::StrFormat(
              "--write-config %s: not written: the choice reaches %.2f%% on the held-out last "
              "%s, below the %g%% asked (a longer --holdout, or a replay with more of the load's "
              "variety, chooses more safely)",
              f.write_config, 100 * chosen.slo_attainment, f.holdout, 100 * recommend);
        }
      }
      const autoscale::AutoscalePolicy& p = best_spec->tessera;
      std::printf(
          "  as fields of the service in the scaler's config (kind ScalerConfig), its other "
          "knobs %s:\n",
          configured ? absl::StrCat("as in ", f.config_file).c_str() : "at their defaults");
      for (const auto& [name, value] : ChosenKnobs(p)) {
        std::printf("    %s: %s\n", name.c_str(), value.c_str());
      }
      if (!f.write_config.empty() && write_error.empty()) {
        absl::StatusOr<std::pair<std::string, std::vector<std::string>>> edited =
            ConfigWithKnobs(f.config_file, config_text, configured_index, configured->policy, p);
        absl::Status written = edited.status();
        if (written.ok()) {
          // The edit is of the text read before the runs: one changed since (by hand, by a
          // ConfigMap sync) is not overwritten.
          absl::StatusOr<std::string> now = adapters::ReadFile(f.config_file);
          written = now.ok() && *now == config_text
                        ? adapters::WriteFileAtomically(f.write_config, edited->first)
                        : absl::AbortedError(
                              absl::StrCat("not written: --config ", f.config_file,
                                           " changed while the runs were simulated (run again)"));
        }
        if (!written.ok()) {
          write_error = absl::StrCat("--write-config ", f.write_config, ": ", written.message());
        } else {
          std::printf("  wrote %s: %s, service %s: %s\n", f.write_config.c_str(),
                      f.config_file.c_str(), configured->name.c_str(),
                      edited->second.empty() ? "its knobs already the chosen ones, unchanged"
                                             : absl::StrJoin(edited->second, ", ").c_str());
          recommendation["written_config"] = f.write_config;
        }
      }
    }
  }
  if (!f.json_file.empty()) {
    nlohmann::json j;
    j["trace"] = f.trace;
    j["runs"] = nlohmann::json::array();
    for (const sim::SimResult& r : results) j["runs"].push_back(RunJson(r));
    if (recommend > 0) j["recommendation"] = recommendation;
    auto spans = [](const std::vector<sim::Outage>& list) {
      nlohmann::json out = nlohmann::json::array();
      for (const sim::Outage& o : list) {
        out.push_back({{"start_s", o.start_s}, {"length_s", o.length_s}});
      }
      return out;
    };
    if (!outages.empty()) {
      j["outages"] = spans(outages);
      j["keda_fallback"] = fallback.ToString();
    }
    if (!scaler_outages.empty()) j["scaler_outages"] = spans(scaler_outages);
    if (absl::Status s = adapters::WriteFileAtomically(f.json_file, j.dump(1) + "\n"); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  if (!write_error.empty()) return Fail(write_error);
  if (recommend > 0 && best == nullptr) {
    return Fail(absl::StrFormat(
        "--recommend %s: no point of tessera's sweep reaches %g%% (the highest: %.2f%%); the "
        "load may need more replicas than its ceiling (maxReplicas %d%s), a longer --slo-wait or "
        "a shorter --cold-start",
        f.recommend, 100 * recommend, 100 * highest->slo_attainment,
        tessera_base.tessera.max_replicas,
        tessera_base.tessera.max_replicas < opt.max_replicas
            ? absl::StrCat("; the simulator's most is ", opt.max_replicas)
            : ", the simulator's most"));
  }
  return 0;
}

}  // namespace tessera::cmd
