#include "adapters/k8s/extender_protocol.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "adapters/io/json_text.h"
#include "adapters/k8s/decoders.h"
#include "base/status.h"
#include "base/units.h"
#include "model/gpu_catalog.h"

namespace tessera::adapters {
namespace {

using nlohmann::json;
using placement::gpushare::Assignment;
using placement::gpushare::GpuRequest;
using placement::gpushare::kGpuMilli;
using placement::gpushare::OnlineNode;

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

const char* TypeName(const json& j) { return j.type_name(); }

// Member `key` of object `j` as Go's encoding/json finds it: the exact key, else the first
// case-insensitive match. nullptr when absent or null.
const json* Member(const json& j, absl::string_view key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(std::string(key));
  if (it == j.end()) {
    for (auto i = j.begin(); i != j.end(); ++i) {
      if (absl::EqualsIgnoreCase(i.key(), key)) {
        it = i;
        break;
      }
    }
  }
  if (it == j.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

absl::StatusOr<std::string> StringAt(const json& j, absl::string_view key, const std::string& path,
                                     bool required) {
  const json* v = Member(j, key);
  if (v == nullptr) {
    if (required) {
      return Bad(absl::StrCat(path, ".", key), "required string missing");
    }
    return std::string();
  }
  if (!v->is_string()) {
    return Bad(absl::StrCat(path, ".", key),
               absl::StrCat("expected a string, found ", TypeName(*v)));
  }
  return v->get<std::string>();
}

absl::Status RequireObject(const json& j, const std::string& path) {
  if (!j.is_object()) {
    return Bad(path, absl::StrCat("expected an object, found ", TypeName(j)));
  }
  return absl::OkStatus();
}

// metadata.annotations[key] or metadata.labels[key]; "" when absent.
absl::StatusOr<std::string> MetaString(const json& obj, absl::string_view map,
                                       absl::string_view key, const std::string& path) {
  const json* meta = Member(obj, "metadata");
  if (meta == nullptr) {
    return std::string();
  }
  const json* m = Member(*meta, map);
  if (m == nullptr) {
    return std::string();
  }
  std::string at = absl::StrCat(path, ".metadata.", map);
  TESSERA_RETURN_IF_ERROR(RequireObject(*m, at));
  auto it = m->find(std::string(key));
  if (it == m->end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return Bad(absl::StrCat(at, "[\"", key, "\"]"),
               absl::StrCat("expected a string, found ", TypeName(*it)));
  }
  return it->get<std::string>();
}

// An object of strings (labels, matchLabels).
absl::StatusOr<std::map<std::string, std::string>> StringMap(const json& j,
                                                             const std::string& path) {
  TESSERA_RETURN_IF_ERROR(RequireObject(j, path));
  std::map<std::string, std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it->is_string()) {
      return Bad(absl::StrCat(path, "[\"", it.key(), "\"]"),
                 absl::StrCat("expected a string, found ", TypeName(*it)));
    }
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

// One container's resources.limits (else requests) of `resource`, a whole count; 0 when absent.
absl::StatusOr<int64_t> OneContainerResource(const json& container, absl::string_view resource,
                                             const std::string& cpath) {
  const json* res = Member(container, "resources");
  if (res == nullptr) {
    return 0;
  }
  for (const char* kind : {"limits", "requests"}) {
    const json* m = Member(*res, kind);
    if (m == nullptr || !m->contains(std::string(resource))) {
      continue;
    }
    const json& v = (*m)[std::string(resource)];
    int64_t n = 0;
    if (v.is_number_integer()) {
      n = v.get<int64_t>();
    } else if (!v.is_string() || !absl::SimpleAtoi(v.get<std::string>(), &n)) {
      return Bad(absl::StrCat(cpath, ".", kind, "[\"", resource, "\"]"),
                 absl::StrCat("expected a whole number of GPUs, found ", QuoteJson(v)));
    }
    if (n < 0 || n > 64) {
      // Quoted as sent: 2^64-1 reads as int64_t -1.
      return Bad(absl::StrCat(cpath, ".", kind, "[\"", resource, "\"]"),
                 absl::StrCat("expected 0 to 64 GPUs, found ", QuoteJson(v)));
    }
    return n;  // limits win over requests, as Kubernetes requires them equal for extended ones
  }
  return 0;
}

// The pod's effective request of `resource`, a whole count, as kube-scheduler computes it
// (kubernetes.io/docs/concepts/resource-management/effective-pod-requests-limits): the larger of
// the running phase (every app container plus every sidecar, i.e. init container with
// restartPolicy Always) and the initialisation phase (each regular init container plus the
// sidecars listed before it; a sidecar counts with those before it and itself).
absl::StatusOr<int64_t> PodEffectiveResource(const json& pod, absl::string_view resource,
                                             const std::string& path) {
  const json* spec = Member(pod, "spec");
  if (spec == nullptr) {
    return 0;
  }
  int64_t sidecars = 0;
  int64_t init_phase = 0;
  if (const json* inits = Member(*spec, "initContainers"); inits != nullptr) {
    if (!inits->is_array()) {
      return Bad(path + ".spec.initContainers",
                 absl::StrCat("expected an array, found ", TypeName(*inits)));
    }
    for (size_t i = 0; i < inits->size(); ++i) {
      std::string cpath = absl::StrCat(path, ".spec.initContainers[", i, "]");
      TESSERA_ASSIGN_OR_RETURN(int64_t n,
                               OneContainerResource((*inits)[i], resource, cpath + ".resources"));
      TESSERA_ASSIGN_OR_RETURN(std::string restart,
                               StringAt((*inits)[i], "restartPolicy", cpath, false));
      if (restart == "Always") {
        sidecars += n;
        init_phase = std::max(init_phase, sidecars);
      } else {
        init_phase = std::max(init_phase, sidecars + n);
      }
    }
  }
  int64_t running = sidecars;
  if (const json* containers = Member(*spec, "containers"); containers != nullptr) {
    if (!containers->is_array()) {
      return Bad(path + ".spec.containers",
                 absl::StrCat("expected an array, found ", TypeName(*containers)));
    }
    for (size_t i = 0; i < containers->size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(
          int64_t n,
          OneContainerResource((*containers)[i], resource,
                               absl::StrCat(path, ".spec.containers[", i, "].resources")));
      running += n;
    }
  }
  return std::max(running, init_phase);
}

absl::StatusOr<GpuRequest> DecodeRequest(const json& pod, const std::string& path) {
  GpuRequest req;
  std::string at = absl::StrCat(path, ".metadata.annotations");
  TESSERA_ASSIGN_OR_RETURN(std::string memory,
                           MetaString(pod, "annotations", kGpuMemoryAnnotation, path));
  TESSERA_ASSIGN_OR_RETURN(std::string compute,
                           MetaString(pod, "annotations", kGpuComputeAnnotation, path));
  TESSERA_ASSIGN_OR_RETURN(std::string models,
                           MetaString(pod, "annotations", kGpuModelsAnnotation, path));
  for (absl::string_view m : absl::StrSplit(models, ',', absl::SkipWhitespace())) {
    m = absl::StripAsciiWhitespace(m);
    absl::StatusOr<const model::GpuModel*> gm = model::GpuCatalog::Default().Lookup(m);
    if (!gm.ok()) {
      return Bad(absl::StrCat(at, "[\"", kGpuModelsAnnotation, "\"]"), gm.status().message());
    }
    req.models.push_back((*gm)->name);
  }
  if (!memory.empty() || !compute.empty()) {
    if (memory.empty() || compute.empty()) {
      return Bad(at, absl::StrCat("set both ", kGpuMemoryAnnotation, " and ", kGpuComputeAnnotation,
                                  " (found only one)"));
    }
    absl::StatusOr<int64_t> bytes = ParseBytes(memory);
    if (!bytes.ok() || *bytes <= 0) {
      return Bad(absl::StrCat(at, "[\"", kGpuMemoryAnnotation, "\"]"),
                 bytes.ok() ? "expected a quantity above zero" : bytes.status().message());
    }
    absl::StatusOr<int64_t> milli = ParseGpuCompute(compute);
    if (!milli.ok()) {
      return Bad(absl::StrCat(at, "[\"", kGpuComputeAnnotation, "\"]"), milli.status().message());
    }
    if (*milli >= kGpuMilli) {
      req.num_gpu = static_cast<int>(*milli / kGpuMilli);
      req.compute_milli = kGpuMilli;
      req.memory_bytes = (*bytes + req.num_gpu - 1) / req.num_gpu;
    } else {
      req.num_gpu = 1;
      req.compute_milli = *milli;
      req.memory_bytes = *bytes;
      TESSERA_ASSIGN_OR_RETURN(std::string mps,
                               MetaString(pod, "annotations", kMpsUserAnnotation, path));
      if (!mps.empty()) {
        TESSERA_ASSIGN_OR_RETURN(req.user, MpsUserOf(pod, path));
      }
    }
    return req;
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t whole, PodEffectiveResource(pod, "nvidia.com/gpu", path));
  if (whole > 0) {
    req.num_gpu = static_cast<int>(whole);
    req.compute_milli = kGpuMilli;
  }
  return req;
}

// The `items` array of a v1 list object; nullptr when absent.
absl::StatusOr<const json*> ItemsOf(const json& doc, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(RequireObject(doc, path));
  const json* items = Member(doc, "items");
  if (items != nullptr && !items->is_array()) {
    return Bad(path + ".items", absl::StrCat("expected an array, found ", TypeName(*items)));
  }
  return items;
}

// The pod's spec and its non-empty spec.containers; errors name the field under `path`.
absl::StatusOr<std::pair<const json*, const json*>> SpecAndContainers(const json& pod,
                                                                      const std::string& path) {
  TESSERA_RETURN_IF_ERROR(RequireObject(pod, path));
  const json* spec = Member(pod, "spec");
  if (spec == nullptr) {
    return Bad(path + ".spec", "required object missing");
  }
  TESSERA_RETURN_IF_ERROR(RequireObject(*spec, path + ".spec"));
  const json* containers = Member(*spec, "containers");
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    return Bad(path + ".spec.containers", "expected a non-empty array");
  }
  return std::pair{spec, containers};
}

}  // namespace

absl::StatusOr<json> ParseJson(absl::string_view body, absl::string_view what) {
  // Node objects are copied and echoed back, which recurses once per level.
  if (JsonDepth(body) > kMaxJsonDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  try {
    return json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": invalid JSON at byte ", e.byte, ": ", e.what()));
  } catch (const json::exception& e) {
    // Well-formed JSON the parser cannot represent (a number beyond a double: 1E400).
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid JSON: ", e.what()));
  }
}

absl::StatusOr<size_t> MainContainerOf(const json& pod, const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(auto spec_containers, SpecAndContainers(pod, path));
  const json* containers = spec_containers.second;
  TESSERA_ASSIGN_OR_RETURN(std::string main_name,
                           MetaString(pod, "annotations", kDefaultContainerAnnotation, path));
  size_t main = 0;
  for (size_t i = 0; i < containers->size(); ++i) {
    const json* name = Member((*containers)[i], "name");
    if (name != nullptr && name->is_string() && *name == main_name) main = i;
  }
  return main;
}

namespace {

// The user container `i` of spec.`list` runs as inside its pod (ContainerUserOf without the
// user namespace).
absl::StatusOr<std::string> UserInsideThePod(const json& pod, absl::string_view list, size_t i,
                                             const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(auto spec_containers, SpecAndContainers(pod, path));
  const json* spec = spec_containers.first;
  const json* containers = Member(*spec, list);
  if (containers == nullptr || !containers->is_array() || i >= containers->size()) {
    return Bad(absl::StrCat(path, ".spec.", list), absl::StrCat("expected a container ", i));
  }
  const std::string at = absl::StrCat(path, ".spec.", list, "[", i, "]");
  const json& c = (*containers)[i];
  TESSERA_RETURN_IF_ERROR(RequireObject(c, at));
  // The container's securityContext first, then the pod's (as the kubelet applies them).
  for (const auto& [holder, where] : {std::pair<const json*, std::string>{&c, at},
                                      std::pair<const json*, std::string>{spec, path + ".spec"}}) {
    const json* sc = Member(*holder, "securityContext");
    if (sc == nullptr || sc->is_null()) continue;
    TESSERA_RETURN_IF_ERROR(RequireObject(*sc, where + ".securityContext"));
    const json* uid = Member(*sc, "runAsUser");
    if (uid == nullptr || uid->is_null()) continue;
    if (!uid->is_number_integer() || uid->get<int64_t>() < 0) {
      return Bad(where + ".securityContext.runAsUser",
                 absl::StrCat("expected a user ID (an integer >= 0), found ", uid->dump()));
    }
    return absl::StrCat(uid->get<int64_t>());
  }
  TESSERA_ASSIGN_OR_RETURN(std::string image, StringAt(c, "image", at, false));
  return absl::StrCat("image:", image);
}

}  // namespace

absl::StatusOr<std::string> ContainerUserOf(const json& pod, absl::string_view list, size_t i,
                                            const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string user, UserInsideThePod(pod, list, i, path));
  // A pod in a user namespace of its own (hostUsers: false) runs as host user IDs that no other
  // pod has: its user is the pod itself, and the user inside it.
  const json* spec = Member(pod, "spec");
  const json* host_users = Member(*spec, "hostUsers");
  if (host_users == nullptr || host_users->is_null()) return user;
  if (!host_users->is_boolean()) {
    return Bad(path + ".spec.hostUsers",
               absl::StrCat("expected true or false, found ", host_users->dump()));
  }
  if (host_users->get<bool>()) return user;
  const json* meta = Member(pod, "metadata");
  const json* uid = meta == nullptr ? nullptr : Member(*meta, "uid");
  const std::string own = uid != nullptr && uid->is_string() && !uid->get<std::string>().empty()
                              ? uid->get<std::string>()
                              : "new";  // at admission, before the API server gives it a UID
  return absl::StrCat("userns:", own, ":", user);
}

