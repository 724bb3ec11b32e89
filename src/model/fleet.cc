#include "model/fleet.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::model {

std::string SourceRef::ToString() const {
  if (file.empty()) {
    return "<input>";
  }
  return line > 0 ? absl::StrCat(file, ":", line) : file;
}

const char* IsolationName(Isolation i) {
  switch (i) {
    case Isolation::kNone:
      return "none";
    case Isolation::kMemory:
      return "memory";
    case Isolation::kFull:
      return "full";
  }
  return "?";
}

bool Workload::Allows(const GpuModel& m) const {
  return allowed_models.empty() ||
         std::find(allowed_models.begin(), allowed_models.end(), &m) != allowed_models.end();
}

}  // namespace tessera::model
