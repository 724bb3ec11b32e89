// The hot paths of `tessera sim autoscale` and of the scaler's history rebuild:
// - loading an Azure trace (ReadFile, then ParseAzureLlmTrace): a one-week 2024 file holds tens of
//   millions of rows, and every invocation loads it before its first run;
// - one simulated run of the tessera policy (a sweep or --recommend runs dozens);
// - one DecideReplicas call with the seasonal rule on (a poll per service, and a replay of 72 h
//   at 5 s steps, 51,876 calls, per service on a scaler's start).
// Inputs are synthesised with a fixed seed: the same work on every run.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "adapters/io/files.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/trace/llm_traces.h"
#include "autoscale/policy.h"
#include "base/random.h"
#include "benchmark/benchmark.h"
#include "sim/autoscale_sim.h"

namespace tessera::sim {
namespace {

// `rows` requests of an Azure trace over an hour at a steady mean rate, in the 2023 release's
// timestamp form (7 fractional digits, no offset) or the 2024 one's (6 digits and "+00:00").
std::string AzureTraceText(int rows, bool form_2024) {
  Random rng(7);
  std::string out = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  out.reserve(static_cast<size_t>(rows) * 48);
  const absl::Time start =
      absl::FromCivil(absl::CivilSecond(2024, 5, 10, 0, 0, 0), absl::UTCTimeZone());
  double t = 0;
  for (int i = 0; i < rows; ++i) {
    t += -std::log(1 - rng.UniformDouble()) * 3600.0 / rows;
    const absl::Time at = start + absl::Microseconds(static_cast<int64_t>(t * 1e6));
    absl::StrAppend(
        &out,
        absl::FormatTime(form_2024 ? "%Y-%m-%d %H:%M:%E6S+00:00" : "%Y-%m-%d %H:%M:%E7S", at,
                         absl::UTCTimeZone()),
        ",", rng.UniformInt(50, 8000), ",", rng.UniformInt(1, 600), "\n");
  }
  return out;
}

void BM_ParseAzureLlmTrace(benchmark::State& state) {
  const int rows = 200000;
  const std::string text = AzureTraceText(rows, state.range(0) == 1);
  for (auto _ : state) {
    auto parsed = adapters::ParseAzureLlmTrace("bench.csv", text);
    if (!parsed.ok() || parsed->size() != static_cast<size_t>(rows)) {
      state.SkipWithError("the trace did not parse");
      return;
    }
    benchmark::DoNotOptimize(parsed->back().arrival_s);
  }
  state.SetItemsProcessed(state.iterations() * rows);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParseAzureLlmTrace)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// A 64 MiB file read whole, as every trace and config is.
void BM_ReadFile(benchmark::State& state) {
  adapters::testing::ScratchDir dir("bench-read");
  const std::string path = dir.path() + "/trace.csv";
  const std::string text = AzureTraceText(1400000, true);
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  for (auto _ : state) {
    absl::StatusOr<std::string> read = adapters::ReadFile(path);
    if (!read.ok() || read->size() != text.size()) {
      state.SkipWithError("the file did not read back");
      return;
    }
    benchmark::DoNotOptimize(read->data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ReadFile)->Unit(benchmark::kMillisecond);

// An hour of bursty load, about 5 busy replicas and bursts of a minute at 4 times the mean every
// 10 minutes, through the tessera policy at its defaults with a 60 s cold start.
void BM_SimulateTessera(benchmark::State& state) {
  Random rng(11);
  std::vector<TokenRow> rows;
  ServingModel model;
  const double mean_rate = 5.0 / model.Work(2000, 200);  // requests per second
  for (double t = 0; t < 3600;) {
    const bool burst = std::fmod(t, 600) < 60;
    t += -std::log(1 - rng.UniformDouble()) / (mean_rate * (burst ? 4 : 0.7));
    rows.push_back({t, rng.UniformInt(200, 3800), rng.UniformInt(20, 380)});
  }
  const std::vector<SimRequest> requests = ScaleRequests(rows, model, 1, 1);
  PolicySpec spec;
  spec.kind = "tessera";
  SimOptions options;
  for (auto _ : state) {
    SimResult r = Simulate(requests, model, options, spec);
    benchmark::DoNotOptimize(r.gpu_hours);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(requests.size()));
  state.counters["requests"] = static_cast<double>(requests.size());
}
BENCHMARK(BM_SimulateTessera)->Unit(benchmark::kMillisecond);

// DecideReplicas every 5 s over a day of a load that rises and falls each hour, the defaults'
// seasonal rule (hourly and daily periods, three repeats) on: the scaler's poll, and what its
// start replays per service.
void BM_DecideReplicas(benchmark::State& state) {
  autoscale::AutoscalePolicy policy;
  autoscale::AutoscaleState st;
  absl::Time now = absl::FromUnixSeconds(1764700000);
  int64_t step = 0;
  for (auto _ : state) {
    const double phase = static_cast<double>(step % 720) / 720.0;
    const double load = 10 + 8 * std::sin(2 * M_PI * phase);
    autoscale::Signals s;
    s.ready = autoscale::Sample::At(std::ceil(load / 0.75), now);
    s.running = autoscale::Sample::At(load * 16, now);
    s.waiting = autoscale::Sample::At(phase < 0.1 ? 20 : 0, now);
    s.utilization = autoscale::Sample::At(std::min(1.0, load / s.ready.value), now);
    autoscale::Decision d = autoscale::DecideReplicas(policy, s, st, now);
    benchmark::DoNotOptimize(d.replicas);
    now += absl::Seconds(5);
    ++step;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecideReplicas);

}  // namespace
}  // namespace tessera::sim