absl::StatusOr<std::string> MpsUserOf(const json& pod, const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(size_t main, MainContainerOf(pod, path));
  return ContainerUserOf(pod, "containers", main, path);
}

absl::StatusOr<GpuRequest> DecodeGpuRequest(const json& pod, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(RequireObject(pod, path));
  return DecodeRequest(pod, path);
}

absl::StatusOr<PodInfo> DecodePod(const json& pod, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(RequireObject(pod, path));
  PodInfo p;
  const json* meta = Member(pod, "metadata");
  if (meta == nullptr) {
    return Bad(path + ".metadata", "required object missing");
  }
  TESSERA_RETURN_IF_ERROR(RequireObject(*meta, path + ".metadata"));
  TESSERA_ASSIGN_OR_RETURN(p.name, StringAt(*meta, "name", path + ".metadata", true));
  TESSERA_ASSIGN_OR_RETURN(p.ns, StringAt(*meta, "namespace", path + ".metadata", false));
  if (p.ns.empty()) {
    p.ns = "default";
  }
  TESSERA_ASSIGN_OR_RETURN(p.uid, StringAt(*meta, "uid", path + ".metadata", false));
  TESSERA_ASSIGN_OR_RETURN(std::string deleted,
                           StringAt(*meta, "deletionTimestamp", path + ".metadata", false));
  p.ending = !deleted.empty();
  if (const json* labels = Member(*meta, "labels"); labels != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(p.labels, StringMap(*labels, path + ".metadata.labels"));
  }
  if (p.uid.empty()) {
    p.uid = absl::StrCat(p.ns, "/", p.name);  // objects not yet stored have no UID
  }
  if (const json* spec = Member(pod, "spec"); spec != nullptr) {
    TESSERA_RETURN_IF_ERROR(RequireObject(*spec, path + ".spec"));
    TESSERA_ASSIGN_OR_RETURN(p.node_name, StringAt(*spec, "nodeName", path + ".spec", false));
    if (const json* priority = Member(*spec, "priority"); priority != nullptr) {
      if (!priority->is_number_integer() || priority->get<int64_t>() < INT32_MIN ||
          priority->get<int64_t>() > INT32_MAX) {
        return Bad(path + ".spec.priority", "expected a 32-bit integer");
      }
      p.priority = static_cast<int32_t>(priority->get<int64_t>());
    }
    TESSERA_ASSIGN_OR_RETURN(std::string policy,
                             StringAt(*spec, "preemptionPolicy", path + ".spec", false));
    p.never_preempts = policy == "Never";
  }
  if (const json* status = Member(pod, "status"); status != nullptr) {
    TESSERA_RETURN_IF_ERROR(RequireObject(*status, path + ".status"));
    TESSERA_ASSIGN_OR_RETURN(p.phase, StringAt(*status, "phase", path + ".status", false));
    TESSERA_ASSIGN_OR_RETURN(p.nominated_node,
                             StringAt(*status, "nominatedNodeName", path + ".status", false));
    TESSERA_ASSIGN_OR_RETURN(std::string started,
                             StringAt(*status, "startTime", path + ".status", false));
    std::string error;
    if (!started.empty() && !absl::ParseTime(absl::RFC3339_full, started, &p.started, &error)) {
      return Bad(path + ".status.startTime", absl::StrCat("expected an RFC 3339 time: ", error));
    }
  }
  if (absl::StatusOr<GpuRequest> req = DecodeRequest(pod, path); req.ok()) {
    p.request = *req;
  } else {
    p.request_error = std::string(req.status().message());
  }
  TESSERA_ASSIGN_OR_RETURN(std::string assignment,
                           MetaString(pod, "annotations", kGpuAssignmentAnnotation, path));
  if (!assignment.empty()) {
    absl::StatusOr<Assignment> a = DecodeAssignment(assignment);
    if (a.ok()) {
      p.assignment = *a;
      // The user its GPU is kept for, as Reserve recorded it (a share of one GPU only).
      if (a->gpus.size() == 1 && a->milli_per_gpu < kGpuMilli) p.assignment->user = p.request.user;
    } else {
      p.assignment_error = absl::StrCat(path, ".metadata.annotations[\"", kGpuAssignmentAnnotation,
                                        "\"]: ", a.status().message());
    }
  }
  return p;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const Requirement& r : match_expressions) {
    auto it = labels.find(r.key);
    const bool has = it != labels.end();
    const bool in =
        has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    if ((r.op == "In" && !in) || (r.op == "NotIn" && in) || (r.op == "Exists" && !has) ||
        (r.op == "DoesNotExist" && has)) {
      return false;
    }
  }
  return true;
}

