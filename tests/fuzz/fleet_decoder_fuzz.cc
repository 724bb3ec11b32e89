// libFuzzer target: the Fleet / kubectl node-list decoder must return a value or a Status for
// any input, never crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include "adapters/k8s/decoders.h"
#include "placement/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tessera::model::Fleet> fleet = tessera::adapters::DecodeFleet("fuzz.yaml", text);
  if (fleet.ok()) {
    // Whatever decodes must also plan (small pools only, to stay fast).
    for (const auto& p : fleet->pools) {
      if (p.max_nodes > 64 || p.gpus_per_node > 16) {
        return 0;
      }
    }
    tessera::model::WorkloadSet none;
    (void)tessera::placement::MakePlan(*fleet, none, {});
  }
  return 0;
}
