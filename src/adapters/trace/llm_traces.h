// Readers of the LLM-serving arrival traces used by `tessera sim autoscale`:
//   azure:    Azure LLM inference traces 2023 and 2024 (TIMESTAMP,ContextTokens,GeneratedTokens;
//             one row per request, sorted; timestamps "YYYY-MM-DD HH:MM:SS[.fraction]" in UTC or
//             with an offset "+HH:MM", as the 2024 one-week files write them)
//   servegen: Alibaba ServeGen per-client windows (no header: window start s, mean rate req/s,
//             CV, distribution Gamma|Weibull|"", two parameters)
//   prom-range: the JSON body of Prometheus' /api/v1/query_range for one request-rate series
//             (a service's own traffic, e.g. sum(rate(vllm:request_success_total[1m])))
// CRLF or LF line ends. Errors name the file, line and column and say what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::adapters {

struct LlmRequestRow {
  double arrival_s = 0;  // seconds since the first request
  int64_t context_tokens = 0;
  int64_t generated_tokens = 0;
};
absl::StatusOr<std::vector<LlmRequestRow>> ParseAzureLlmTrace(const std::string& file,
                                                              const std::string& text);

struct ServeGenWindow {
  double start_s = 0;
  double rate = 0;  // requests per second
  double cv = 0;
  std::string distribution;  // "Gamma", "Weibull" or "" when rate is 0
  double p1 = 0, p2 = 0;     // Gamma: shape, scale (s); Weibull: shape, scale (s)
};
absl::StatusOr<std::vector<ServeGenWindow>> ParseServeGenTrace(const std::string& file,
                                                               const std::string& text);

// A service's request rate over time from Prometheus: the JSON body of
// /api/v1/query_range?query=Q&start=..&end=..&step=S where Q gives one series in requests per
// second. One window per sample, [t, t + S) at its rate, S being the samples' smallest spacing
// (the query's step); a step with no sample (the series absent: nothing served) is rate 0.
// Times are seconds since the first sample. Errors name the file, line and column and the
// field (data.result[0].values[i]).
struct RateStep {
  double start_s = 0;
  double length_s = 0;
  double rate = 0;  // requests per second
};
absl::StatusOr<std::vector<RateStep>> ParsePromRangeRate(const std::string& file,
                                                         const std::string& text);

}  // namespace tessera::adapters