bool DisruptionBudget::Covers(const std::string& pod_ns, const std::string& pod_name,
                              const std::map<std::string, std::string>& labels) const {
  return pod_ns == ns && !selector.empty() &&
         std::find(disrupted.begin(), disrupted.end(), pod_name) == disrupted.end() &&
         selector.Matches(labels);
}

absl::StatusOr<DisruptionBudget> DecodeDisruptionBudget(const json& pdb, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(RequireObject(pdb, path));
  DisruptionBudget b;
  const json* meta = Member(pdb, "metadata");
  if (meta == nullptr) return Bad(path + ".metadata", "required object missing");
  TESSERA_RETURN_IF_ERROR(RequireObject(*meta, path + ".metadata"));
  TESSERA_ASSIGN_OR_RETURN(b.name, StringAt(*meta, "name", path + ".metadata", true));
  TESSERA_ASSIGN_OR_RETURN(b.ns, StringAt(*meta, "namespace", path + ".metadata", false));
  if (b.ns.empty()) b.ns = "default";
  const json* spec = Member(pdb, "spec");
  const json* selector = spec == nullptr ? nullptr : Member(*spec, "selector");
  if (selector != nullptr) {
    const std::string at = path + ".spec.selector";
    TESSERA_RETURN_IF_ERROR(RequireObject(*selector, at));
    if (const json* m = Member(*selector, "matchLabels"); m != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(b.selector.match_labels, StringMap(*m, at + ".matchLabels"));
    }
    if (const json* exprs = Member(*selector, "matchExpressions"); exprs != nullptr) {
      if (!exprs->is_array()) {
        return Bad(at + ".matchExpressions",
                   absl::StrCat("expected an array, found ", TypeName(*exprs)));
      }
      for (size_t i = 0; i < exprs->size(); ++i) {
        const std::string e = absl::StrCat(at, ".matchExpressions[", i, "]");
        TESSERA_RETURN_IF_ERROR(RequireObject((*exprs)[i], e));
        LabelSelector::Requirement r;
        TESSERA_ASSIGN_OR_RETURN(r.key, StringAt((*exprs)[i], "key", e, true));
        TESSERA_ASSIGN_OR_RETURN(r.op, StringAt((*exprs)[i], "operator", e, true));
        if (r.op != "In" && r.op != "NotIn" && r.op != "Exists" && r.op != "DoesNotExist") {
          return Bad(e + ".operator", absl::StrCat("expected In, NotIn, Exists or DoesNotExist, "
                                                   "found \"",
                                                   r.op, "\""));
        }
        if (const json* values = Member((*exprs)[i], "values"); values != nullptr) {
          if (!values->is_array()) {
            return Bad(e + ".values", absl::StrCat("expected an array, found ", TypeName(*values)));
          }
          for (const json& v : *values) {
            if (!v.is_string()) {
              return Bad(e + ".values", absl::StrCat("expected strings, found ", TypeName(v)));
            }
            r.values.push_back(v.get<std::string>());
          }
        }
        b.selector.match_expressions.push_back(std::move(r));
      }
    }
  }
  if (const json* status = Member(pdb, "status"); status != nullptr) {
    TESSERA_RETURN_IF_ERROR(RequireObject(*status, path + ".status"));
    if (const json* allowed = Member(*status, "disruptionsAllowed"); allowed != nullptr) {
      if (!allowed->is_number_integer() || allowed->get<int64_t>() < 0 ||
          allowed->get<int64_t>() > INT32_MAX) {
        return Bad(path + ".status.disruptionsAllowed", "expected a 32-bit integer >= 0");
      }
      b.disruptions_allowed = static_cast<int32_t>(allowed->get<int64_t>());
    }
    if (const json* disrupted = Member(*status, "disruptedPods"); disrupted != nullptr) {
      TESSERA_RETURN_IF_ERROR(RequireObject(*disrupted, path + ".status.disruptedPods"));
      for (auto it = disrupted->begin(); it != disrupted->end(); ++it) {
        b.disrupted.push_back(it.key());
      }
    }
  }
  return b;
}

