// `tessera trace-bench`: replays Alibaba's GPU-sharing trace through the online scheduler's
// policies with the FGD benchmark protocol and reports allocation and fragmentation curves.
#pragma once

#include <string>

namespace tessera::cmd {

struct TraceBenchFlags {
  std::string nodes_file;
  std::string pods_file;
  std::string policies = "fgd,bestfit";
  std::string seeds = "42-51";
  double inflate = 1.3;
  std::string json_file;       // empty: no JSON
  std::string ties = "first";  // "first" (first node in the per-seed order) or "random"
  bool explain = false;        // also print where the unallocated GPUs are at 100% arrived
  std::string baseline;        // non-empty: also print each policy against it, paired by seed
  // Also print, per arrival level, the most any placement of the arrived pods could allocate
  // (sim::BoundTraceBench, mean over the seeds).
  bool bound = false;
};

// Exit status: 0 success; 1 bad input or I/O error.
int RunTraceBench(const TraceBenchFlags& flags);

}  // namespace tessera::cmd
