// libFuzzer target: the trace readers behind `tessera trace-bench` and `tessera sim autoscale`
// (Alibaba openb nodes and pods, Azure LLM, ServeGen, a Prometheus query_range body) return
// rows or a Status for any input, never crash or hang, and what they accept keeps the
// promises their callers rely on: finite, non-negative numbers; arrivals and windows in time
// order; at least one row; pods that ask for none, a share of one GPU, or whole GPUs.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "adapters/trace/llm_traces.h"
#include "adapters/trace/openb_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::adapters;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto bad = [](double x) { return !std::isfinite(x) || x < 0; };

  if (absl::StatusOr<std::vector<LlmRequestRow>> rows = ParseAzureLlmTrace("f.csv", text);
      rows.ok()) {
    if (rows->empty()) __builtin_trap();
    double last = 0;
    for (const LlmRequestRow& r : *rows) {
      if (bad(r.arrival_s) || r.arrival_s < last) __builtin_trap();
      if (r.context_tokens < 0 || r.generated_tokens < 0) __builtin_trap();
      last = r.arrival_s;
    }
  }
  if (absl::StatusOr<std::vector<ServeGenWindow>> w = ParseServeGenTrace("f.csv", text); w.ok()) {
    if (w->empty()) __builtin_trap();
    for (size_t i = 0; i < w->size(); ++i) {
      const ServeGenWindow& x = (*w)[i];
      if (bad(x.start_s) || bad(x.rate) || bad(x.cv) || bad(x.p1) || bad(x.p2)) __builtin_trap();
      if (i > 0 && x.start_s <= (*w)[i - 1].start_s) __builtin_trap();
      if (x.rate > 0 && (x.p1 <= 0 || x.p2 <= 0)) __builtin_trap();
    }
  }
  if (absl::StatusOr<std::vector<RateStep>> r = ParsePromRangeRate("f.json", text); r.ok()) {
    if (r->empty()) __builtin_trap();
    for (size_t i = 0; i < r->size(); ++i) {
      const RateStep& x = (*r)[i];
      if (bad(x.start_s) || bad(x.rate) || !(x.length_s > 0) || !std::isfinite(x.length_s)) {
        __builtin_trap();
      }
      if (i > 0 && x.start_s <= (*r)[i - 1].start_s) __builtin_trap();
    }
  }
  if (auto nodes = ParseOpenbNodes("n.csv", text); nodes.ok()) {
    for (const auto& n : *nodes) {
      if (n.cpu_milli < 0 || n.memory_mib < 0 || n.gpus < 0 || n.gpus > 64) __builtin_trap();
      if (n.gpus > 0 && n.model.empty()) __builtin_trap();
    }
  }
  if (auto pods = ParseOpenbPods("p.csv", text); pods.ok()) {
    for (const auto& p : *pods) {
      if (p.cpu_milli < 0 || p.memory_mib < 0 || p.num_gpu < 0 || p.gpu_milli < 0) {
        __builtin_trap();
      }
      // None, a share of one GPU, or whole GPUs: what the scheduler's state assumes.
      if ((p.num_gpu == 0) != (p.gpu_milli == 0) || p.gpu_milli > 1000 ||
          (p.num_gpu > 1 && p.gpu_milli != 1000)) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