absl::StatusOr<OnlineNode> DecodeNode(const json& node, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(RequireObject(node, path));
  OnlineNode n;
  const json* meta = Member(node, "metadata");
  if (meta == nullptr) {
    return Bad(path + ".metadata", "required object missing");
  }
  TESSERA_ASSIGN_OR_RETURN(n.name, StringAt(*meta, "name", path + ".metadata", true));
  TESSERA_ASSIGN_OR_RETURN(std::string product,
                           MetaString(node, "labels", "nvidia.com/gpu.product", path));
  if (product.empty() || absl::StrContains(product, "-MIG-")) {
    return n;  // no GPU feature discovery label, or MIG devices: not shared by the extender
  }
  std::string labels = absl::StrCat(path, ".metadata.labels");
  TESSERA_ASSIGN_OR_RETURN(std::string memory_text,
                           MetaString(node, "labels", "nvidia.com/gpu.memory", path));
  std::optional<int64_t> memory_mib;
  if (!memory_text.empty()) {
    int64_t mib = 0;
    if (!absl::SimpleAtoi(memory_text, &mib) || mib <= 0) {
      return Bad(labels + "[\"nvidia.com/gpu.memory\"]",
                 absl::StrCat("expected memory in MiB, found \"", memory_text, "\""));
    }
    memory_mib = mib;
  }
  absl::StatusOr<const model::GpuModel*> gm =
      model::GpuCatalog::Default().Lookup(product, memory_mib);
  if (gm.ok()) {
    n.model = (*gm)->name;
    n.gpu_memory_bytes = memory_mib.has_value() ? *memory_mib * kMiB : (*gm)->memory_bytes;
  } else if (memory_mib.has_value()) {
    // A model the catalog lacks (an A40, an RTX card): shared by the memory GFD reports, under
    // the product name, which no pod's model constraint (catalog names) matches. Before, one
    // such node made the whole node list unreadable and the extender could not start.
    n.model = std::string(absl::StripAsciiWhitespace(product));
    n.gpu_memory_bytes = *memory_mib * kMiB;
  } else {
    return n;  // nor its memory: not shared by the extender, as without GFD
  }
  // Allocatable counts what the device plugin advertises now; the label what GFD saw.
  std::string count_text;
  const json* status = Member(node, "status");
  const json* alloc = status == nullptr ? nullptr : Member(*status, "allocatable");
  if (alloc != nullptr && alloc->is_object() && alloc->contains("nvidia.com/gpu") &&
      (*alloc)["nvidia.com/gpu"].is_string()) {
    count_text = (*alloc)["nvidia.com/gpu"].get<std::string>();
  } else {
    TESSERA_ASSIGN_OR_RETURN(count_text, MetaString(node, "labels", "nvidia.com/gpu.count", path));
  }
  int64_t count = 0;
  if (!absl::SimpleAtoi(count_text, &count) || count < 0 || count > 64) {
    return Bad(path, absl::StrCat("expected a GPU count 0-64 in status.allocatable[\"nvidia.com/"
                                  "gpu\"] or the nvidia.com/gpu.count label, found \"",
                                  count_text, "\""));
  }
  n.gpus = static_cast<int>(count);
  return n;
}

std::vector<std::string> ExtenderArgs::names() const {
  if (nodes.has_value()) {
    std::vector<std::string> out;
    for (const OnlineNode& n : *nodes) {
      out.push_back(n.name);
    }
    return out;
  }
  return node_names.value_or(std::vector<std::string>());
}

absl::StatusOr<ExtenderArgs> DecodeExtenderArgs(absl::string_view body) {
  TESSERA_ASSIGN_OR_RETURN(json j, ParseJson(body, "ExtenderArgs"));
  TESSERA_RETURN_IF_ERROR(RequireObject(j, "ExtenderArgs"));
  ExtenderArgs args;
  const json* pod = Member(j, "pod");
  if (pod == nullptr) {
    return Bad("pod", "required object missing");
  }
  TESSERA_ASSIGN_OR_RETURN(args.pod, DecodePod(*pod, "pod"));
  if (const json* nodes = Member(j, "nodes"); nodes != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(const json* items, ItemsOf(*nodes, "nodes"));
    if (items != nullptr) args.node_objects.assign(items->begin(), items->end());
    args.nodes.emplace();
    for (size_t i = 0; i < args.node_objects.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(
          OnlineNode n, DecodeNode(args.node_objects[i], absl::StrCat("nodes.items[", i, "]")));
      args.nodes->push_back(std::move(n));
    }
  }
  if (const json* names = Member(j, "nodenames"); names != nullptr) {
    if (!names->is_array()) {
      return Bad("nodenames", absl::StrCat("expected an array, found ", TypeName(*names)));
    }
    args.node_names.emplace();
    for (size_t i = 0; i < names->size(); ++i) {
      if (!(*names)[i].is_string()) {
        return Bad(absl::StrCat("nodenames[", i, "]"), "expected a string");
      }
      args.node_names->push_back((*names)[i].get<std::string>());
    }
  }
  if (!args.nodes.has_value() && !args.node_names.has_value()) {
    return Bad("ExtenderArgs", "expected nodes (nodeCacheCapable: false) or nodenames (true)");
  }
  return args;
}

absl::StatusOr<BindingArgs> DecodeBindingArgs(absl::string_view body) {
  TESSERA_ASSIGN_OR_RETURN(json j, ParseJson(body, "ExtenderBindingArgs"));
  TESSERA_RETURN_IF_ERROR(RequireObject(j, "ExtenderBindingArgs"));
  BindingArgs b;
  TESSERA_ASSIGN_OR_RETURN(b.pod_name, StringAt(j, "podName", "ExtenderBindingArgs", true));
  TESSERA_ASSIGN_OR_RETURN(b.pod_namespace,
                           StringAt(j, "podNamespace", "ExtenderBindingArgs", true));
  TESSERA_ASSIGN_OR_RETURN(b.pod_uid, StringAt(j, "podUID", "ExtenderBindingArgs", true));
  TESSERA_ASSIGN_OR_RETURN(b.node, StringAt(j, "node", "ExtenderBindingArgs", true));
  for (const std::string* s : {&b.pod_name, &b.pod_namespace, &b.pod_uid, &b.node}) {
    if (s->empty()) {
      return Bad("ExtenderBindingArgs", "podName, podNamespace, podUID and node must be non-empty");
    }
  }
  return b;
}

absl::StatusOr<PreemptionArgs> DecodePreemptionArgs(absl::string_view body) {
  const std::string what = "ExtenderPreemptionArgs";
  TESSERA_ASSIGN_OR_RETURN(json j, ParseJson(body, what));
  TESSERA_RETURN_IF_ERROR(RequireObject(j, what));
  PreemptionArgs args;
  const json* pod = Member(j, "Pod");
  if (pod == nullptr) return Bad("Pod", "required object missing");
  TESSERA_ASSIGN_OR_RETURN(args.pod, DecodePod(*pod, "Pod"));
  // Both maps have the shape {node: {Pods: [...], NumPDBViolations: n}}; their pods are whole
  // objects (metadata.uid) or MetaPods ({UID}).
  bool any = false;
  for (const char* key : {"NodeNameToVictims", "NodeNameToMetaVictims"}) {
    const json* map = Member(j, key);
    if (map == nullptr) continue;
    any = true;
    if (!map->is_object()) {
      return Bad(key, absl::StrCat("expected an object, found ", TypeName(*map)));
    }
    const bool meta = absl::string_view(key) == "NodeNameToMetaVictims";
    for (auto it = map->begin(); it != map->end(); ++it) {
      const std::string path = absl::StrCat(key, "[\"", it.key(), "\"]");
      NodeVictims& v = args.victims[it.key()];
      if (it->is_null()) continue;
      TESSERA_RETURN_IF_ERROR(RequireObject(*it, path));
      if (const json* n = Member(*it, "NumPDBViolations"); n != nullptr) {
        if (!n->is_number_integer()) return Bad(path + ".NumPDBViolations", "expected an integer");
        v.pdb_violations = n->get<int64_t>();
      }
      const json* pods = Member(*it, "Pods");
      if (pods == nullptr) continue;
      if (!pods->is_array()) {
        return Bad(path + ".Pods", absl::StrCat("expected an array, found ", TypeName(*pods)));
      }
      for (size_t i = 0; i < pods->size(); ++i) {
        const std::string pod_path = absl::StrCat(path, ".Pods[", i, "]");
        const json& victim = (*pods)[i];
        std::string uid;
        if (meta) {
          TESSERA_RETURN_IF_ERROR(RequireObject(victim, pod_path));
          TESSERA_ASSIGN_OR_RETURN(uid, StringAt(victim, "UID", pod_path, true));
        } else {
          TESSERA_ASSIGN_OR_RETURN(PodInfo p, DecodePod(victim, pod_path));
          uid = p.uid;
        }
        v.uids.push_back(std::move(uid));
      }
    }
  }
  if (!any) {
    return Bad(what,
               "expected NodeNameToVictims (nodeCacheCapable: false) or "
               "NodeNameToMetaVictims (true)");
  }
  return args;
}

json EncodePreemptionResult(const std::map<std::string, NodeVictims>& victims) {
  json nodes = json::object();
  for (const auto& [node, v] : victims) {
    json pods = json::array();
    for (const std::string& uid : v.uids) pods.push_back({{"UID", uid}});
    nodes[node] = {{"Pods", std::move(pods)}, {"NumPDBViolations", v.pdb_violations}};
  }
  return {{"NodeNameToMetaVictims", std::move(nodes)}};
}

json EncodeFilterResult(const ExtenderArgs& args,
                        const placement::gpushare::FilterOutcome& outcome) {
  json r = json::object();
  if (args.nodes.has_value()) {
    json items = json::array();
    for (size_t i = 0; i < args.nodes->size(); ++i) {
      const std::string& name = (*args.nodes)[i].name;
      if (std::find(outcome.fit.begin(), outcome.fit.end(), name) != outcome.fit.end()) {
        items.push_back(args.node_objects[i]);
      }
    }
    r["nodes"] = {{"apiVersion", "v1"},
                  {"kind", "NodeList"},
                  {"metadata", json::object()},
                  {"items", std::move(items)}};
  } else {
    r["nodenames"] = outcome.fit;
  }
  r["failedNodes"] = outcome.failed;
  r["failedAndUnresolvableNodes"] = outcome.unresolvable;
  r["error"] = "";
  return r;
}

json EncodeFilterError(const std::string& error) {
  return {{"nodenames", nullptr}, {"failedNodes", json::object()}, {"error", error}};
}

json EncodePriorities(const std::vector<std::pair<std::string, int64_t>>& scores) {
  json r = json::array();
  for (const auto& [host, score] : scores) {
    r.push_back({{"host", host}, {"score", score}});
  }
  return r;
}

json EncodeBindingResult(const std::string& error) { return {{"error", error}}; }

std::string EncodeAssignment(const Assignment& a) {
  json j = {{"node", a.node}, {"gpus", a.gpus}, {"milliPerGpu", a.milli_per_gpu}};
  return j.dump();
}

std::map<std::string, std::string> AssignmentAnnotations(const Assignment& a,
                                                         int64_t gpu_memory_bytes) {
  std::map<std::string, std::string> out = {
      {kGpuAssignmentAnnotation, EncodeAssignment(a)},
      {kVisibleDevicesAnnotation, absl::StrJoin(a.gpus, ",")},
      {kMpsThreadPercentageAnnotation,
       absl::StrCat(std::clamp<int64_t>((a.milli_per_gpu + 9) / 10, 1, 100))},
      {kGpuMemoryFractionAnnotation, absl::StrFormat("%.3f", a.milli_per_gpu / 1000.0)},
  };
  if (gpu_memory_bytes > 0) {
    // The share's memory in MiB, rounded down, as CUDA_MPS_PINNED_DEVICE_MEM_LIMIT reads it: one
    // "ordinal=limit" per GPU the container sees (ordinals count from 0 in the visible order).
    // (Bytes x milli stays far inside int64: 2^63 bytes / 1000 is 9.2 PB.)
    const int64_t mib = gpu_memory_bytes * a.milli_per_gpu / kGpuMilli / (int64_t{1} << 20);
    std::vector<std::string> limits;
    for (size_t i = 0; i < a.gpus.size(); ++i) limits.push_back(absl::StrCat(i, "=", mib, "M"));
    out[kMpsMemLimitAnnotation] = absl::StrJoin(limits, ",");
  }
  return out;
}

absl::StatusOr<Assignment> DecodeAssignment(absl::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(json j, ParseJson(text, kGpuAssignmentAnnotation));
  TESSERA_RETURN_IF_ERROR(RequireObject(j, kGpuAssignmentAnnotation));
  Assignment a;
  TESSERA_ASSIGN_OR_RETURN(a.node, StringAt(j, "node", kGpuAssignmentAnnotation, true));
  const json* gpus = Member(j, "gpus");
  if (gpus == nullptr || !gpus->is_array()) {
    return Bad(absl::StrCat(kGpuAssignmentAnnotation, ".gpus"), "expected an array of indices");
  }
  for (const json& g : *gpus) {
    if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() > 63) {
      return Bad(absl::StrCat(kGpuAssignmentAnnotation, ".gpus"),
                 absl::StrCat("expected GPU indices 0-63, found ", QuoteJson(g)));
    }
    a.gpus.push_back(g.get<int>());
  }
  const json* milli = Member(j, "milliPerGpu");
  if (milli == nullptr || !milli->is_number_integer() || milli->get<int64_t>() < 0 ||
      milli->get<int64_t>() > kGpuMilli) {
    return Bad(absl::StrCat(kGpuAssignmentAnnotation, ".milliPerGpu"),
               "expected an integer 0-1000");
  }
  a.milli_per_gpu = milli->get<int64_t>();
  return a;
}

namespace {

// The items of a v1 list (PodList, NodeList, kubectl's List), each decoded by `decode`.
template <typename T, typename Decode>
absl::StatusOr<std::vector<T>> DecodeList(absl::string_view body, absl::string_view kind,
                                          std::string* continue_token,
                                          std::string* resource_version, Decode decode) {
  TESSERA_ASSIGN_OR_RETURN(json j, ParseJson(body, kind));
  TESSERA_ASSIGN_OR_RETURN(const json* items, ItemsOf(j, std::string(kind)));
  for (auto [out, key] :
       {std::pair{continue_token, "continue"}, std::pair{resource_version, "resourceVersion"}}) {
    if (out == nullptr) continue;
    out->clear();
    if (const json* meta = Member(j, "metadata"); meta != nullptr) {
      TESSERA_RETURN_IF_ERROR(RequireObject(*meta, absl::StrCat(kind, ".metadata")));
      TESSERA_ASSIGN_OR_RETURN(*out, StringAt(*meta, key, absl::StrCat(kind, ".metadata"), false));
    }
  }
  std::vector<T> out;
  if (items == nullptr) return out;
  out.reserve(items->size());
  for (size_t i = 0; i < items->size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(T v, decode((*items)[i], absl::StrCat("items[", i, "]")));
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<PodInfo>> DecodePodList(absl::string_view body,
                                                   std::string* continue_token,
                                                   std::string* resource_version) {
  return DecodeList<PodInfo>(
      body, "PodList", continue_token, resource_version,
      [](const json& j, const std::string& path) { return DecodePod(j, path); });
}

absl::StatusOr<std::vector<DisruptionBudget>> DecodeDisruptionBudgetList(
    absl::string_view body, std::string* continue_token, std::string* resource_version) {
  return DecodeList<DisruptionBudget>(
      body, "PodDisruptionBudgetList", continue_token, resource_version,
      [](const json& j, const std::string& path) { return DecodeDisruptionBudget(j, path); });
}

absl::StatusOr<std::vector<OnlineNode>> DecodeNodeListJson(absl::string_view body,
                                                           std::string* continue_token,
                                                           std::string* resource_version) {
  return DecodeList<OnlineNode>(
      body, "NodeList", continue_token, resource_version,
      [](const json& j, const std::string& path) { return DecodeNode(j, path); });
}

namespace {

// A watch event's envelope: its type checked, the ERROR Status's code and message, and the
// object (null for ERROR) with its metadata.resourceVersion.
struct WatchEnvelope {
  std::string type;
  const json* object = nullptr;
  std::string resource_version;
  int64_t error_code = 0;
  std::string error_message;
};
absl::Status DecodeWatchEnvelope(const json& j, WatchEnvelope* e) {
  TESSERA_RETURN_IF_ERROR(RequireObject(j, "event"));
  TESSERA_ASSIGN_OR_RETURN(e->type, StringAt(j, "type", "event", true));
  const json* object = Member(j, "object");
  if (object == nullptr) return Bad("event.object", "required object missing");
  TESSERA_RETURN_IF_ERROR(RequireObject(*object, "event.object"));
  if (e->type == "ERROR") {  // a metav1.Status: 410 when the version asked for is compacted away
    const json* code = Member(*object, "code");
    if (code != nullptr && code->is_number_integer()) e->error_code = code->get<int64_t>();
    TESSERA_ASSIGN_OR_RETURN(e->error_message, StringAt(*object, "message", "event.object", false));
    return absl::OkStatus();
  }
  if (e->type != "ADDED" && e->type != "MODIFIED" && e->type != "DELETED" &&
      e->type != "BOOKMARK") {
    return Bad("event.type",
               absl::StrCat("expected ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, found \"",
                            e->type, "\""));
  }
  const json* meta = Member(*object, "metadata");
  if (meta == nullptr) return Bad("event.object.metadata", "required object missing");
  TESSERA_RETURN_IF_ERROR(RequireObject(*meta, "event.object.metadata"));
  TESSERA_ASSIGN_OR_RETURN(e->resource_version,
                           StringAt(*meta, "resourceVersion", "event.object.metadata", true));
  e->object = object;  // a bookmark's object carries its resourceVersion only
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PodEvent> DecodePodEvent(absl::string_view line) {
  TESSERA_ASSIGN_OR_RETURN(json j, ParseJson(line, "watch event"));
  WatchEnvelope w;
  TESSERA_RETURN_IF_ERROR(DecodeWatchEnvelope(j, &w));
  PodEvent e{.type = w.type,
             .pod = {},
             .resource_version = w.resource_version,
             .error_code = w.error_code,
             .error_message = w.error_message};
  if (w.object != nullptr && e.type != "BOOKMARK") {
    TESSERA_ASSIGN_OR_RETURN(e.pod, DecodePod(*w.object, "event.object"));
  }
  return e;
}

absl::StatusOr<NodeEvent> DecodeNodeEvent(absl::string_view line) {
  TESSERA_ASSIGN_OR_RETURN(json j, ParseJson(line, "watch event"));
  WatchEnvelope w;
  TESSERA_RETURN_IF_ERROR(DecodeWatchEnvelope(j, &w));
  NodeEvent e{.type = w.type,
              .name = "",
              .node = {},
              .resource_version = w.resource_version,
              .error_code = w.error_code,
              .error_message = w.error_message};
  if (w.object == nullptr || e.type == "BOOKMARK") return e;
  TESSERA_ASSIGN_OR_RETURN(
      e.name, StringAt(*Member(*w.object, "metadata"), "name", "event.object.metadata", true));
  if (e.name.empty()) return Bad("event.object.metadata.name", "expected a node name, found \"\"");
  if (e.type != "DELETED") {  // a deleted node is forgotten by name, whatever its object says
    TESSERA_ASSIGN_OR_RETURN(e.node, DecodeNode(*w.object, "event.object"));
  }
  return e;
}

}  // namespace tessera::adapters
